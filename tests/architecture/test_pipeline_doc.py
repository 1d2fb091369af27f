"""docs/architecture.md's "Pipeline" table names every command of the CLI: the test walks the Typer app (its
commands and the commands of its sub-apps) and checks each has a row, by the command column's
`omnidecision <command>` spans. A new command without its row fails here, naming it.

    .venv/bin/pytest tests/architecture/test_pipeline_doc.py -q
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer.main

from omnidecision.cli import app

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def cli_commands() -> set[str]:
    """Every command path: leaf commands, and groups that run something themselves (`collect` besides its
    `collect merge`)."""
    found: set[str] = set()

    def walk(cmd: Any, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if not subs:
            found.add(" ".join(path))
            return
        if path and getattr(cmd, "invoke_without_command", False):
            found.add(" ".join(path))
        for name, sub in subs.items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def command_path(span: str, commands: set[str]) -> str:
    """The longest command path a `omnidecision …` span starts with (its options and arguments left out)."""
    words = span.split()[1:]
    best = ""
    for n in range(1, len(words) + 1):
        if " ".join(words[:n]) in commands or any(c.startswith(" ".join(words[:n]) + " ") for c in commands):
            best = " ".join(words[:n])
        else:
            break
    return best


def documented_commands(commands: set[str]) -> set[str]:
    text = DOC.read_text("utf-8")
    section = text[text.index("## Pipeline"):]
    section = section[:section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("| ---")]
    assert rows and rows[0].split("|")[2].strip() == "command", "the Pipeline table's second column is `command`"
    cells = [row.split("|")[2] for row in rows[1:]]
    return {command_path(span, commands) for cell in cells for span in re.findall(r"`(omnidecision [^`]*)`", cell)}


def test_every_cli_command_has_a_row_in_the_pipeline_table():
    commands = cli_commands()
    assert {"collect", "collect merge", "judge train", "judge eval", "rft-select", "rounds", "eval"} <= commands
    missing = sorted(commands - documented_commands(commands))
    assert not missing, f"docs/architecture.md, Pipeline: no row for {missing}"


def test_a_row_names_only_real_commands():
    commands = cli_commands()
    assert documented_commands(commands) <= commands


def test_the_walk_sees_a_new_command():
    @app.command("toy-stage")
    def toy_stage() -> None:
        """A command without a row."""

    try:
        commands = cli_commands()
        assert "toy-stage" in commands and "toy-stage" not in documented_commands(commands)
    finally:
        app.registered_commands.pop()


def test_rounds_help_names_its_default():
    """`rounds` keeps the planner's own judge-correct runs by default; the rule relabelling is an upper bound."""
    text = " ".join(typer.main.get_command(app).commands["rounds"].help.split())
    assert "its own judge-correct runs (labeller: own, the default" in text and "with the rule decision" not in text
