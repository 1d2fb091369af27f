"""Every command that writes takes `--dry-run` (DESIGN.md invariant 10; issue 65: harvest and `tasks split`, two of
the quick start's lines, had none): the dry run reads and refuses what the run reads and refuses, prints what it
would write, and writes nothing.

    pytest -q tests/collect/test_dry_runs_write_nothing.py
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from omnidecision.cli import app


def _invoke(*args: str):
    return CliRunner().invoke(app, [*args])


def test_harvest_dry_run_counts_the_rows_and_writes_nothing(teacher_runs: Path, tmp_path: Path):
    out = tmp_path / "h"
    res = _invoke("harvest", str(teacher_runs), "--out", str(out), "--val-fraction", "0.2", "--dry-run")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    rows = report["extra"]["rows"]
    assert not out.exists() and not list(tmp_path.iterdir())
    real = _invoke("harvest", str(teacher_runs), "--out", str(out), "--val-fraction", "0.2")
    assert real.exit_code == 0, real.output
    stats = json.loads((out / "stats.json").read_text())
    assert rows["rl"] == {"train": stats["rl"]["train"], "validation": stats["rl"]["validation"]}


def test_harvest_dry_run_refuses_a_bad_line_as_the_run_does(teacher_runs: Path, tmp_path: Path):
    bad = tmp_path / "runs"
    bad.mkdir()
    lines = next(teacher_runs.glob("trajectories*.jsonl")).read_text().splitlines(keepends=True)
    (bad / "trajectories.jsonl").write_text(lines[0] + "{not json\n" + "".join(lines[1:3]))
    dry = _invoke("harvest", str(bad), "--out", str(tmp_path / "h"), "--dry-run")
    real = _invoke("harvest", str(bad), "--out", str(tmp_path / "h"))
    assert dry.exit_code == real.exit_code == 2, (dry.output, real.output)
    dry_error = [line for line in dry.stderr.splitlines() if line.startswith("error:")]
    assert len(dry_error) == 1 and f"{bad / 'trajectories.jsonl'}:2" in dry_error[0]
    assert not (tmp_path / "h").exists()


def test_tasks_split_dry_run_deals_the_folds_and_writes_nothing(synth_dir: Path, tmp_path: Path):
    out = tmp_path / "folds"
    res = _invoke("tasks", "split", str(synth_dir), "--folds", "3", "--out", str(out), "--dry-run")
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["tasks"] == 60 and sum(plan["sizes"]) == 60 and str(out / "folds.json") in plan["would_write"]
    assert not out.exists()
    real = _invoke("tasks", "split", str(synth_dir), "--folds", "3", "--out", str(out))
    assert real.exit_code == 0 and json.loads((out / "folds.json").read_text())["sizes"] == plan["sizes"]
    assert sorted(str(p) for p in out.rglob("*.json")) == sorted(plan["would_write"])
