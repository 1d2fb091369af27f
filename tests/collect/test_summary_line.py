"""The summary lines of `collect` and `eval` count error runs (no answer: a dead endpoint, a crash) apart from the
answered ones, never as wrong answers (issue 38, item 6): with the breaker off and the planner's endpoint gone, the
collect line says "0/0 answered, 3 errors", not "accuracy 0.000 (0/3)".

    .venv/bin/pytest tests/collect/test_summary_line.py -q
"""

from __future__ import annotations

import json
import re
import socket

from typer.testing import CliRunner

from omnidecision.cli import app


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recipe(tmp_path, planner: dict | None) -> dict:
    from omnidecision.tasks.synth import write_suite

    write_suite(3, 1, tmp_path / "tasks")
    backends = {"default": {"kind": "teacher", "options": {"noise": 0.0, "seed": 0}}}
    if planner is not None:
        backends["planner"] = planner
    return {"tasks": {"path": str(tmp_path / "tasks"), "format": "synthetic"}, "backends": backends,
            "agent": {"mode": "ledger", "step_budget": 8}, "samples": 1, "concurrency": 2,
            "out": str(tmp_path / "out"), "progress": False, "breaker": {"enabled": False}}


def _collect(tmp_path, recipe: dict) -> str:
    cfg = tmp_path / "recipe.yaml"
    cfg.write_text(json.dumps(recipe))
    res = CliRunner().invoke(app, ["collect", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    return res.output


def test_error_runs_are_counted_apart_in_the_collect_line(tmp_path):
    dead = {"kind": "openai", "base_url": f"http://127.0.0.1:{_closed_port()}/v1", "model": "planner",
            "max_retries": 0, "timeout_s": 2, "endpoint_kind": "vllm"}
    line = _collect(tmp_path, _recipe(tmp_path, dead)).strip().splitlines()[-1]
    assert "accuracy n/a (0/0 answered, 3 errors, 0 judge failures)" in line, line
    assert "error" in line and "0.000" not in line


def test_answered_runs_and_no_errors(tmp_path):
    line = _collect(tmp_path, _recipe(tmp_path, None)).strip().splitlines()[-1]
    m = re.search(r"accuracy (\S+) \((\d+)/(\d+) answered, (\d+) errors", line)
    assert m is not None, line
    assert int(m.group(3)) == 3 and int(m.group(4)) == 0 and float(m.group(1)) == int(m.group(2)) / 3


def test_the_eval_line_counts_errors_apart():
    from omnidecision.eval.cli import _answered

    rep = {"n": 60, "error_runs": 40, "accuracy_without_errors": 0.5}
    assert _answered(rep) == "20 answered, 40 errors, accuracy without errors 50.0%"
    assert _answered({"n": 10, "error_runs": 0, "accuracy_without_errors": 0.7}) == "10 answered, 0 errors"
