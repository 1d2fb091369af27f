"""A real collection of the teacher with habits on a small synthetic suite, and its harvest: the recorded states the
grounding tests execute candidates from."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]


def _ok(args: list[str]) -> None:
    from omnidecision.cli import app

    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="session")
def habits_runs(tmp_path_factory) -> dict[str, Path]:
    """tasks (12 synthetic tasks, seed 0), collect (2 samples each, the teacher with habits), data (its harvest)."""
    root = tmp_path_factory.mktemp("habits")
    _ok(["tasks", "synth", "--n", "12", "--seed", "0", "--out", str(root / "tasks")])
    _ok(["collect", "--config", str(ROOT / "configs" / "collect" / "synthetic-habits.yaml"), "--tasks.path",
         str(root / "tasks"), "--out", str(root / "collect"), "--no-progress"])
    _ok(["harvest", str(root / "collect"), "--out", str(root / "data"), "--label", "emitted"])
    return {"tasks": root / "tasks", "collect": root / "collect", "data": root / "data"}


@pytest.fixture(scope="session")
def tiny_planner(tmp_path_factory):
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    out = tmp_path_factory.mktemp("tiny-planner")
    return build_tiny_planner(out, texts=list(default_corpus(n=200)), hidden=32, layers=1, heads=2)
