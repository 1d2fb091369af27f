"""The folder writers check their --out as harvest does (`outputs.staged_output`, issue 65 "Outputs never overwrite
inputs"): `tasks synth`, `tasks split`, `view`, `compare`, `audit progress`, `audit rewards` and `tiny-planner`
refuse an --out that is, holds or lies inside one of their inputs (even with --replace), and a non-empty folder this
project did not write unless --replace; the refused run leaves every input as it was and creates no --out.

In process (typer's CliRunner) on six synthetic tasks and three teacher runs: a few seconds.

    .venv/bin/pytest -q tests/reliability/test_writers_refuse_overlap.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.outputs import MARKER
from tests.reliability.conftest import teacher_runs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """synth/ (six tasks), eval/ (three teacher runs of them and an eval report), rows/ (an RL folder)."""
    root = tmp_path_factory.mktemp("inputs")
    teacher_runs(root, root / "eval" / "trajectories.jsonl")  # six tasks, three teacher runs, by `run` itself
    (root / "eval" / "report.json").write_text(json.dumps({"accuracy": 1.0, "ci95": [0.4, 1.0], "n": 3,
                                                           "outcomes": {"answered": 3}}), "utf-8")
    (root / "rows").mkdir()
    (root / "rows" / "validation.jsonl").write_text('{"prompt": "p"}\n', "utf-8")
    return root


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# writer -> (argv, how --out overlaps an input); {i}: the inputs folder
OVERLAPS: dict[str, tuple[list[str], str]] = {
    "tasks split": (["tasks", "split", "{i}/synth/tasks.jsonl", "--folds", "2", "--out", "{i}/synth"], "contains"),
    "view": (["view", "{i}/eval", "--out", "{i}/eval"], "is"),
    "compare": (["compare", "{i}/eval", "--out", "{i}/eval/compare"], "is inside"),
    "audit progress": (["audit", "progress", "{i}/eval", "--tasks", "{i}/synth", "--out", "{i}/eval"], "contains"),
    "audit rewards": (["audit", "rewards", "--data", "{i}/rows", "--runs", "{i}/eval", "--out", "{i}"], "contains"),
    "tiny-planner": (["tiny-planner", "--data", "{i}/rows", "--out", "{i}/rows/model"], "is inside"),
}


@pytest.mark.parametrize("writer", sorted(OVERLAPS))
@pytest.mark.parametrize("replace", [False, True])
def test_an_out_over_an_input_is_refused(writer: str, replace: bool, inputs: Path):
    argv, how = OVERLAPS[writer]
    args = [a.format(i=inputs) for a in argv] + (["--replace"] if replace else [])
    out = Path(args[args.index("--out") + 1])
    before = _files(inputs)
    res = CliRunner().invoke(app, args)
    assert res.exit_code in (1, 2), (writer, res.output)  # tasks split: 1, as for a bad task file
    assert f"--out {out} {how} the input" in res.stderr, (writer, res.stderr)
    assert _files(inputs) == before, f"{writer} changed its input"
    assert not list(inputs.parent.glob(".*.tmp-*")) and not list(inputs.glob(".*.tmp-*")), "a temp folder was left"


def test_a_foreign_folder_needs_replace_and_the_own_output_is_replaced(tmp_path: Path):
    """`tasks synth` (no input to overlap): a non-empty folder it did not write is refused, --replace replaces it;
    its own earlier output (the marker) is replaced without being told."""
    out = tmp_path / "synth"
    out.mkdir()
    (out / "notes.txt").write_text("mine", "utf-8")
    res = CliRunner().invoke(app, ["tasks", "synth", "--n", "3", "--out", str(out)])
    assert res.exit_code == 2 and "non-empty folder this project did not write" in res.stderr, res.output
    assert _files(out) == {"notes.txt": b"mine"}
    res = CliRunner().invoke(app, ["tasks", "synth", "--n", "3", "--out", str(out), "--replace"])
    assert res.exit_code == 0, res.output
    assert (out / MARKER).is_file() and not (out / "notes.txt").exists() and (out / "tasks.jsonl").is_file()
    res = CliRunner().invoke(app, ["tasks", "synth", "--n", "4", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len((out / "tasks.jsonl").read_text("utf-8").splitlines()) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["synth"]  # no temp or old folder left beside it
