"""`omnidecision tool NAME --args JSON [--tasks FILE --task-id ID]`: run one tool outside the agent loop and print
its observation as JSON (for debugging tools, corpora and endpoints).

    omnidecision tool code_executor --args '{"code": "print(2**10)"}'
    omnidecision tool web_search --args '{"query": "bridge opened"}' --tasks runs/synth/tasks.jsonl --task-id t0001
    omnidecision tool code_executor --args '{"code": "print(1)"}' --dry-run   # check and build; run nothing
    OMNIDECISION_PLUGINS=my_tools omnidecision tool unit_convert --args '{"query": "3 mi in km"}'  # one's own tool
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from omnidecision.outputs import report_out
from omnidecision.protocol.redaction import redact_text
from omnidecision.protocol.registry import PluginError


def _load_tasks(path: Path) -> list:
    from omnidecision.tasks.loaders import load_tasks  # loaded when the command runs (fast --help)

    return load_tasks(path)


def tool(
    name: str = typer.Argument(..., help="tool name, e.g. web_search, code_executor, or one of your own "
                               "(registered by a module named in OMNIDECISION_PLUGINS)"),
    args: str = typer.Option("{}", "--args", help="the tool's arguments as a JSON object"),
    task: Path | None = typer.Option(None, "--tasks", help="task file (any format `load_tasks` reads)"),
    task_id: str | None = typer.Option(None, "--task-id", help="which task of the file (default: the first)"),
    timeout: float = typer.Option(30.0, "--timeout", help="tool timeout in seconds"),
    dry_run: bool = typer.Option(False, "--dry-run", help="check the name, the arguments and the task as the run "
                                 "does and build the tool's context; print them as JSON; run no tool, contact no "
                                 "endpoint"),
) -> None:
    """Run one tool and print its observation as JSON; exits 1 when the observation is not ok."""
    import asyncio

    from omnidecision.tools.registry import run_tool  # loaded when the command runs (fast --help)

    arguments, ctx = tool_inputs(name, args, task, task_id, timeout)
    if dry_run:  # the run's own checks and context, then no tool run
        print(redact_text(json.dumps({"command": "tool", "dry_run": True, "tool": name, "arguments": arguments,
                                      "task": ctx.task.id, "timeout": timeout,
                                      "endpoints": "not contacted (a dry run runs no tool)"}, indent=2, default=str)),
              file=report_out())
        return
    obs = asyncio.run(run_tool(name, arguments, ctx))
    print(obs.model_dump_json(indent=2))
    if not obs.ok:
        raise typer.Exit(1)


def tool_inputs(name: str, args: str, task: Path | None, task_id: str | None, timeout: float) -> tuple[dict, Any]:
    """What `tool` checks and builds before it runs the tool, and its dry run reports: (arguments, tool context);
    a bad name, JSON, arguments (the tool's schema, `registry.validated_arguments`), task file or id is a
    `typer.BadParameter` naming the option (exit 2)."""
    from omnidecision.protocol.actions import HOW_TO_ADD_A_TOOL  # loaded when the command runs (fast --help)
    from omnidecision.tasks.schema import Task  # as above
    from omnidecision.tools.registry import TOOLS, BadArguments, build_tool_context, validated_arguments  # as above

    try:
        known = name in TOOLS  # the first lookup imports the tools and the user's plugin modules
    except PluginError as exc:  # which variable or entry point, which module, its import error
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if not known:
        raise typer.BadParameter(f"unknown tool {name!r}; known: {', '.join(TOOLS)}{HOW_TO_ADD_A_TOOL}",
                                 param_hint="NAME")
    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not valid JSON: {exc.msg} (column {exc.colno})", param_hint="--args") from None
    try:
        validated_arguments(name, arguments)  # run_tool's own check: the run and its dry run refuse them here, alike
    except BadArguments as exc:
        raise typer.BadParameter(str(exc), param_hint="--args") from None
    if task is None:
        the_task = Task(id="adhoc", question="")
    else:
        tasks = _load_tasks(task)
        if not tasks:
            raise typer.BadParameter(f"{task}: no tasks", param_hint="--tasks")
        the_task = next((t for t in tasks if t.id == task_id), None) if task_id else tasks[0]
        if the_task is None:
            raise typer.BadParameter(f"{task}: no task with id {task_id!r}", param_hint="--task-id")
    return arguments, build_tool_context(the_task, settings={"tool_timeout_s": timeout})
