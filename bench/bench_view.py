"""The run viewer at scale: how long `omnidecision view` takes to write a 10,000-run site, and how long its index
takes to load, filter and page in headless Chromium, against the same site with 1,000 runs (the baseline).

Runs are real: `omnidecision tasks synth` + `omnidecision collect` (scripted teacher with noise, 2 samples) make
`--base-runs` runs; the 10,000-run collection repeats them under distinct task ids (the viewer's work does not
depend on whether two runs' contents are equal). Chromium is the distribution's (`make browser`).

    .venv/bin/python -m bench.bench_view --runs 10000 --base-runs 1000
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import write_result

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "omnidecision.cli", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def replicate(src: Path, dst: Path, n: int) -> int:
    """Write `n` records to `dst`, cycling through the records of `src` with task ids made distinct."""
    lines = [json.loads(line) for line in src.read_text("utf-8").splitlines() if line.strip()]
    dst.parent.mkdir(parents=True, exist_ok=True)
    with dst.open("w", encoding="utf-8") as fh:
        for i in range(n):
            rec = dict(lines[i % len(lines)])
            copy = i // len(lines)
            rec["task_id"] = f"{rec['task_id']}-r{copy}"
            rec["run_id"] = f"{rec['run_id']}-r{copy}"
            fh.write(json.dumps(rec) + "\n")
    return n


def measure_index(browser, index: Path, repeats: int) -> dict[str, float]:
    """Median over `repeats` fresh pages: load → rows shown, one filter change, one page change (seconds)."""
    load, ready, filt, nxt = [], [], [], []
    for _ in range(repeats):
        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        t0 = time.perf_counter()
        page.goto(index.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        ready.append(time.perf_counter() - t0)
        load.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000)
        t0 = time.perf_counter()
        page.select_option("#f-outcome", "forced")
        page.wait_for_function("document.querySelectorAll('#rows tr.run:not(.o-forced)').length === 0")
        filt.append(time.perf_counter() - t0)
        page.select_option("#f-outcome", "")
        t0 = time.perf_counter()
        page.click("#next")
        page.wait_for_function("document.getElementById('count').textContent.includes('page 2/')")
        nxt.append(time.perf_counter() - t0)
        assert not errors, errors
        page.close()
    return {"index_ready_s": round(statistics.median(ready), 3), "load_event_s": round(statistics.median(load), 3),
            "filter_s": round(statistics.median(filt), 3), "next_page_s": round(statistics.median(nxt), 3)}


def site(runs_file: Path, out: Path) -> dict[str, float]:
    from omnidecision.view import write_view

    t0 = time.perf_counter()
    write_view([runs_file], out)
    wall = time.perf_counter() - t0
    return {"write_s": round(wall, 2), "pages": sum(1 for _ in (out / "run").rglob("*.html")),
            "runs_js_mb": round((out / "assets" / "runs.js").stat().st_size / 2**20, 2),
            "site_mb": round(sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20, 1)}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10_000)
    p.add_argument("--base-runs", type=int, default=1_000, help="runs collected for real (and the baseline site)")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)

    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("no chromium on PATH: run `make browser`")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        # -- real runs
        t0 = time.perf_counter()
        cli("tasks", "synth", "--n", str(max(1, a.base_runs // 2)), "--seed", "11", "--out", str(tmp_path / "synth"))
        cli("collect", "--config", str(ROOT / "configs/collect/synthetic-teacher.yaml"), "--tasks",
            str(tmp_path / "synth"), "--out", str(tmp_path / "collect"), "--samples", "2", "--no-progress")
        collect_s = time.perf_counter() - t0
        base_file = next((tmp_path / "collect").glob("trajectories*.jsonl"))
        replicate(base_file, tmp_path / "base" / "trajectories.jsonl", a.base_runs)
        replicate(base_file, tmp_path / "big" / "trajectories.jsonl", a.runs)
        # -- the two sites
        sites = {"base": site(tmp_path / "base" / "trajectories.jsonl", tmp_path / "site-base"),
                 "big": site(tmp_path / "big" / "trajectories.jsonl", tmp_path / "site-big")}
        # -- the two index pages in the browser
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=FLAGS)
            for name in ("base", "big"):
                sites[name].update(measure_index(browser, tmp_path / f"site-{name}" / "index.html", a.repeats))
            browser.close()
    base, big = sites["base"], sites["big"]
    result = {
        "benchmark": "omnidecision view: writing the site and loading its index in headless Chromium",
        "runs": {"base": a.base_runs, "big": a.runs}, "collect_real_runs_s": round(collect_s, 1),
        "base": base, "big": big,
        "ratios_big_over_base": {k: round(big[k] / base[k], 2) if base[k] else None
                                 for k in ("write_s", "index_ready_s", "filter_s", "next_page_s")},
    }
    print(f"{a.runs} runs: site written in {big['write_s']} s ({big['pages']} run pages, {big['site_mb']} MiB); "
          f"index ready in {big['index_ready_s']} s, a filter in {big['filter_s']} s, next page in "
          f"{big['next_page_s']} s (baseline {a.base_runs} runs: ready in {base['index_ready_s']} s, written in "
          f"{base['write_s']} s)")
    print(f"→ {write_result('view', result)}")
    return result


if __name__ == "__main__":
    main()
