"""`omnidecision audit rewards`: the reward audit (grounding/audit.py), mounted under `omnidecision audit`.

    omnidecision audit rewards --data runs/demo/data/rl --runs runs/demo/collect-dev \
        --planner runs/demo/models/sft --judge runs/demo/models/judge --out runs/demo/audit [--dry-run]
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from omnidecision.grounding.report import overall_rows
from omnidecision.options import ReplaceOption
from omnidecision.outputs import output_problems, staged_output
from omnidecision.preflight import Check, DryRunReport, PreflightError, check_model, emit, require

if TYPE_CHECKING:  # annotations only: the audit loads pandas (fast --help)
    from omnidecision.grounding.audit import AuditInputs, AuditSettings

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
    replace: ReplaceOption = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="check --out, the planner, judge, recipe, price and policy "
                                 "files, read the states and the runs as the run does; print the report of the "
                                 "checks; sample, execute and write nothing (no endpoint contacted)"),
) -> None:
    """Audit the reward proxies (each closure check, the closure reward, the judge, a recipe's summed reward)
    against the executed returns of K candidates per state: AUROC, within-group rank correlation, top-1 agreement,
    calibration; by family and kind of group. The report folder is written whole (a temporary sibling renamed into
    place; the returns cache of an earlier audit there is carried over)."""
    from omnidecision.grounding.audit import AuditInputs, AuditSettings, run_audit  # heavy: its metrics load pandas

    sources = AuditInputs(data, tuple(runs), planner=planner, judge=judge, recipe=recipe, prices=prices)
    settings = AuditSettings(states=states, k=k, continuations=continuations, policy=policy, split=split,
                             temperature=temperature, seed=seed)
    inputs = [*sources.paths(), *_policy_file(policy)]
    skipped: list[str] = []
    checks = audit_checks(sources, out, settings, replace=replace, skipped_lines=skipped)
    if dry_run:
        _echo_skipped(skipped)
        raise typer.Exit(emit(DryRunReport(command="audit rewards", checks=checks, extra={
            "would_write": [str(out / f) for f in ("audit.json", "audit.md", "audit.png", "returns.sqlite")],
            "states": states, "k": k, "continuations": continuations, "skipped_lines": len(skipped)})))
    try:
        require(checks)
    except PreflightError as exc:
        _echo_skipped(skipped)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    skipped = []
    try:
        with staged_output(out, inputs, command="audit rewards", replace=replace) as tmp:
            if (out / "returns.sqlite").is_file():  # the executed returns of an earlier audit: a rerun reuses them
                shutil.copy2(out / "returns.sqlite", tmp / "returns.sqlite")
            report = run_audit(sources, tmp, settings=settings, skipped_lines=skipped)
    except (ValueError, FileNotFoundError) as exc:
        _echo_skipped(skipped)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    _echo_skipped(skipped)
    typer.echo("\n".join(overall_rows(report["metrics"]["overall"])))
    typer.echo(f"report: {out / 'audit.md'} ({report['states']} states × {report['k']} candidates; "
               f"{report['cost']['executions']} executions, {report['cost']['cached']} cached)")


_POLICIES = ("teacher", "recipe")  # the continuation policies that are not a backends file


def _policy_file(policy: str) -> list[Path]:
    """The continuation policy's backends file, when it is one (an input like the others)."""
    return [] if policy in _POLICIES else [Path(policy)]


def audit_checks(sources: AuditInputs, out: Path, settings: AuditSettings, *, replace: bool,
                 skipped_lines: list[str]) -> list[Check]:
    """What `audit rewards` checks before it samples anything, and its dry run reports: --out
    (`outputs.output_problems`: never an input, a folder holding one or inside one; never a foreign folder unless
    `replace`), the planner and judge folders, the recipe, price and policy files, the states of the split and the
    runs they come from (`grounding.audit.audited_states`, the run's own reading). Endpoints are not contacted."""
    from omnidecision.grounding.audit import audited_states  # heavy: its metrics load pandas

    inputs = [*sources.paths(), *_policy_file(settings.policy)]
    problems = output_problems(out, inputs, replace=replace)
    checks = [Check(what="out", status="error", detail=p) for p in problems] or \
        [Check(what="out", status="ok", detail=f"{out} (written whole: a temporary sibling renamed into place)")]
    for what, folder in (("--planner", sources.planner), ("--judge", sources.judge)):
        if folder is not None:
            checks.append(check_model(str(folder), what, local_only=True))
    for what, file in (("--config", sources.recipe), ("--prices", sources.prices),
                       *(("--policy", f) for f in _policy_file(settings.policy))):
        if file is not None:
            checks.append(Check(what=what, status="ok", detail=str(file)) if file.is_file() else
                          Check(what=what, status="error", detail=f"{file}: no such file"))
    try:
        _, rows_all, known = audited_states(sources.data, list(sources.runs), settings.split, skipped_lines)
    except (ValueError, FileNotFoundError) as exc:
        checks.append(Check(what="states", status="error", detail=str(exc)))
    else:
        checks.append(Check(what="states", status="ok", detail=f"{len(known)} of the {len(rows_all)} "
                                                               f"{settings.split} states of {sources.data} come "
                                                               "from the runs given"))
    checks.append(Check(what="endpoints", status="ok", detail="not contacted: the candidates and their "
                                                              "continuations are sampled by the run only"))
    return checks


def _echo_skipped(skipped: list[str], limit: int = 20) -> None:
    """The `--runs` lines skipped as malformed, one line each on stderr (file:line: reason); past `limit` a count
    (every one is in the report's `skipped_lines`)."""
    for line in skipped[:limit]:
        typer.echo(f"skipped {line}", err=True)
    if len(skipped) > limit:
        typer.echo(f"skipped {len(skipped) - limit} more malformed lines (audit.json: skipped_lines)", err=True)
