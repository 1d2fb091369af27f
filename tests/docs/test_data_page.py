"""docs/data.md's first step is what the command prints: every `omnidecision tasks check` line of the page on a file
shipped in the repository (tests/data/...) runs and succeeds, and the first one prints the page's output block line
for line.

    pytest -q tests/docs/test_data_page.py
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "data.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def shipped_checks() -> list[list[str]]:
    """The page's `omnidecision tasks check` commands whose file is in the repository, as argument lists."""
    out = []
    for lang, body in BLOCK.findall(PAGE.read_text("utf-8")):
        for line in body.splitlines():
            line = line.split("#", 1)[0].strip()
            if lang == "bash" and line.startswith("omnidecision tasks check tests/data/"):
                out.append(shlex.split(line)[1:])
    return out


def run(args: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(ROOT)  # the page's paths are relative to the project folder
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return res.output


def test_the_page_names_the_shipped_checks():
    assert len(shipped_checks()) >= 2


@pytest.mark.parametrize("args", shipped_checks(), ids=" ".join)
def test_each_shipped_check_runs(args: list[str], monkeypatch: pytest.MonkeyPatch):
    assert run(args, monkeypatch).startswith("ok: ")


def test_the_first_check_prints_the_pages_output(monkeypatch: pytest.MonkeyPatch):
    blocks = BLOCK.findall(PAGE.read_text("utf-8"))
    first = next(i for i, (lang, body) in enumerate(blocks) if "tasks check tests/data/omnigaia_dev" in body)
    lang, expected = blocks[first + 1]
    assert lang == "text"
    printed = run(shipped_checks()[0], monkeypatch)
    assert [line for line in printed.splitlines() if line.strip()] == expected.strip().splitlines()


def test_the_task_schema_pages_example_line_loads():
    """The example line on the generated Records and datasets page is a Task, the first line of the shipped JSONL."""
    from docgen.schema_ref import SCHEMAS
    from omnidecision.tasks.schema import Task

    intro = next(intro for title, _, intro in SCHEMAS if title == "The task record")
    line = re.search(r"```json\n(.*?)\n```", intro, re.S).group(1)
    task = Task.model_validate_json(line)
    assert task.id == "j1" and task.answer_type == "number"
    shipped = (ROOT / "tests" / "data" / "jsonl" / "tasks.jsonl").read_text("utf-8").splitlines()[0]
    assert Task.model_validate_json(shipped) == task
