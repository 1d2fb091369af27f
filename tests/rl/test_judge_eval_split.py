"""`judge eval` reads the held-out split by default (a harvest's `validation`), and its help names the options of
`judge train` as they are spelled today."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from omnidecision.rl.judge_train import judge_app


def _dry_run(rows, *extra: str) -> tuple[int, dict]:
    result = CliRunner().invoke(judge_app, ["eval", "--data", str(rows), *extra, "--dry-run"])
    return result.exit_code, json.loads(result.stdout)


def test_judge_eval_reads_the_held_out_split_by_default(tmp_path):
    rows = tmp_path / "rl"
    rows.mkdir()
    (rows / "train.jsonl").write_text('{"prompt": "p"}\n', "utf-8")
    code, report = _dry_run(rows)
    assert report["extra"]["split"] == "validation"
    assert code == 2 and "no `validation` split" in report["checks"][0]["detail"]  # train rows are not held out
    code, report = _dry_run(rows, "--split", "train")  # a harvest of held-out tasks alone: its rows sit under train
    assert report["extra"]["split"] == "train" and "no `train` split" not in json.dumps(report)


def test_judge_eval_help_names_the_options_of_today():
    options = {p.name: p for p in typer.main.get_command(judge_app).commands["eval"].params}
    assert options["split"].default == "validation" and "`validation` (the default)" in options["split"].help
    assert "--output_dir" in options["judge"].help and "--out" not in options["judge"].help.replace("--output_dir", "")
