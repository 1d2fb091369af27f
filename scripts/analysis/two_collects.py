"""Two `omnidecision collect` processes on one `--out`, repeated: one writes, the other stops with one line.

Each trial starts two identical collections of the synthetic teacher on the same fresh folder (the user who submits
the same array task twice): both at once, the second a moment later, or both restarting a shard that holds earlier
runs with `error` records (which a start moves aside before retrying them). A trial passes when every (task, sample)
has exactly one record in the shard (0 duplicated, 0 lost), one process exits 0 and the other exits non-zero with a
single stderr line naming the lock's holder (host, pid, since).

    PYTHONPATH=. python scripts/analysis/two_collects.py --trials 20 --tasks 60 --out runs/two-collects
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from omnidecision.protocol.records import run_key
from omnidecision.rollout.store import read_records, shard_path

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "collect" / "synthetic-teacher.yaml"
CLI = [sys.executable, "-m", "omnidecision.cli"]
SAMPLES = 2  # the recipe's


def collect_cmd(tasks: Path, out: Path) -> list[str]:
    return [*CLI, "collect", "--config", str(RECIPE), "--tasks.path", str(tasks), "--out", str(out),
            "--no-progress"]


def seed_with_errors(reference: Path, out: Path, keep: int, errors: int) -> None:
    """OUT's shard = the first `keep` records of a finished collection, the first `errors` of them made `error`."""
    out.mkdir(parents=True)
    lines = []
    for i, (_, rec) in enumerate(read_records(shard_path(reference, 0, 1))):
        if i >= keep:
            break
        if i < errors:
            rec = rec.model_copy(update={"outcome": "error", "answer": None})
        lines.append(rec.model_dump_json() + "\n")
    shard_path(out, 0, 1).write_text("".join(lines), encoding="utf-8")
    shutil.copy(reference / "manifest.json", out / "manifest.json")


def trial(i: int, tasks: Path, out: Path, reference: Path, n_tasks: int) -> dict:
    mode = ("together", "staggered", "restart-with-errors")[i % 3]
    if mode == "restart-with-errors":
        seed_with_errors(reference, out, keep=n_tasks, errors=n_tasks // 4)
    first = subprocess.Popen(collect_cmd(tasks, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if mode == "staggered":
        time.sleep(1.5)  # the first is past its imports, reading or writing the shard
    second = subprocess.Popen(collect_cmd(tasks, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = [(p.wait(timeout=600), *p.communicate()) for p in (first, second)]
    keys = Counter(run_key(rec) for _, rec in read_records(shard_path(out, 0, 1)))
    expected = {run_key(rec) for _, rec in read_records(shard_path(reference, 0, 1))}  # every (task, sample)
    refused = [(rc, err.strip().splitlines()) for rc, _, err in results if rc != 0]
    return {"trial": i, "mode": mode, "exit_codes": [r[0] for r in results],
            "duplicated": sum(c - 1 for c in keys.values() if c > 1), "lost": len(expected - set(keys)),
            "extra": len(set(keys) - expected), "errors_in_shard": sum(
                1 for _, rec in read_records(shard_path(out, 0, 1)) if rec.outcome == "error"),
            "refusal": refused[0][1] if refused else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=60, help="synthetic tasks per collection (x2 samples)")
    ap.add_argument("--out", type=Path, default=Path("runs/two-collects"))
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    a = ap.parse_args()
    shutil.rmtree(a.out, ignore_errors=True)  # this script's own scratch folder
    a.out.mkdir(parents=True)
    tasks = a.out / "synth"
    subprocess.run([*CLI, "tasks", "synth", "--n", str(a.tasks), "--out", str(tasks)], check=True,
                   capture_output=True)
    reference = a.out / "reference"
    subprocess.run(collect_cmd(tasks, reference), check=True, capture_output=True)
    rows = []
    for i in range(a.trials):
        row = trial(i, tasks, a.out / f"trial-{i:02d}", reference, a.tasks)
        rows.append(row)
        print(json.dumps(row), flush=True)
    one_line = sum(1 for r in rows if r["refusal"] is not None and len(r["refusal"]) == 1
                   and "another process is writing" in r["refusal"][0])
    summary = {"trials": len(rows), "duplicated": sum(r["duplicated"] for r in rows),
               "lost": sum(r["lost"] for r in rows), "extra": sum(r["extra"] for r in rows),
               "one_exit_0_one_refused": sum(1 for r in rows if sorted(r["exit_codes"])[0] == 0
                                             and sorted(r["exit_codes"])[1] != 0),
               "refused_with_one_line": one_line, "tasks": a.tasks, "samples": SAMPLES}
    print(json.dumps(summary))
    if a.json:
        a.json.write_text(json.dumps({"summary": summary, "trials": rows}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
