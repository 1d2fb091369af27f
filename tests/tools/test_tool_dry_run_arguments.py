"""`omnidecision tool NAME --args JSON --dry-run` checks the arguments against the tool's schema, as the run does
(`registry.validated_arguments`, the one check `run_tool` makes): arguments the tool refuses exit 2 in both, with
the same usage error, and the run runs no tool (before, the dry run exited 0 and the run printed a failed
observation).

    .venv/bin/pytest -q -p no:cacheprovider tests/tools/test_tool_dry_run_arguments.py
"""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.tasks.schema import Task
from omnidecision.tools.registry import build_tool_context, run_tool


def _words(text: str) -> str:
    return " ".join(text.replace("│", " ").split())  # click boxes and wraps its usage error


@pytest.mark.parametrize(("args", "says"), [
    ('{"bogus": 1}', "invalid arguments for web_search: query: Field required; bogus: Extra inputs are not permitted"),
    ('{"query": "x", "k": 99}', "invalid arguments for web_search: k: Input should be less than or equal to 20"),
    ("[1]", "arguments: expected an object, got list"),
])
def test_the_dry_run_refuses_the_arguments_the_run_refuses(args: str, says: str) -> None:
    dry = CliRunner().invoke(app, ["tool", "web_search", "--args", args, "--dry-run"])
    real = CliRunner().invoke(app, ["tool", "web_search", "--args", args])
    assert dry.exit_code == 2 and real.exit_code == 2, (dry.output, real.output)
    assert dry.stderr == real.stderr and says in _words(dry.stderr), dry.stderr
    assert not dry.stdout and not real.stdout  # no report, no observation: refused before anything runs
    # the words are those run_tool gives the agent for the same arguments: one check
    ctx = build_tool_context(Task(id="t", question="?"))
    obs = asyncio.run(run_tool("web_search", json.loads(args), ctx))
    assert not obs.ok and obs.error == says


def test_good_arguments_still_pass_the_dry_run() -> None:
    res = CliRunner().invoke(app, ["tool", "web_search", "--args", '{"query": "bridge", "k": 3}', "--dry-run"])
    assert res.exit_code == 0, res.output
    assert '"k": 3' in res.stdout and "not contacted" in res.stdout
