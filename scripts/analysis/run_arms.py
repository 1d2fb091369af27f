"""Run only some arms of the experiment's plan at some starts: the steps their test evaluations need, nothing else.

    python scripts/analysis/run_arms.py --starts 0,1,2 --arms oracle_sft sft teacher rule --out runs/arms
    python scripts/analysis/run_arms.py --starts 0 --arms oracle_sft --out runs/arms --dry-run
    python scripts/analysis/run_arms.py --starts 0,1,2 --arms oracle_sft sft teacher rule --out runs/arms \
        --results docs/results/arms.json                                                  # pooled, as the experiment

Each start's plan is the experiment's own (`pipeline.plan.build_plan` of the recipe's `start_config`), cut to the
evaluation steps of the named arms and every step they read from (by the plan's reads/writes), and run by the
experiment's scheduler (`pipeline.scheduler.run_plan`: one thread a step, restartable, each step's revision in
steps.json). So an arm's figures here are the ones `omnidecision experiment` would write for it at that start, at a
fraction of the time: a testbed change can be measured on the arms it concerns before the whole experiment runs
(docs/research/short-form-testbed.md, "The default tool is not written"). With `--results`, the starts are summarised
and pooled by the experiment's own code (`pipeline.summary.summarise` on the arm subset, `pipeline.experiment.pool`):
per-start
and pooled accuracy, the per-family table, the decision diagnostics, every pair's hierarchical contrast (the
recipe's planned contrasts whose two arms both ran are planned here too, declared with the recipe before the run;
every other pair is exploratory, Holm-adjusted), and `by_family_means`: each arm's hierarchical
mean per task family (start → task), the interval a per-family claim needs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from omnidecision.pipeline.arms import ARMS, Arm, pairs
from omnidecision.pipeline.experiment import load_experiment, pool, write_result
from omnidecision.pipeline.plan import Step, build_plan, script
from omnidecision.pipeline.scheduler import run_plan
from omnidecision.pipeline.summary import summarise
from omnidecision.provenance import git_revision
from omnidecision.tasks.synth import load_suite


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


def planned_among(planned: list[tuple[str, str]], arms: tuple[Arm, ...]) -> list[tuple[str, str]]:
    """The recipe's planned contrasts (a, b) whose two arms both ran: they keep their standing as planned (declared
    with the recipe, before any run); a planned contrast with an arm left out cannot be read here and is dropped."""
    names = {a.name for a in arms}
    return [(a, b) for a, b in planned if a in names and b in names]


def task_families(folder: Path) -> dict[str, str]:
    """task id → family (its `category`) of the start's test suite."""
    return {t.id: t.category or "-" for t in load_suite(folder / "tasks-test")}


def family_means(outcomes: dict[str, Any], families: dict[str, dict[str, str]]) -> dict[str, dict[str, Any]]:
    """{family: {arm: hierarchical mean}}: each arm's outcomes cut to one family's test tasks, per start (a start with
    fewer than 2 of them is left out and named in `starts_left_out`)."""
    from omnidecision.stats import hierarchical_mean

    out: dict[str, dict[str, Any]] = {}
    for fam in sorted({f for per in families.values() for f in per.values()}):
        for arm, starts in outcomes.items():
            cut = {s: {r: {t: v for t, v in tasks.items() if families[s].get(t) == fam} for r, tasks in reps.items()}
                   for s, reps in starts.items()}
            # a start with fewer than 2 of the family's tasks has no within-start spread to count: left out, counted
            kept = {s: reps for s, reps in cut.items() if all(len(t) >= 2 for t in reps.values())}
            if kept:
                out.setdefault(fam, {})[arm] = hierarchical_mean(kept).model_dump() | {
                    "starts_left_out": sorted(set(cut) - set(kept))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=Path(__file__).resolve().parents[2] / "configs" / "experiment" /
                    "default.yaml", help="the experiment recipe")
    ap.add_argument("--starts", required=True, help="comma-separated starts")
    ap.add_argument("--arms", nargs="+", required=True, help="arms whose test evaluations to run")
    ap.add_argument("--out", type=Path, required=True, help="one folder per start goes under it (seed-S)")
    ap.add_argument("--jobs", type=int, default=2, help="steps of one group side by side")
    ap.add_argument("--dry-run", action="store_true", help="print each start's cut plan and stop")
    ap.add_argument("--results", type=Path, help="write the pooled result of the starts here (JSON)")
    args = ap.parse_args()
    recipe = load_experiment(args.config, [f"starts=[{args.starts}]"])
    arms = tuple(a for a in ARMS if a.name in set(args.arms))
    unknown = sorted(set(args.arms) - {a.name for a in arms})
    if unknown:
        raise SystemExit(f"unknown arms {unknown} (the arm table: {[a.name for a in ARMS]})")
    summaries, folders = [], []
    for start in recipe.starts:
        cfg = recipe.start_config(start)
        folder = (args.out / f"seed-{start}").resolve()
        plan = needed(build_plan(cfg, folder), set(args.arms))
        if args.dry_run:
            print(script(plan, folder))
            continue
        times = run_plan(plan, folder, args.jobs, recipe.threads)
        print(f"start {start}: {len(plan)} steps -> {folder}")
        if args.results is not None:
            summaries.append(summarise(folder, cfg, times, arms))
            folders.append(folder)
    if args.results is None or not summaries:
        return
    from omnidecision.pipeline.contrasts import contrast_section

    result = pool(summaries, folders)
    planned = planned_among(recipe.contrasts(), arms)
    # contrast_section leaves a planned pair out of the exploratory ones itself
    result["contrasts"] = contrast_section(result["outcomes"], planned, [p for p in pairs(arms) if p[0] != p[1]])
    result["by_family_means"] = family_means(result["outcomes"],
                                             {str(s["seed"]): task_families(f) for s, f in zip(summaries, folders,
                                                                                               strict=True)})
    result["arms"] = [a.name for a in arms]
    result["git_revision"] = git_revision()  # each step's own revision is in its start's provenance
    result["recipe"] = recipe.model_dump()
    write_result(result, args.out, args.results)  # the committed copy with paths relative to the repository
    for fam, cells in result["by_family_means"].items():
        print(fam, " ".join(f"{a} {c['estimate']:.3f} [{c['low']:.3f}, {c['high']:.3f}]" for a, c in cells.items()))
    print(f"-> {args.results}")


if __name__ == "__main__":
    main()
