"""Agent commands mounted by `omnidecision/cli.py`: `run` (one task) and `replay` (check trajectories).

    omnidecision run --tasks data/synth/tasks.jsonl --task-id synth-0001 --teacher --out runs/one.jsonl
    omnidecision run --tasks tasks.jsonl --task-id t1 --backends configs/collect/backends.yaml --mode react
    omnidecision replay runs/one.jsonl
    omnidecision run --tasks tasks.jsonl --task-id t1 --backends backends.yaml --dry-run   # resolve, start nothing
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Optional

import typer

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.agent.replay import MalformedLine, check_file
from omnidecision.backends.factory import backend_problem, build_backends, load_backend_specs
from omnidecision.outputs import OutputBusy, check_free, exclusive, report_out
from omnidecision.protocol.chat import BackendSpec, ChatBackend
from omnidecision.protocol.redaction import redact_text
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)


def replay(
    file: Path = typer.Argument(..., help="trajectory JSONL (one RunRecord per line)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="replay writes nothing and starts nothing: the same "
                                 "checks, their outcome as a JSON report on stdout (exit 2: unreadable, 1: a "
                                 "mismatch)"),
) -> None:
    """Re-apply each run's events with the reducer and compare every ledger snapshot byte for byte."""
    try:
        if not file.is_file():
            raise MalformedLine(f"{file}: no such file")
        n, bad = check_file(file)
    except MalformedLine as exc:
        if dry_run:
            _dry_report({"command": "replay", "file": str(file), "error": str(exc)})
        typer.echo(f"error: {exc}", err=True)  # names the file (and line): binary, UTF-16, empty, malformed
        raise typer.Exit(2) from exc
    if dry_run:
        _dry_report({"command": "replay", "file": str(file), "runs": n, "mismatch": str(bad) if bad else None})
    if bad is not None:
        typer.echo(f"MISMATCH {bad}", err=True)
        raise typer.Exit(1)
    if not dry_run:
        typer.echo(f"ok: {n} runs replay exactly ({file})")


def _dry_report(doc: dict) -> None:
    """A dry run's JSON report on the stream held for it (`outputs.report_out`: stdout alone), every key hidden
    (protocol/redaction.py: a backend's URL may carry one)."""
    print(redact_text(json.dumps({**doc, "dry_run": True}, indent=2, default=str)), file=report_out())


class _Refused(ValueError):
    """An input `run` refuses before it starts; the message is the one error line (file, id or option named)."""


@dataclass(frozen=True)
class RunRequest:
    """What `run` was asked: the task file and id, the backends (a file, or the teacher), the agent's mode and
    budgets, the output (its command line, typed)."""

    tasks: Path
    task_id: str | None
    backends: Path | None
    teacher: bool
    mode: str
    step_budget: int
    max_tool_calls: int | None
    fmt: str
    out: Path | None


class RunInputs(NamedTuple):
    """What `run` resolved: the backend specs (what the dry run shows) and the backends built from them (clients
    made, no endpoint contacted, no weights loaded), the agent config, the task."""

    specs: dict[str, BackendSpec]
    backends: dict[str, ChatBackend]
    config: AgentConfig
    task: Task


def out_busy(out: Path | None, what: str = "--out") -> str | None:
    """Why `out` cannot be written now: another process holds its lock (`outputs.check_free`, in the words
    `outputs.exclusive` refuses it with); None when it is free. It asks without taking the lock, so a dry run says
    what its run would meet (the run asks it too, then takes the lock: a writer that starts in between is still
    refused by `exclusive`)."""
    if out is None:
        return None
    try:
        check_free(out, what)
    except OutputBusy as exc:
        return str(exc)
    return None


def run_backends(specs: dict[str, BackendSpec], source: str) -> dict[str, ChatBackend]:
    """The backends `run` runs, built (no endpoint contacted, no weights loaded) after each role's
    `factory.backend_problem` (an unknown kind; a `local` folder without a checkpoint, whose weights would load only
    at the first request); `_Refused` names `source` (the backends file) and the role."""
    for role, spec in specs.items():
        if (why := backend_problem(spec)) is not None:
            raise _Refused(f"{source}: backends.{role}: {why}")
    try:
        return build_backends(specs)
    except (ValueError, TypeError) as exc:  # a kind's own refusal at build
        raise _Refused(f"{source}: {exc}") from exc


def run_inputs(request: RunRequest) -> RunInputs:
    """What `run` resolves and checks before it starts the agent, and its dry run reports: the backends, agent
    config and task, and --out free to write; `_Refused` names what is wrong."""
    tasks, task_id, backends, teacher, out = request.tasks, request.task_id, request.backends, request.teacher, \
        request.out
    if (backends is None) == (not teacher):
        raise _Refused("give exactly one of --backends FILE or --teacher")
    if out is not None and out.is_dir():
        raise _Refused(f"--out {out} is a folder: --out is the JSONL file the run is appended to")
    if (busy := out_busy(out)) is not None:
        raise _Refused(busy)
    try:
        specs = {"default": BackendSpec(kind="teacher")} if teacher else load_backend_specs(backends)  # type: ignore[arg-type]
        config = AgentConfig(mode=request.mode, step_budget=request.step_budget,  # type: ignore[arg-type]
                             max_tool_calls=request.max_tool_calls)
        all_tasks = load_tasks(tasks, request.fmt)
    except (ValueError, OSError) as exc:
        raise _Refused(str(exc)) from exc
    chosen = next((t for t in all_tasks if task_id is None or t.id == task_id), None)
    if chosen is None:
        raise _Refused(f"{tasks}: no task with id {task_id!r} ({len(all_tasks)} tasks)")
    return RunInputs(specs, run_backends(specs, str(backends) if backends is not None else "--teacher"), config,
                     chosen)


def run(
    tasks: Path = typer.Option(..., help="task file or folder (jsonl, omnigaia, worldsense, synthetic dir)"),
    task_id: Optional[str] = typer.Option(None, help="the task to run (default: the first one)"),  # noqa: UP045
    backends: Optional[Path] = typer.Option(None, help="YAML: role -> BackendSpec"),  # noqa: UP045
    teacher: bool = typer.Option(False, help="use the scripted teacher for every role"),
    mode: str = typer.Option("ledger", help="ledger | react | memory"),
    step_budget: int = typer.Option(15, help="T: planner steps"),
    max_tool_calls: Optional[int] = typer.Option(None, help="hard tool-call cap"),  # noqa: UP045
    sample: int = typer.Option(0, help="sample index (seeds the teacher's noise)"),
    out: Optional[Path] = typer.Option(None, help="append the RunRecord to this JSONL file"),  # noqa: UP045
    fmt: str = typer.Option("auto", "--format", help="task file format"),
    dry_run: bool = typer.Option(False, "--dry-run", help="load the backends file and the tasks, find the task, build "
                                 "the backends and check --out (its lock too), as the run does; print them as "
                                 "JSON; contact no endpoint, load no weights, append nothing"),
) -> None:
    """Run the agent on one task and print the outcome (the full record goes to --out)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        specs, built, config, chosen = run_inputs(RunRequest(tasks=tasks, task_id=task_id, backends=backends,
                                                      teacher=teacher, mode=mode, step_budget=step_budget,
                                                      max_tool_calls=max_tool_calls, fmt=fmt, out=out))
    except _Refused as exc:
        if dry_run:
            _dry_report({"command": "run", "error": str(exc)})
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if dry_run:  # the run's own resolving, then nothing started and nothing appended
        _dry_report({"command": "run", "task": chosen.id, "mode": config.mode, "step_budget": config.step_budget,
                     "max_tool_calls": config.max_tool_calls, "sample": sample,
                     "backends": {role: {"kind": spec.kind, "base_url": spec.base_url, "model": spec.model}
                                  for role, spec in specs.items()},
                     "endpoints": "not contacted (a dry run starts no request)",
                     "would_append": str(out) if out is not None else None})
        return
    with ExitStack() as held:
        if out is not None:  # one writer per output, from before the run to its line (a second is refused now)
            try:
                held.enter_context(exclusive(out))
            except OutputBusy as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(2) from exc
        record = asyncio.run(run_task(chosen, config, built, sample=sample))
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("a", encoding="utf-8") as fh:
                fh.write(record.model_dump_json() + "\n")
    t = record.totals
    typer.echo(f"{record.run_id}: outcome={record.outcome} answer={record.answer!r} gold={record.gold_answer!r} "
               f"steps={len(record.steps)} tool_calls={sum(t.tool_calls.values())} invalid={t.invalid_actions} "
               f"tokens={t.prompt_tokens}+{t.completion_tokens}" + (f" error={record.error}" if record.error else ""))
