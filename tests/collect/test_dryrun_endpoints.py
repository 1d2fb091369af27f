"""`collect --dry-run` contacts the endpoints the run needs (GET /models, a short timeout), as the run will: a
planner that is down is said in the report in plain words ("does not answer ... the run needs it up") instead of an
`ok` on the URL's syntax alone (issue 65: every check said ok, the run stopped 110 s in).

    pytest -q tests/collect/test_dryrun_endpoints.py
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from typer.testing import CliRunner

from omnidecision.cli import app
from tests.stub_chat import StrictOpenAIStub

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "collect" / "vllm-local.yaml"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _planner_check(base_url: str, out: Path) -> tuple[int, dict]:
    res = CliRunner().invoke(app, ["collect", "--config", str(RECIPE), "--backends.planner.base_url", base_url,
                                   "--out", str(out), "--dry-run"])
    report = json.loads(res.stdout)
    return res.exit_code, next(c for c in report["checks"] if c["what"] == "backends.planner")


def test_a_planner_that_is_down_is_named_not_passed(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    _, check = _planner_check(url, tmp_path / "out")
    assert check["status"] == "warning", check
    assert f"{url}/models does not answer" in check["detail"] and "the run needs it up" in check["detail"]


def test_a_planner_that_answers_is_contacted(tmp_path):
    stub = StrictOpenAIStub(lambda body: "{}", models=("tiny-planner",))
    try:
        _, check = _planner_check(stub.url, tmp_path / "out")
    finally:
        stub.close()
    assert stub.gets == 1, "the dry run did not contact the endpoint"
    assert check["status"] == "ok" and "answers GET /models" in check["detail"]
