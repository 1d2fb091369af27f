"""The run viewer at scale: how long `omnidecision view` takes to write a 10,000-run site, and how long its index
takes to load, filter and page in headless Chromium, against the same site with 1,000 runs (the baseline).

Runs are real: `omnidecision tasks synth` + `omnidecision collect` (scripted teacher with noise, 2 samples) make
`--base-runs` runs (or `--real-runs`, fewer, repeated under distinct task ids up to `--base-runs`); the 10,000-run
collection repeats them the same way (the viewer's work does not depend on whether two runs' contents are
equal). Chromium is the distribution's (`make browser`).

    python -m bench.bench_view --runs 10000 --base-runs 1000
    python -m bench.bench_view --smoke     # smoke size: runs, measures nothing (bench/common.py)
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Run, parse_args
from bench.schema import Arm, measure

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


def measure_index(browser, index: Path, repeats: int) -> dict[str, list[float]]:
    """Per fresh page (`repeats` of them): load → rows shown, one filter change, one page change (seconds)."""
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
        # the filter picks "forced" (present at full size); a smoke-size site may hold no forced run: another outcome
        # (and the smoke size keeps more runs than one page of 100, so that "next" has a page 2)
        outcome = page.evaluate("() => { const o = [...document.querySelectorAll('#f-outcome option')]"
                                ".map(x => x.value).filter(Boolean); return o.includes('forced') ? 'forced' : o[0]; }")
        t0 = time.perf_counter()
        page.select_option("#f-outcome", outcome)
        page.wait_for_function(f"document.querySelectorAll('#rows tr.run:not(.o-{outcome})').length === 0")
        filt.append(time.perf_counter() - t0)
        page.select_option("#f-outcome", "")
        t0 = time.perf_counter()
        page.click("#next")
        page.wait_for_function("document.getElementById('count').textContent.includes('page 2/')")
        nxt.append(time.perf_counter() - t0)
        assert not errors, errors
        page.close()
    return {"index_ready_s": ready, "load_event_s": load, "filter_s": filt, "next_page_s": nxt}


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
    p.add_argument("--repeats", type=int, default=3, help="fresh browser pages per site, alternating the sites")
    p.add_argument("--real-runs", type=int, default=None, help="runs collected for real (default: --base-runs); "
                   "both sites repeat them under distinct task ids")
    # smoke: each site keeps more runs than one page of 100, so that "next" has a page 2 (measure_index)
    a = parse_args(p, argv, smoke={"runs": 130, "base_runs": 110, "real_runs": 8})
    real_runs = a.real_runs or a.base_runs
    run = Run("view", a.smoke)

    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("no chromium on PATH: run `make browser`")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        # -- real runs
        t0 = time.perf_counter()
        cli("tasks", "synth", "--n", str(max(1, real_runs // 2)), "--seed", "11", "--out", str(tmp_path / "synth"))
        cli("collect", "--config", str(ROOT / "configs/collect/synthetic-teacher.yaml"), "--tasks.path",
            str(tmp_path / "synth"), "--out", str(tmp_path / "collect"), "--samples", "2", "--no-progress")
        collect_s = time.perf_counter() - t0
        base_file = next((tmp_path / "collect").glob("trajectories*.jsonl"))
        replicate(base_file, tmp_path / "base" / "trajectories.jsonl", a.base_runs)
        replicate(base_file, tmp_path / "big" / "trajectories.jsonl", a.runs)
        # -- the two sites (written once each: details, not a repeated figure)
        sites = {"base": site(tmp_path / "base" / "trajectories.jsonl", tmp_path / "site-base"),
                 "big": site(tmp_path / "big" / "trajectories.jsonl", tmp_path / "site-big")}
        # -- the two index pages in the browser, one fresh page per repeat, alternating which site goes first
        timings: dict[str, dict[str, list[float]]] = {"base": {}, "big": {}}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=FLAGS)
            for r in range(a.repeats):
                for name in (("base", "big") if r % 2 == 0 else ("big", "base")):
                    for key, vals in measure_index(browser, tmp_path / f"site-{name}" / "index.html", 1).items():
                        timings[name].setdefault(key, []).extend(vals)
            browser.close()
    arms = {name: Arm(label=f"{n:,} runs", figures={k: measure(v, "s") for k, v in timings[name].items()})
            for name, n in (("base", a.base_runs), ("big", a.runs))}
    result = run.result(
        title=f"omnidecision view: index load in headless Chromium, {a.runs:,} runs vs {a.base_runs:,}",
        arms=arms, candidate="big", baseline="base", metric="index_ready_s", repeats=a.repeats,
        better=f"lower: the {a.runs:,}-run index takes that many times the {a.base_runs:,}-run index's time to show "
               "its rows (1 = size does not matter)",
        notes=["each site is written once (details.sites: write time, pages, sizes): not a repeated figure"],
        details={"real_runs": real_runs, "collect_real_runs_s": round(collect_s, 1), "sites": sites})
    path = run.write(result)
    big, base = result.arms["big"].figures, result.arms["base"].figures
    print(f"{a.runs} runs: site written in {sites['big']['write_s']} s; index ready in "
          f"{big['index_ready_s'].median} s (baseline {base['index_ready_s'].median} s) → {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
