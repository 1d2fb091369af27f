"""Collect and harvest commands mounted by `omnidecision/cli.py`.

    omnidecision tasks synth --n 200 --out runs/synth
    omnidecision collect --config configs/collect/synthetic-teacher.yaml --tasks runs/synth --out runs/teacher \
        --concurrency 8 --shard 0/1 --agent.step_budget 12
    omnidecision collect --config configs/collect/omnigaia-replay-api.yaml --shard 0/4 --dry-run   # check, print
    omnidecision collect --config configs/collect/omnigaia-live.yaml --dry-run   # what is missing, nothing run
    omnidecision collect merge runs/teacher --out runs/teacher/trajectories.jsonl
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

logger = logging.getLogger(__name__)


def _fail(msg: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {msg}", err=True)
    return typer.Exit(code)


def _merge(args: list[str], out: Path | None) -> None:
    from omnidecision.collect.store import TrajectoryFileError, merge

    if not args or out is None:
        raise _fail("usage: omnidecision collect merge DIR_OR_FILE… --out FILE")
    try:
        written, dup = merge(args, out)
    except (TrajectoryFileError, OSError) as exc:
        raise _fail(str(exc)) from exc
    typer.echo(f"merged {written} records into {out} ({dup} duplicates dropped)")


def collect(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML recipe (configs/collect/*.yaml)"),  # noqa: UP045
    tasks: Optional[str] = typer.Option(None, "--tasks", help="override tasks.path"),  # noqa: UP045
    fmt: Optional[str] = typer.Option(None, "--format", help="override tasks.format"),  # noqa: UP045
    out: Optional[Path] = typer.Option(None, "--out", help="override out (the output folder)"),  # noqa: UP045
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="override concurrency"),  # noqa: UP045
    shard: Optional[str] = typer.Option(None, "--shard", help="override shard, i/n"),  # noqa: UP045
    samples: Optional[int] = typer.Option(None, "--samples", help="override samples per task"),  # noqa: UP045
    limit: Optional[int] = typer.Option(None, "--limit", help="override tasks.limit"),  # noqa: UP045
    mode: Optional[str] = typer.Option(None, "--mode", help="override agent.mode (ledger | react | memory)"),  # noqa: UP045
    no_progress: bool = typer.Option(False, "--no-progress", help="no progress bar"),
    no_retry_errors: bool = typer.Option(False, "--no-retry-errors", help="keep runs recorded with outcome `error` "
                                         "as finished (default: a restart runs them again)"),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
    dry_run: bool = typer.Option(False, "--dry-run", help="resolve the recipe, load the tasks, check the endpoints "
                                 "(a live environment: probe them, its API keys and media files); print the resolved "
                                 "recipe and what is missing; run nothing"),
) -> None:
    """Run the agent over a task set (resumable, sharded, concurrent) and append judged trajectories.

    `omnidecision collect merge DIR… --out FILE` merges shard files instead."""
    from omnidecision.collect.breaker import CollectionStopped
    from omnidecision.collect.recipe import RecipeError, cli_overrides, load_recipe
    from omnidecision.collect.runner import collect as run_collect

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if ctx.args and ctx.args[0] == "merge":
        return _merge(ctx.args[1:], out)
    try:
        overrides = cli_overrides(ctx.args)  # any recipe field: --key.path VALUE
    except ValueError as exc:
        raise _fail(str(exc)) from exc
    for key, value in (("tasks.path", tasks), ("tasks.format", fmt), ("out", out), ("concurrency", concurrency),
                       ("shard", shard), ("samples", samples), ("tasks.limit", limit), ("agent.mode", mode)):
        if value is not None:
            overrides.append(f"{key}={json.dumps(str(value)) if isinstance(value, (str, Path)) else value}")
    if no_progress:
        overrides.append("progress=false")
    if no_retry_errors:
        overrides.append("retry_errors=false")
    if dry_run:
        from omnidecision.collect.dryrun import dry_run as make_report
        from omnidecision.preflight import emit

        raise typer.Exit(emit(make_report(config, overrides)))
    try:
        recipe = load_recipe(config, overrides)
        summary = asyncio.run(run_collect(recipe))
    except (RecipeError, ValueError, OSError) as exc:
        raise _fail(str(exc)) from exc
    except CollectionStopped as exc:  # an endpoint stayed down: exit 3, the message names it
        raise _fail(str(exc), code=3) from exc
    s = summary.as_dict()
    acc = f"{s['accuracy']:.3f}" if s["accuracy"] is not None else "n/a"
    retried = f", {s['retried_errors']} earlier error runs retried" if s["retried_errors"] else ""
    typer.echo(f"{s['out_file']}: {s['done']} new runs, {s['skipped']} already done{retried}, {s['jobs']} total; "
               f"accuracy {acc} ({s['correct']}/{s['judged']} answered, {s['errors']} errors, "
               f"{s['judge_failures']} judge failures); "
               f"outcomes {s['outcomes']}; {s['wall_s']:.1f}s")


collect.passthrough = True  # type: ignore[attr-defined]  # `collect merge …` and `--key.path VALUE` overrides


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
) -> None:
    """Turn trajectories into a state-SFT dataset (judge-correct runs) and an RL state dataset (all runs)."""
    from omnidecision.collect.harvest import HarvestError, HarvestOptions, run_harvest

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    opts = HarvestOptions(advancing_only=advancing_only, dedup=dedup, max_rows_per_task=max_rows_per_task,
                          val_fraction=val_fraction, tokenizer=tokenizer, skip_bad=skip_bad,
                          check_replay=check_replay, label=label,
                          validation_from=[str(p) for p in validation_from or []])
    try:
        stats = run_harvest([str(r) for r in runs], out, opts)
    except (HarvestError, ValueError, OSError) as exc:
        raise _fail(str(exc)) from exc
    typer.echo(f"{out}: sft train={stats['sft']['train']} validation={stats['sft']['validation']}; "
               f"rl train={stats['rl']['train']} validation={stats['rl']['validation']}; "
               f"runs={stats['runs']} tasks={stats['tasks']} skipped_bad_lines={stats['skipped_bad_lines']}")
