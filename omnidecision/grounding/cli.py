"""`omnidecision audit rewards`: the reward audit (grounding/audit.py), mounted under `omnidecision audit`.

    omnidecision audit rewards --data runs/demo/data/rl --runs runs/demo/collect-dev \
        --planner runs/demo/models/sft --judge runs/demo/models/judge --out runs/demo/audit
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import typer

logger = logging.getLogger(__name__)


def audit_rewards(
    data: Path = typer.Option(..., help="a harvest's RL dataset folder (`harvest`'s OUT/rl: one parquet per split)"),
    runs: list[Path] = typer.Option(..., help="the collection folders (or trajectory files) the harvest read: each "
                                    "state is executed from its recorded run (repeat the option for several)"),
    out: Path = typer.Option(..., help="report folder: audit.json, audit.md, audit.png, returns.sqlite (the cache)"),
    planner: Optional[Path] = typer.Option(  # noqa: UP045
        None, help="sample the K candidates from this planner (a checkpoint or adapter folder); default: draws "
                   "from each state's action space"),
    judge: Optional[Path] = typer.Option(None, help="the learned reward judge to audit (a `judge train` folder)"),  # noqa: UP045
    recipe: Optional[Path] = typer.Option(  # noqa: UP045
        None, "--config", help="a GRPO recipe whose reward_funcs and weights are audited as one proxy (`recipe`)"),
    prices: Optional[Path] = typer.Option(None, help="price table for the executions' tool calls"),  # noqa: UP045
    split: str = typer.Option("validation", help="which split's states to sample (dev states by default)"),
    states: int = typer.Option(40, min=1, help="states to sample"),
    k: int = typer.Option(4, min=2, help="candidates per state (GRPO's group size)"),
    continuations: int = typer.Option(1, min=1, help="continuations per candidate (seeds 0..n-1)"),
    policy: str = typer.Option("teacher", help="continuation policy: teacher (the collection's, habits included), "
                               "recipe (the collection's backends) or a backends YAML (e.g. the planner under test)"),
    temperature: float = typer.Option(1.0, help="sampling temperature of the planner's candidates"),
    seed: int = typer.Option(0, help="seed of the state sample and the candidates"),
) -> None:
    """Audit the reward proxies (each closure check, the closure reward, the judge, a recipe's summed reward)
    against the executed returns of K candidates per state: AUROC, within-group rank correlation, top-1 agreement,
    calibration; by family and kind of group."""
    from omnidecision.grounding.audit import AuditSettings, run_audit
    from omnidecision.grounding.report import overall_rows

    settings = AuditSettings(states=states, k=k, continuations=continuations, policy=policy, split=split,
                             temperature=temperature, seed=seed)
    skipped: list[str] = []
    try:
        report = run_audit(data, runs, out, planner=planner, judge=judge, recipe=recipe, prices=prices,
                           settings=settings, skipped_lines=skipped)
    except (ValueError, FileNotFoundError) as exc:
        _echo_skipped(skipped)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    _echo_skipped(skipped)
    typer.echo("\n".join(overall_rows(report["metrics"]["overall"])))
    typer.echo(f"report: {out / 'audit.md'} ({report['states']} states × {report['k']} candidates; "
               f"{report['cost']['executions']} executions, {report['cost']['cached']} cached)")


def _echo_skipped(skipped: list[str], limit: int = 20) -> None:
    """The `--runs` lines skipped as malformed, one line each on stderr (file:line: reason); past `limit` a count
    (every one is in the report's `skipped_lines`)."""
    for line in skipped[:limit]:
        typer.echo(f"skipped {line}", err=True)
    if len(skipped) > limit:
        typer.echo(f"skipped {len(skipped) - limit} more malformed lines (audit.json: skipped_lines)", err=True)
