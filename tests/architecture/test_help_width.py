"""Every command's `--help` reads at 80 columns: each option name it shows appears whole (Typer's rich tables cut
`--advancing-only` to `--advancing-on…` at 80 columns; the root asks for click's plain help, which wraps the text
under the name instead), and no line runs past the width.

    COLUMNS=80 .venv/bin/python -m omnidecision.cli harvest --help
"""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.collect.cli import harvest
from tests.architecture.test_flag_spelling import commands

WIDTH = 80


def cut_names(help_text: str, cmd: object) -> list[str]:
    """The option names of `cmd` (short and long, both sides of a --flag/--no-flag) missing whole from its help."""
    names = [name for p in cmd.params if p.param_type_name == "option" and not p.hidden  # type: ignore[attr-defined]
             for name in (*p.opts, *p.secondary_opts)]
    return [name for name in names if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", help_text)]


def render(args: list[str], root: typer.Typer = app) -> str:
    res = CliRunner().invoke(root, [*args, "--help"], terminal_width=WIDTH, env={"COLUMNS": str(WIDTH)})
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("path", sorted(commands()))
def test_every_option_name_shows_whole_at_80_columns(path: str):
    cmd = commands()[path]
    text = render(path.split())
    assert not cut_names(text, cmd), f"omnidecision {path} --help at {WIDTH} columns cuts {cut_names(text, cmd)}"
    wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not wide, f"omnidecision {path} --help runs past {WIDTH} columns:\n" + "\n".join(wide)


def test_a_rich_table_that_cuts_a_name_is_caught():
    """The test of the test: the same harvest command in Typer's rich help cuts at least one name at 80 columns."""
    rich = typer.Typer(rich_markup_mode="rich")
    rich.command("harvest")(harvest)
    rich.callback()(lambda: None)
    assert cut_names(render(["harvest"], rich), commands()["harvest"])
