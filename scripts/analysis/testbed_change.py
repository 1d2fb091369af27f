"""One arm before and after a testbed change, at the same starts and test tasks: per family and overall, each side's
accuracy and the paired difference (after − before) with its hierarchical 95% interval (start → task).

    python scripts/analysis/testbed_change.py docs/results/experiment-9starts.json docs/results/arms-short-form.json \
        --arm oracle_sft --out docs/results/short-form-change.json

BEFORE and AFTER are result files with `outcomes` ({arm: {start: {replicate: {task: 0|1}}}}): an experiment's or
scripts/analysis/run_arms.py's. Only the starts both hold are compared; each start's task families are read from
AFTER's `outcomes`' tasks through `--tasks-root` (OUT/seed-S/tasks-test/tasks.jsonl of the run that wrote AFTER).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from omnidecision.stats import hierarchical_contrast, hierarchical_mean
from omnidecision.tasks.synth import load_suite

Outcomes = dict[str, dict[str, dict[str, float]]]


def cut(outcomes: Outcomes, keep: dict[str, set[str]]) -> Outcomes:
    """`outcomes` cut to the tasks `keep` names per start; starts with fewer than 2 such tasks dropped."""
    out = {s: {r: {t: v for t, v in tasks.items() if t in keep.get(s, set())} for r, tasks in reps.items()}
           for s, reps in outcomes.items()}
    return {s: reps for s, reps in out.items() if all(len(t) >= 2 for t in reps.values())}


def compare(before: Outcomes, after: Outcomes, families: dict[str, dict[str, str]]) -> dict[str, Any]:
    """{family (and "all"): {before, after, after-before, starts}} over the starts both sides hold."""
    starts = sorted(set(before) & set(after), key=int)
    if not starts:
        raise SystemExit(f"no start in common (before: {sorted(before)}, after: {sorted(after)})")
    before, after = {s: before[s] for s in starts}, {s: after[s] for s in starts}
    groups: dict[str, dict[str, set[str]]] = {"all": {s: set(families[s]) for s in starts}}
    for s in starts:
        for task, fam in families[s].items():
            groups.setdefault(fam, {}).setdefault(s, set()).add(task)
    out: dict[str, Any] = {}
    for name, keep in sorted(groups.items()):
        b, a = cut(before, keep), cut(after, keep)
        common = sorted(set(a) & set(b), key=int)
        if not common:
            continue
        b, a = {s: b[s] for s in common}, {s: a[s] for s in common}
        out[name] = {"before": hierarchical_mean(b).model_dump(), "after": hierarchical_mean(a).model_dump(),
                     "after-before": hierarchical_contrast(a, b).model_dump(), "starts": common,
                     "tasks": sum(len(keep[s]) for s in common)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--arm", required=True)
    ap.add_argument("--tasks-root", type=Path, default=Path("runs/arms"),
                    help="the folder of AFTER's starts (seed-S/tasks-test/tasks.jsonl)")
    ap.add_argument("--out", type=Path, help="write the comparison here (JSON)")
    args = ap.parse_args()
    before = json.loads(args.before.read_text("utf-8"))["outcomes"][args.arm]
    after = json.loads(args.after.read_text("utf-8"))["outcomes"][args.arm]
    families = {}
    for s in after:
        families[s] = {t.id: t.category or "-" for t in load_suite(args.tasks_root / f"seed-{s}" / "tasks-test")}
    result = compare(before, after, families)
    print(f"| family | tasks | {args.arm} before | after | after − before (95%, start → task) |")
    print("|---|---|---|---|---|")
    for name, row in result.items():
        d = row["after-before"]
        print(f"| {name} | {row['tasks']} | {row['before']['estimate']:.3f} | {row['after']['estimate']:.3f} | "
              f"{d['estimate']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] |")
    if args.out is not None:
        args.out.write_text(json.dumps({"arm": args.arm, "before": str(args.before), "after": str(args.after),
                                        "families": result}, indent=1), "utf-8")


if __name__ == "__main__":
    main()
