"""Shared fixtures for the reliability tests: a small synthetic suite built once per module, and teacher runs made
with the `run` command itself."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def synth_tasks(tmp_path_factory):
    from omnidecision.tasks import synth

    out = tmp_path_factory.mktemp("synth")
    synth.write_suite(12, 3, out)
    return synth.load_suite(out)


def teacher_runs(root: Path, runs: Path, n_tasks: int = 6, n_runs: int = 3) -> None:
    """root/synth (n_tasks synthetic tasks) and the teacher's runs of the first n_runs, appended to `runs` by
    `omnidecision run` (what a user does; no engine names that a rename may change)."""
    from typer.testing import CliRunner

    from omnidecision.cli import app
    from omnidecision.tasks.loaders import load_tasks
    from omnidecision.tasks.synth import write_suite

    write_suite(n_tasks, 0, root / "synth")
    for task in load_tasks(root / "synth", "synthetic")[:n_runs]:
        res = CliRunner().invoke(app, ["run", "--tasks", str(root / "synth"), "--task-id", task.id, "--teacher",
                                       "--out", str(runs)])
        assert res.exit_code == 0, res.output
