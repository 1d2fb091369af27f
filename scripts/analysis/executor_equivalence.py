"""The demo's plan on the SLURM executor against the local one: every planner's accuracy and per-task outcomes, the
wall times, and what a restart submits. Brings up the local two-node cluster (scripts/slurm/local-cluster.sh, as
root) in a scratch folder and takes it down after.

    PYTHONPATH=. .venv/bin/python scripts/analysis/executor_equivalence.py --out runs/executors \\
        --results docs/results/executor-equivalence.json --sbatch-args=--mem=6G   # the demo at --quick size

Writes the result file: per planner the two accuracies and the tasks whose outcome or answer differ, both wall
times, the restart's count of submitted jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "slurm" / "local-cluster.sh"


def per_task(folder: Path) -> dict[str, dict[str, tuple[str, str | None]]]:
    """planner → task id → (outcome, answer), from each evaluation's trajectories."""
    out: dict[str, dict[str, tuple[str, str | None]]] = {}
    for test in sorted((folder / "eval").glob("*/test")):
        runs = [json.loads(line) for f in sorted(test.glob("trajectories*.jsonl")) for line in f.open()]
        out[test.parent.name] = {f"{r['task_id']}#{r.get('sample', 0)}": (r["outcome"], r.get("answer")) for r in runs}
    return out


def demo(out: Path, env: dict[str, str], *extra: str) -> tuple[float, str]:
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "omnidecision.cli", "demo", "--quick", "--out", str(out), *extra],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"demo {' '.join(extra)} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return time.monotonic() - start, res.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("runs/executors"))
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--sbatch-args", default="--mem=3G")
    ap.add_argument("--compare-only", action="store_true", help="compare the folders an earlier run left in --out")
    args = ap.parse_args()
    out = args.out.resolve()
    state = out / "cluster"
    env = dict(os.environ, OD_SLURM_DIR=str(state), OD_SLURM_PORT="17300", SLURM_CONF=str(state / "slurm.conf"))
    timing = out / "timing.json"
    if not args.compare_only:
        subprocess.run(["bash", str(CLUSTER), "up"], env=env, check=True)
        try:
            local_s, _ = demo(out / "local", env, "--jobs", "1")
            slurm_s, _ = demo(out / "slurm", env, "--executor", "slurm", "--sbatch-args", args.sbatch_args)
            _, again = demo(out / "slurm", env, "--executor", "slurm", "--sbatch-args", args.sbatch_args)
        finally:
            subprocess.run(["bash", str(CLUSTER), "down"], env=env)
        timing.write_text(json.dumps({"local_s": local_s, "slurm_s": slurm_s,
                                      "restart_submitted": again.count("submitted as job"),
                                      "restart_kept": again.count("finished in an earlier run")}))
    t = json.loads(timing.read_text())  # what the runs measured (--compare-only: an earlier run's)
    local_s, slurm_s = t["local_s"], t["slurm_s"]
    here, there = per_task(out / "local"), per_task(out / "slurm")
    summaries = [json.loads((out / d / "summary.json").read_text()) for d in ("local", "slurm")]
    planners = {}
    for name in sorted(set(summaries[0]["planners"]) | set(summaries[1]["planners"])):
        a, b = (s["planners"].get(name, {}) for s in summaries)
        planners[name] = {"local_accuracy": a.get("accuracy"), "slurm_accuracy": b.get("accuracy")}
    # every evaluation folder (a replicated arm has one per replicate: grpo.r0, ...), task by task
    evals = {}
    for folder in sorted(set(here) | set(there)):
        mine, theirs = here.get(folder, {}), there.get(folder, {})
        evals[folder] = {"tasks": len(mine), "tasks_differing": sorted(k for k in set(mine) | set(theirs)
                                                                       if mine.get(k) != theirs.get(k))}
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    record = {"command": "PYTHONPATH=. .venv/bin/python scripts/analysis/executor_equivalence.py --results "
                         f"{args.results}", "git_revision": rev.stdout.strip(), "date": time.strftime("%Y-%m-%d"),
              "plan": "demo --quick", "local_wall_s": round(local_s, 1), "slurm_wall_s": round(slurm_s, 1),
              "restart_submitted": t["restart_submitted"], "restart_kept": t["restart_kept"],
              "equal": all(p["local_accuracy"] == p["slurm_accuracy"] for p in planners.values())
              and all(e["tasks"] and not e["tasks_differing"] for e in evals.values()),
              "planners": planners, "evaluations": evals}
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    if args.results:
        args.results.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
