"""`compare` and `ablate` on synthetic tasks with the scripted teacher, through the real CLI."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.eval.compare import load_report
from omnidecision.eval.runner import run_eval

from .conftest import teacher_recipe

runner = CliRunner()


def test_compare_two_runs(synth_dir, tmp_path):
    a = run_eval(teacher_recipe(synth_dir, tmp_path / "a", step_budget=15), progress=False)
    b = run_eval(teacher_recipe(synth_dir, tmp_path / "b", step_budget=4), progress=False)
    res = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b" / "report.json"),
                              "--out", str(tmp_path / "cmp")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    rows = doc["runs"]
    assert [r["n"] for r in rows] == [32, 32]
    assert rows[0]["delta_vs_first"] == 0.0 and rows[0]["ci_overlaps_first"] is True
    assert rows[1]["delta_vs_first"] == b["accuracy"] - a["accuracy"]
    assert rows[1]["outcomes"]["budget"] >= rows[0]["outcomes"]["budget"]  # T = 4 runs out of steps more often
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert md.count("\n| ") >= 3 and "95% CI" in md
    assert (tmp_path / "cmp" / "compare.png").stat().st_size > 1000


def test_compare_rejects_a_non_report(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"accuracy": 0.5}')
    res = runner.invoke(app, ["compare", str(bad)])
    assert res.exit_code == 2 and "not an eval report" in res.output


def test_ablate_budget_matched(synth_dir, tmp_path):
    cfg = tmp_path / "r.yaml"
    recipe = teacher_recipe(synth_dir, tmp_path / "unused")
    import yaml

    cfg.write_text(yaml.safe_dump(recipe.model_dump(mode="json")))
    out = tmp_path / "ablate"
    res = runner.invoke(app, ["ablate", "--config", str(cfg), "--out", str(out), "--max-tool-calls", "5",
                              "--samples", "1"])  # passthrough override
    assert res.exit_code == 0, res.output
    rows = json.loads((out / "compare.json").read_text())["runs"]
    assert [r["mode"] for r in rows] == ["ledger", "react", "memory"]
    for r in rows:
        assert r["n"] == 16 and r["max_tool_calls"] == 5
        assert sum(r["outcomes"].values()) == 16
        assert r["tool_calls_per_question"] <= 5
    for mode in ("ledger", "react", "memory"):
        rep = load_report(out / mode)
        assert rep["mode"] == mode
        runs = [json.loads(x) for x in (out / mode / "trajectories.jsonl").read_text().splitlines()]
        assert all(sum(r["totals"]["tool_calls"].values()) <= 5 for r in runs)
    assert "Budget-matched" in res.output


def test_eval_cli_bad_recipe(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("tasks: {path: x}\nbackends: {default: {kind: teacher}}\nagent: {step_budget: zero}\n")
    res = runner.invoke(app, ["eval", "--config", str(cfg)])
    assert res.exit_code == 2
    assert "bad.yaml" in res.output and "agent.step_budget" in res.output
