"""`omnidecision collect ... --dry-run`: resolve the recipe and its overrides (`${VAR}` expanded), then the checks
every rollout recipe gets (`rollout.checks.rollout_checks`: tasks and this shard's share, the backends' endpoints,
the output folder; with a live environment every endpoint asked and every media file looked for), the list the run
refuses on; print the resolved recipe; run no agent, write nothing.

    omnidecision collect --config configs/collect/omnigaia-replay-api.yaml --shard 0/4 --out runs/collect --dry-run
    omnidecision harvest runs/collect --out data/harvest --dry-run
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnidecision.collect.datacard import read_manifests
from omnidecision.collect.harvest import (
    HarvestError,
    HarvestOptions,
    assign_splits,
    harvest_runs,
    load_tokenizer,
    ordered_runs,
)
from omnidecision.collect.recipe import CollectRecipe
from omnidecision.outputs import output_problems
from omnidecision.preflight import Check, DryRunReport
from omnidecision.rollout.plan import plan_rollouts
from omnidecision.rollout.recipe import RecipeError, load_recipe


def dry_run(config: Path | None, overrides: list[str]) -> DryRunReport:
    report = DryRunReport(command="collect", recipe=str(config) if config else None)
    try:
        recipe = load_recipe(config, overrides, model=CollectRecipe)
    except (RecipeError, ValueError) as exc:
        # an unset-variables error lists every variable ("...: a; b; c"): one failed check each
        head, sep, rest = str(exc).partition(": ")
        items = rest.split("; ") if sep and "environment variable" in rest else [str(exc)]
        for item in items:
            report.add("recipe", "error", item)
        return report
    report.add("recipe", "ok", f"{config} + {len(overrides)} override(s)")
    report.resolved = recipe.model_dump(mode="json")
    report.checks.extend(plan_rollouts(recipe).checks)  # the plan the run refuses on (collect.cli)
    return report


def harvest_dry_run(paths: list[str], out: Path, opts: HarvestOptions, *, replace: bool = False) -> DryRunReport:
    """`harvest ... --dry-run`: the run's own phases up to the write (the output folder's checks, every line of
    every trajectory file read and replayed, the rows built and split, the tokenizer its stats count with loaded by
    the run's `load_tokenizer`), so a bad line, an `--out` that holds an input or a tokenizer that does not load is
    refused here in the run's words; the row counts it would write; nothing is written."""
    report = DryRunReport(command="harvest", extra={"out": str(out)})
    problems = output_problems(out, [*paths, *opts.validation_from, opts.tokenizer], replace=replace)
    for problem in problems:
        report.add("out", "error", problem)
    if not problems:
        report.add("out", "ok", f"{out} (written whole: a temporary sibling renamed into place)")
    try:
        runs, bad = ordered_runs(paths, opts.skip_bad)
        got = harvest_runs(runs, opts)
        if not runs:
            raise HarvestError(f"no runs found in {', '.join(paths)}")
        split = assign_splits(got, opts)
    except (HarvestError, ValueError, OSError) as exc:
        report.add("runs", "error", str(exc))
        return report
    report.add("runs", "ok", f"{len(runs)} runs read from {len(paths)} path(s), {len(bad)} bad line(s) skipped")
    sizes = {kind: {s: sum(split[r["task_id"]] == s for r in rows) for s in ("train", "validation")}
             for kind, rows in (("sft", got.sft), ("rl", got.rl))}
    report.extra["rows"] = sizes
    report.add("rows", "ok" if got.rl else "warning", f"sft {sizes['sft']}, rl {sizes['rl']} (before switch copies)")
    report.checks.append(tokenizer_check(opts, runs))
    return report


def tokenizer_check(opts: HarvestOptions, runs: list[tuple[str, int, Any]]) -> Check:
    """The tokenizer the run's stats count with, loaded as the run loads it (`harvest.load_tokenizer`, on the
    manifests of the same runs' folders): one that does not load is the run's error, in its words. A hub id is read
    from the local cache only (a dry run downloads nothing): one not cached there is a warning, the run fetches it."""
    try:
        tokenizer, name, source = load_tokenizer(opts, read_manifests(path for path, _, _ in runs), fetch=False)
    except HarvestError as exc:
        local = opts.tokenizer is None or Path(opts.tokenizer).exists()  # a served planner's is a local folder
        return Check(what="tokenizer", status="error" if local else "warning",
                     detail=str(exc) if local else f"{exc}; not in the local cache: the run downloads it")
    if tokenizer is None:
        return Check(what="tokenizer", status="ok", detail="none: the stats count characters")
    return Check(what="tokenizer", status="ok", detail=f"{name} (from {source}): loads; the stats count tokens")
