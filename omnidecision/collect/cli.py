"""Collect and harvest commands mounted by `omnidecision/cli.py`.

    omnidecision tasks synth --n 200 --out runs/synth
    omnidecision collect --config configs/collect/synthetic-teacher.yaml --tasks.path runs/synth --out runs/teacher \
        --concurrency 8 --shard 0/1 --agent.step_budget 12
    omnidecision collect --config configs/collect/omnigaia-replay-api.yaml --shard 0/4 --dry-run   # check, print
    omnidecision collect --config configs/collect/omnigaia-live.yaml --dry-run   # what is missing, nothing run
    omnidecision collect merge runs/teacher --out runs/teacher/trajectories.jsonl [--dry-run]
    omnidecision harvest runs/teacher --out data/harvest --advancing-only --dedup
    omnidecision harvest runs/own-states --out data/own-states --label none   # RL states of every run, no SFT
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperGroup

from omnidecision.collect.dryrun import dry_run as make_report
from omnidecision.collect.dryrun import harvest_dry_run
from omnidecision.collect.harvest import HarvestError, HarvestOptions, run_harvest
from omnidecision.collect.recipe import CollectRecipe
from omnidecision.options import ReplaceOption
from omnidecision.preflight import DryRunReport, emit
from omnidecision.rollout.breaker import RolloutsStopped
from omnidecision.rollout.engine import run_plan
from omnidecision.rollout.plan import plan_rollouts
from omnidecision.rollout.recipe import RecipeError, cli_overrides, load_recipe
from omnidecision.rollout.store import TrajectoryFileError, merge_records
from omnidecision.rollout.store import merge as merge_files

logger = logging.getLogger(__name__)


def _fail(msg: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {msg}", err=True)
    return typer.Exit(code)


class CollectGroup(TyperGroup):
    """`collect [OPTIONS] [--key.path VALUE …]` runs a collection (the group's own callback); `collect merge …` is
    a subcommand. Click would read the first `--key.path` override as a subcommand name, so the group only splits
    off a subcommand when the first argument names one."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if args and args[0] in self.commands:
            ctx.allow_interspersed_args = False  # the subcommand parses its own options (`merge … --out FILE`)
            return super().parse_args(ctx, args)
        ctx.allow_interspersed_args = True  # options and `--key.path VALUE` overrides in any order
        return super(TyperGroup, self).parse_args(ctx, args)  # a command's parse: no subcommand split


collect_app = typer.Typer(cls=CollectGroup, add_completion=False,
                          subcommand_metavar="[merge …] [--key.path VALUE …]")

_ALIAS = "alias of --{}"


@collect_app.callback(invoke_without_command=True, context_settings={"allow_extra_args": True,
                                                                     "ignore_unknown_options": True})
def collect(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML recipe (configs/collect/*.yaml)"),  # noqa: UP045
    out: Optional[Path] = typer.Option(None, "--out", help="the output folder (the recipe's `out`)"),  # noqa: UP045
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="runs in flight at once (`concurrency`)"),  # noqa: UP045
    shard: Optional[str] = typer.Option(None, "--shard", help="i/n: this process's shard (`shard`)"),  # noqa: UP045
    samples: Optional[int] = typer.Option(None, "--samples", help="runs per task (`samples`)"),  # noqa: UP045
    no_progress: bool = typer.Option(False, "--no-progress", help=_ALIAS.format("progress false")),
    no_retry_errors: bool = typer.Option(False, "--no-retry-errors", help=_ALIAS.format("retry_errors false") +
                                         ": keep runs recorded with outcome `error` as finished (default: a restart "
                                         "runs them again)"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="log every run and request (INFO), not only "
                                 "warnings"),
    dry_run: bool = typer.Option(False, "--dry-run", help="resolve the recipe, load the tasks, check the endpoints "
                                 "(a live environment: probe them, its API keys and media files); print the resolved "
                                 "recipe and what is missing; run nothing"),
) -> None:
    """Run the agent over a task set (resumable, sharded, concurrent) and append judged trajectories.

    Any recipe field is an override: --key.path VALUE (e.g. --tasks.path DIR, --tasks.limit 8, --agent.mode react,
    --agent.step_budget 12). The flags marked "alias of" are short spellings of such overrides.

    `collect merge DIR… --out FILE` merges shard files (see `collect merge --help`)."""
    if ctx.invoked_subcommand is not None:
        return

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        overrides = cli_overrides(ctx.args)  # any recipe field: --key.path VALUE
    except ValueError as exc:
        raise _fail(str(exc)) from exc
    for key, value in (("out", out), ("concurrency", concurrency), ("shard", shard), ("samples", samples)):
        if value is not None:
            overrides.append(f"{key}={json.dumps(str(value)) if isinstance(value, (str, Path)) else value}")
    if no_progress:
        overrides.append("progress=false")
    if no_retry_errors:
        overrides.append("retry_errors=false")
    if dry_run:
        raise typer.Exit(emit(make_report(config, overrides)))
    try:
        recipe = load_recipe(config, overrides, model=CollectRecipe)
        # one checklist: the dry run's (collect.dryrun), refused in its error line before anything is written; the
        # run contacts its endpoints itself
        summary = asyncio.run(run_plan(plan_rollouts(recipe, probe=False)))
    except (RecipeError, ValueError, OSError) as exc:
        raise _fail(str(exc)) from exc
    except RolloutsStopped as exc:  # an endpoint stayed down: exit 3, the message names it
        raise _fail(str(exc), code=3) from exc
    s = summary.as_dict()
    acc = f"{s['accuracy']:.3f}" if s["accuracy"] is not None else "n/a"
    retried = f", {s['retried_errors']} earlier error runs retried" if s["retried_errors"] else ""
    typer.echo(f"{s['out_file']}: {s['done']} new runs, {s['skipped']} already done{retried}, {s['jobs']} total; "
               f"accuracy {acc} ({s['correct']}/{s['judged']} answered, {s['errors']} errors, "
               f"{s['judge_failures']} judge failures); "
               f"outcomes {s['outcomes']}; {s['wall_s']:.1f}s")


@collect_app.command("merge")
def merge(
    paths: list[Path] = typer.Argument(..., help="shard files or collect output folders (their trajectories*.jsonl)"),
    out: Path = typer.Option(..., "--out", help="the merged trajectory file"),
    dry_run: bool = typer.Option(False, "--dry-run", help="check --out and read every record as the run does; print "
                                 "the counts it would write; write nothing"),
) -> None:
    """Merge shard files into one trajectory file (first record per task and sample; duplicates dropped)."""
    try:
        if dry_run:  # the run's own checks and reading (rollout.store.merge_records), then nothing written

            dropped = [0]
            n = sum(1 for _ in merge_records([str(p) for p in paths], out, dropped))
            raise typer.Exit(emit(DryRunReport(command="collect merge", extra={
                "out": str(out), "records": n, "duplicates": dropped[0], "would_write": str(out)})))
        written, dup = merge_files([str(p) for p in paths], out)
    except (TrajectoryFileError, OSError) as exc:
        if dry_run:  # the report says what failed; the error line is the run's own

            emit(DryRunReport(command="collect merge", extra={"out": str(out), "error": str(exc)}))
        raise _fail(str(exc)) from exc
    typer.echo(f"merged {written} records into {out} ({dup} duplicates dropped)")


def harvest(
    runs: list[Path] = typer.Argument(..., help="trajectory files or collect output folders"),
    out: Path = typer.Option(..., "--out", help="output folder: sft/, rl/, stats.json"),
    advancing_only: bool = typer.Option(False, "--advancing-only", help="SFT: only steps that advanced the ledger"),
    dedup: bool = typer.Option(False, "--dedup", help="SFT: drop rows with an identical state (user message)"),
    max_rows_per_task: Optional[int] = typer.Option(None, "--max-rows-per-task", help="SFT row cap per task"),  # noqa: UP045
    val_fraction: float = typer.Option(0.1, "--val-fraction", help="share of task ids in the validation split"),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="tokenizer dir: stats count tokens"),  # noqa: UP045
    skip_bad: bool = typer.Option(False, "--skip-bad", help="skip malformed trajectory lines (counted)"),
    check_replay: bool = typer.Option(True, "--check-replay/--no-check-replay",
                                      help="RL: check each rebuilt state equals the recorded snapshot"),
    label: str = typer.Option("emitted", "--label",
                              help="SFT labels: 'emitted' (the collected decisions, correct runs only), 'rule' "
                                   "(every visited state of every run, labelled by the rule planner) or 'none' (no "
                                   "SFT rows: the RL states of every run, e.g. a served planner's own states)"),
    validation_from: Optional[list[Path]] = typer.Option(  # noqa: UP045
        None, "--validation-from", help="runs under this path (repeatable) make the validation split, the others "
                                        "train (instead of --val-fraction's task-id hash)"),
    switch_copies: int = typer.Option(1, "--switch-copies", min=1,
                                      help="--label rule: each train row whose decision leaves a tried source "
                                           "for an untried listed one appears K times"),
    replace: ReplaceOption = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="check --out, read and replay every run, build the rows; "
                                                          "print what would be written; write nothing"),
) -> None:
    """Turn trajectories into a state-SFT dataset (judge-correct runs) and an RL state dataset (all runs)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    opts = HarvestOptions(advancing_only=advancing_only, dedup=dedup, max_rows_per_task=max_rows_per_task,
                          val_fraction=val_fraction, tokenizer=tokenizer, skip_bad=skip_bad,
                          check_replay=check_replay, label=label, switch_copies=switch_copies,
                          validation_from=[str(p) for p in validation_from or []])
    if dry_run:
        raise typer.Exit(emit(harvest_dry_run([str(r) for r in runs], out, opts, replace=replace)))
    try:
        stats = run_harvest([str(r) for r in runs], out, opts, replace=replace)
    except (HarvestError, ValueError, OSError) as exc:
        raise _fail(str(exc)) from exc
    typer.echo(f"{out}: sft train={stats['sft']['train']} validation={stats['sft']['validation']}; "
               f"rl train={stats['rl']['train']} validation={stats['rl']['validation']}; "
               f"runs={stats['runs']} tasks={stats['tasks']} skipped_bad_lines={stats['skipped_bad_lines']}")
