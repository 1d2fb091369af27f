"""`omnidecision rounds --dry-run` resolves the recipe with its overrides and checks what the rounds will read
(issue 65: it answered "dry_run: Extra inputs are not permitted"): round 1's eval (the served start model, the
tasks), the SFT folder every round joins and the stage recipe each round runs; it prints the rounds it would run and
starts nothing.

    pytest -q tests/onpolicy/test_rounds_dry_run.py
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from omnidecision.cli import app

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "rounds" / "tiny-cpu.yaml"


def test_rounds_dry_run_names_what_is_missing_and_starts_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the recipe's runs/demo/... paths do not exist here
    res = CliRunner().invoke(app, ["rounds", "--config", str(RECIPE), "--rounds", "3", "--out", "runs/r",
                                   "--dry-run"])
    assert res.exit_code == 2, res.output
    assert "Extra inputs" not in res.output
    report = json.loads(res.stdout)
    failed = {c["what"]: c["detail"] for c in report["checks"] if c["status"] == "error"}
    assert "runs/demo/data/sft does not exist" in failed["base_sft_data"]
    assert "runs/demo/models/sft: no such folder" in failed["model"]  # the start model, served in round 1
    assert len(report["would_run"]) == 3 and report["would_run"][2].endswith(str(Path("runs/r") / "round-3"))
    assert not (tmp_path / "runs").exists()
    assert [line for line in res.stderr.splitlines() if line.startswith("error: base_sft_data: ")]
