"""The WorldSense eval recipe at the method's settings (issue 29, item 5): 15 planner steps, temperature 0 for every
role and the perception model, real perception (live) without web tools; its dry run resolves on the sample file
in tests/data and names whatever the cluster must provide.

    .venv/bin/pytest tests/eval/test_worldsense_recipe.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from omnidecision.cli import app

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "eval" / "worldsense.yaml"
DATA = ROOT / "tests" / "data" / "worldsense"
VARS = ("OD_WORLDSENSE", "OD_MEDIA_ROOT", "OD_PERCEPTION_URL", "OD_PERCEPTION_MODEL", "OD_BASE_URL", "OD_MODEL")


def _dry_run(args: list[str]) -> tuple[int, dict]:
    res = CliRunner().invoke(app, ["eval", "--config", str(RECIPE), *args, "--dry-run"])
    assert "{" in res.stdout, res.output[-2000:]
    return res.exit_code, json.loads(res.stdout[res.stdout.index("{"):])


def test_dry_run_at_the_methods_settings(monkeypatch, tmp_path):
    for var in VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OD_WORLDSENSE", str(DATA / "worldsense_qa.json"))
    monkeypatch.setenv("OD_MEDIA_ROOT", str(DATA))
    monkeypatch.setenv("OD_PERCEPTION_URL", "http://127.0.0.1:9/v1")  # a closed port: named, not contacted twice
    monkeypatch.setenv("OD_PERCEPTION_MODEL", "qwen2.5-omni")
    monkeypatch.setenv("OD_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OD_MODEL", "api-model")
    code, report = _dry_run(["--out", str(tmp_path / "eval")])
    resolved = report["resolved"]
    assert resolved["agent"]["step_budget"] == 15
    temps = {role: spec["temperature"] for role, spec in resolved["backends"].items()}
    assert temps == {"default": 0.0, "planner": 0.0}
    assert resolved["environment"]["perception"]["default"]["temperature"] == 0.0
    assert "web_search" not in resolved["environment"]["tools"]
    assert report["extra"]["environment"] == "live"
    checks = {c["what"]: c for c in report["checks"]}
    assert checks["tasks"]["status"] == "ok" and "(worldsense)" in checks["tasks"]["detail"]
    # here no endpoint answers: the environment check names them, and the dry run fails until they do
    env_errors = [c["detail"] for c in report["checks"] if c["what"] == "environment" and c["status"] == "error"]
    assert any("127.0.0.1:9" in e for e in env_errors) and code == 2


def test_dry_run_names_the_unset_variables(monkeypatch):
    for var in VARS:
        monkeypatch.delenv(var, raising=False)
    code, report = _dry_run([])
    errors = " ".join(c["detail"] for c in report["checks"] if c["status"] == "error")
    assert code == 2 and all(var in errors for var in VARS), errors
