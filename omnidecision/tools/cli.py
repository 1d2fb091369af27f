"""`omnidecision tool NAME --args JSON [--tasks FILE --task-id ID]`: run one tool outside the agent loop and print
its observation as JSON (for debugging tools, corpora and endpoints).

    omnidecision tool code_executor --args '{"code": "print(2**10)"}'
    omnidecision tool web_search --args '{"query": "bridge opened"}' --tasks runs/synth/tasks.jsonl --task-id t0001
"""

from __future__ import annotations

import json
from pathlib import Path

import typer


def _load_tasks(path: Path) -> list:
    try:
        from omnidecision.tasks.loaders import load_tasks
    except ImportError:  # loaders not available: read a JSONL of Task records
        from omnidecision.tasks.schema import Task

        tasks = []
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    tasks.append(Task.model_validate_json(line))
                except ValueError as exc:
                    raise typer.BadParameter(f"{path}:{lineno}: {exc}") from None
        return tasks
    return load_tasks(path)


def tool(
    name: str = typer.Argument(..., help="tool name, e.g. web_search, code_executor"),
    args: str = typer.Option("{}", "--args", help="the tool's arguments as a JSON object"),
    task: Path | None = typer.Option(None, "--tasks", help="task file (any format `load_tasks` reads)"),
    task_id: str | None = typer.Option(None, "--task-id", help="which task of the file (default: the first)"),
    timeout: float = typer.Option(30.0, "--timeout", help="tool timeout in seconds"),
) -> None:
    """Run one tool and print its observation as JSON; exits 1 when the observation is not ok."""
    import asyncio

    from omnidecision.tasks.schema import Task
    from omnidecision.tools.registry import TOOLS, build_tool_context, run_tool

    if name not in TOOLS:
        raise typer.BadParameter(f"unknown tool {name!r}; known: {', '.join(TOOLS)}", param_hint="NAME")
    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not valid JSON: {exc.msg} (column {exc.colno})", param_hint="--args") from None
    if task is None:
        the_task = Task(id="adhoc", question="")
    else:
        tasks = _load_tasks(task)
        if not tasks:
            raise typer.BadParameter(f"{task}: no tasks", param_hint="--tasks")
        the_task = next((t for t in tasks if t.id == task_id), None) if task_id else tasks[0]
        if the_task is None:
            raise typer.BadParameter(f"{task}: no task with id {task_id!r}", param_hint="--task-id")
    ctx = build_tool_context(the_task, settings={"tool_timeout_s": timeout})
    obs = asyncio.run(run_tool(name, arguments, ctx))
    print(obs.model_dump_json(indent=2))
    if not obs.ok:
        raise typer.Exit(1)
