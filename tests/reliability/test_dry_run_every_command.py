"""Every command that writes or runs takes `--dry-run` (README; issue 65: 15 of 28 commands had none), and each dry
run refuses what its run refuses, in the run's own words, and writes nothing (docs/dry-runs.md).

- `test_every_command_takes_dry_run`: the commands are read from the Typer app (the walk of
  tests/architecture/test_flag_spelling.py), not listed here; only a command that neither writes nor runs
  (`NEITHER_WRITES_NOR_RUNS`, each with why) may lack the switch;
- `test_the_dry_run_refuses_what_the_run_refuses`: per command, one bad input: the dry run exits 2 with the run's
  error line (click's own message, for `tool`), and the folder it was pointed at gains no file, lock or folder;
- `test_a_passing_dry_run_writes_nothing`: a dry run over good input prints one JSON document on stdout and writes
  nothing; a run that needs endpoints says they were not contacted.

In process (typer's CliRunner) on six synthetic tasks and three teacher runs: a few seconds.

    .venv/bin/pytest -q tests/reliability/test_dry_run_every_command.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from tests.architecture.test_flag_spelling import commands, visible_options
from tests.reliability.conftest import teacher_runs

# commands without --dry-run, and why: nothing to check before it, nothing written, nothing started
NEITHER_WRITES_NOR_RUNS = {"version": "prints the package version"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """synth/ (six tasks), runs/ (three teacher runs of them), bad files: what the commands read."""
    root = tmp_path_factory.mktemp("inputs")
    teacher_runs(root, root / "runs" / "trajectories.jsonl")  # six tasks, three teacher runs, by `run` itself
    (root / "empty.jsonl").write_text("", "utf-8")
    (root / "not-a-report.json").write_text('{"accuracy": 0.5}', "utf-8")
    (root / "bad-tasks.jsonl").write_text('{"id": "a", "question": "q"}\n{"id": "b"}\n', "utf-8")
    (root / "rows").mkdir()
    (root / "rows" / "train.jsonl").write_text('{"prompt": "p"}\n', "utf-8")  # no decision, advanced, ledger
    return root


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def test_every_command_takes_dry_run():
    cmds = commands()
    assert len(cmds) >= 28 and {"run", "tool", "collect merge", "audit rewards", "tasks check"} <= set(cmds)
    missing = sorted(path for path, cmd in cmds.items()
                     if path not in NEITHER_WRITES_NOR_RUNS and "--dry-run" not in visible_options(cmd))
    assert not missing, f"commands that write or run without --dry-run: {missing}"
    stale = sorted(set(NEITHER_WRITES_NOR_RUNS) - set(cmds))
    assert not stale, f"NEITHER_WRITES_NOR_RUNS names commands that do not exist: {stale}"


# command -> argv with one bad input ({i}: the inputs folder, {o}: an empty folder for outputs)
REFUSED: dict[str, list[str]] = {
    "run": ["run", "--tasks", "{i}/synth", "--teacher", "--task-id", "nope", "--out", "{o}/one.jsonl"],
    "replay": ["replay", "{i}/empty.jsonl"],
    "tool": ["tool", "no_such_tool", "--args", "{{}}"],
    "compare": ["compare", "{i}/not-a-report.json", "--out", "{o}/compare"],
    "view": ["view", "{i}/runs", "--out", "{i}/runs/view"],
    "tasks synth": ["tasks", "synth", "--n", "3", "--out", "{i}/runs"],
    "tasks check": ["tasks", "check", "{i}/bad-tasks.jsonl"],
    "tasks split": ["tasks", "split", "{i}/synth", "--folds", "2", "--out", "{i}/synth/folds"],
    "collect merge": ["collect", "merge", "{i}/runs/trajectories.jsonl", "--out",
                      "{i}/runs/trajectories.jsonl"],
    "judge eval": ["judge", "eval", "--data", "{i}/rows", "--out", "{o}/judge.json"],
    "audit progress": ["audit", "progress", "{i}/none.jsonl", "--tasks", "{i}/synth", "--out", "{o}/progress"],
    "audit rewards": ["audit", "rewards", "--data", "{i}/rows", "--runs", "{i}/runs", "--out", "{o}/audit"],
    "tiny-planner": ["tiny-planner", "--data", "{i}/rows", "--out", "{i}/rows/model"],
}


@pytest.mark.parametrize("command", sorted(REFUSED))
def test_the_dry_run_refuses_what_the_run_refuses(command: str, inputs: Path, tmp_path: Path):
    args = [a.format(i=inputs, o=tmp_path) for a in REFUSED[command]]
    before, outs = _tree(inputs), _tree(tmp_path)
    dry = _invoke([*args, "--dry-run"])
    assert dry.exit_code == 2, (command, dry.output)
    assert _tree(inputs) == before and _tree(tmp_path) == outs, f"{command} --dry-run wrote something"
    real = _invoke(args)
    assert real.exit_code in (1, 2), (command, real.output)  # tasks check/split: 1 for a bad task file
    if command == "tool":  # click's usage error, the same in both
        assert dry.stderr == real.stderr and "no_such_tool" in dry.stderr
    else:
        dry_errors = [line for line in dry.stderr.splitlines() if line.startswith("error:")]
        real_errors = [line for line in real.stderr.splitlines() if line.startswith("error:")]
        assert dry_errors and dry_errors == real_errors, (command, dry.stderr, real.stderr)
    assert _tree(inputs) == before and _tree(tmp_path) == outs, f"{command} wrote past its refusal"


def test_the_refusals_cover_every_new_dry_run():
    """Each command that gained --dry-run with issue 65 (and the writers given the output checks) is refused above."""
    assert set(REFUSED) == {"run", "replay", "tool", "compare", "view", "tasks synth", "tasks check", "tasks split",
                            "collect merge", "judge eval", "audit progress", "audit rewards", "tiny-planner"}


# command -> argv that passes every check
PASSES: dict[str, list[str]] = {
    "run": ["run", "--tasks", "{i}/synth", "--teacher", "--out", "{o}/one.jsonl"],
    "replay": ["replay", "{i}/runs/trajectories.jsonl"],
    "tool": ["tool", "code_executor", "--args", '{{"code": "open(\'x\', \'w\')"}}'],
    "view": ["view", "{i}/runs", "--out", "{o}/view"],
    "tasks synth": ["tasks", "synth", "--n", "3", "--out", "{o}/synth"],
    "tasks check": ["tasks", "check", "{i}/synth"],
    "collect merge": ["collect", "merge", "{i}/runs", "--out", "{o}/merged.jsonl"],
    "audit progress": ["audit", "progress", "{i}/runs", "--tasks", "{i}/synth", "--scorer", "llm", "--endpoint",
                       "http://127.0.0.1:9/v1", "--model", "m", "--out", "{o}/progress"],
}


@pytest.mark.parametrize("command", sorted(PASSES))
def test_a_passing_dry_run_writes_nothing(command: str, inputs: Path, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `tool code_executor` would write x here
    args = [a.format(i=inputs, o=tmp_path) for a in PASSES[command]]
    before = _tree(inputs)
    res = _invoke([*args, "--dry-run"])
    assert res.exit_code == 0, (command, res.output)
    report = json.loads(res.stdout)  # stdout is the report alone
    assert not _tree(tmp_path) and _tree(inputs) == before, f"{command} --dry-run wrote something"
    if command in ("run", "tool", "audit progress"):  # endpoints a run needs: said not contacted
        assert "not contacted" in res.stdout, report
