"""Agent commands mounted by `omnidecision/cli.py`: `run` (one task) and `replay` (check trajectories).

    omnidecision run --tasks data/synth/tasks.jsonl --task-id synth-0001 --teacher --out runs/one.jsonl
    omnidecision run --tasks tasks.jsonl --task-id t1 --backends configs/collect/backends.yaml --mode react
    omnidecision replay runs/one.jsonl
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Optional

import typer

logger = logging.getLogger(__name__)


def replay(file: Path = typer.Argument(..., help="trajectory JSONL (one RunRecord per line)")) -> None:
    """Re-apply each run's events with the reducer and compare every ledger snapshot byte for byte."""
    from omnidecision.agent.replay import MalformedLine, check_file

    if not file.is_file():
        typer.echo(f"error: {file}: no such file", err=True)
        raise typer.Exit(2)
    try:
        n, bad = check_file(file)
    except MalformedLine as exc:
        typer.echo(f"error: {exc}", err=True)  # names the file (and line): binary, UTF-16, empty, malformed
        raise typer.Exit(2) from exc
    if bad is not None:
        typer.echo(f"MISMATCH {bad}", err=True)
        raise typer.Exit(1)
    typer.echo(f"ok: {n} runs replay exactly ({file})")


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
) -> None:
    """Run the agent on one task and print the outcome (the full record goes to --out)."""
    from omnidecision.agent.config import AgentConfig
    from omnidecision.agent.loop import run_task
    from omnidecision.backends.factory import build_backends, load_backend_specs
    from omnidecision.protocol.chat import BackendSpec
    from omnidecision.tasks.loaders import load_tasks

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if (backends is None) == (not teacher):
        typer.echo("error: give exactly one of --backends FILE or --teacher", err=True)
        raise typer.Exit(2)
    try:
        specs = {"default": BackendSpec(kind="teacher")} if teacher else load_backend_specs(backends)  # type: ignore[arg-type]
        config = AgentConfig(mode=mode, step_budget=step_budget, max_tool_calls=max_tool_calls)  # type: ignore[arg-type]
        all_tasks = load_tasks(tasks, fmt)
    except (ValueError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    chosen = next((t for t in all_tasks if task_id is None or t.id == task_id), None)
    if chosen is None:
        typer.echo(f"error: {tasks}: no task with id {task_id!r} ({len(all_tasks)} tasks)", err=True)
        raise typer.Exit(2)
    record = asyncio.run(run_task(chosen, config, build_backends(specs), sample=sample))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a", encoding="utf-8") as fh:
            fh.write(record.model_dump_json() + "\n")
    t = record.totals
    typer.echo(f"{record.run_id}: outcome={record.outcome} answer={record.answer!r} gold={record.gold_answer!r} "
               f"steps={len(record.steps)} tool_calls={sum(t.tool_calls.values())} invalid={t.invalid_actions} "
               f"tokens={t.prompt_tokens}+{t.completion_tokens}" + (f" error={record.error}" if record.error else ""))
