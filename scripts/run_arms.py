"""Run only some arms of the experiment's plan at some starts: the steps their test evaluations need, nothing else.

    python scripts/run_arms.py --starts 0,1,2 --arms oracle_sft sft teacher rule --out runs/arms
    python scripts/run_arms.py --starts 0 --arms oracle_sft --out runs/arms --dry-run     # the steps it would run

Each start's plan is the experiment's own (`pipeline.plan.build_plan` of the recipe's `start_config`), cut to the
evaluation steps of the named arms and every step they read from (by the plan's reads/writes), and run by the
experiment's scheduler (`pipeline.scheduler.run_plan`: one thread a step, restartable, each step's revision in
steps.json). So an arm's figures here are the ones `omnidecision experiment` would write for it at that start, at a
fraction of the time: a testbed change can be measured on the arms it concerns before the whole experiment runs
(docs/findings.md, "The default tool is not written"). Per-family tables: scripts/family_table.py on the folders
OUT/seed-S/eval/ARM/test.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from omnidecision.pipeline.experiment import load_experiment
from omnidecision.pipeline.plan import Step, build_plan, script
from omnidecision.pipeline.scheduler import run_plan


def needed(plan: list[Step], arms: set[str]) -> list[Step]:
    """The plan's steps that the test evaluations of `arms` need (themselves included), in plan order."""
    writer = {w: s for s in plan for w in s.writes}

    def producers(path: str) -> list[Step]:  # a step that writes the path or a folder above it
        return [s for w, s in writer.items() if path == w or path.startswith(w.rstrip("/") + "/")]

    keep = {s.name for s in plan if s.arm in arms and s.name.startswith("eval-")}
    if not keep:
        raise SystemExit(f"no evaluation step of {sorted(arms)} in the plan (its arms: "
                         f"{sorted({s.arm for s in plan if s.arm})})")
    todo = [s for s in plan if s.name in keep]
    while todo:
        for dep in (d for path in todo.pop().reads for d in producers(path)):
            if dep.name not in keep:
                keep.add(dep.name)
                todo.append(dep)
    return [s for s in plan if s.name in keep]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=Path(__file__).resolve().parents[1] / "configs" / "experiment" /
                    "default.yaml", help="the experiment recipe")
    ap.add_argument("--starts", required=True, help="comma-separated starts")
    ap.add_argument("--arms", nargs="+", required=True, help="arms whose test evaluations to run")
    ap.add_argument("--out", type=Path, required=True, help="one folder per start goes under it (seed-S)")
    ap.add_argument("--jobs", type=int, default=2, help="steps of one group side by side")
    ap.add_argument("--dry-run", action="store_true", help="print each start's cut plan and stop")
    args = ap.parse_args()
    recipe = load_experiment(args.config, [f"starts=[{args.starts}]"])
    for start in recipe.starts:
        cfg = recipe.start_config(start)
        folder = (args.out / f"seed-{start}").resolve()
        plan = needed(build_plan(cfg, folder), set(args.arms))
        if args.dry_run:
            print(script(plan, folder))
            continue
        times = run_plan(plan, folder, args.jobs, recipe.threads)
        print(f"start {start}: {len(plan)} steps, {sum(times.values()):.0f} s of stage time -> {folder}")


if __name__ == "__main__":
    main()
