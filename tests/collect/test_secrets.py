"""A key planted wherever a user might put one never reaches a written file or the printed output (issue 38, item 4):
pasted into `api_key_env`, into backend options, into a base_url's userinfo (each refused, the error naming the
field, not the value), and held in the environment for a server that echoes it in its 500 error body (scrubbed
from warnings, `record.error` and every file of the collection).

    .venv/bin/pytest tests/collect/test_secrets.py -q
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from tests.stub_chat import ChatStubHandler

KEY = "sk-planted-" + secrets.token_hex(12)
KEY_ENV = "OD_TEST_PLANTED_KEY"


class _EchoesTheKey(ChatStubHandler):
    """Lists a model on GET /v1/models; answers every chat request HTTP 500 with the caller's key in the body."""

    def do_GET(self):
        self._send(200, json.dumps({"object": "list", "data": [{"id": "planner", "object": "model",
                                                                 "owned_by": "vllm"}]}).encode())

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        auth = self.headers.get("Authorization", "")
        self._send(500, json.dumps({"error": {"message": f"internal error for credentials {auth}",
                                              "type": "server_error"}}).encode())


@pytest.fixture
def echo_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoesTheKey)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _recipe(tasks: Path, out: Path, planner: dict) -> dict:
    return {"tasks": {"path": str(tasks), "format": "synthetic", "limit": 3},
            "backends": {"default": {"kind": "teacher"}, "planner": planner},
            "agent": {"mode": "ledger", "step_budget": 4}, "samples": 1, "concurrency": 2, "out": str(out),
            "progress": False, "breaker": {"enabled": False}}


def _run(tmp_path: Path, name: str, recipe: dict, *extra: str):
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(json.dumps(recipe))
    return CliRunner().invoke(app, ["collect", "--config", str(cfg), *extra])


def _files_holding(root: Path, text: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and text in p.read_text("utf-8", errors="replace")]


@pytest.fixture
def tasks(tmp_path):
    from omnidecision.tasks.synth import write_suite

    write_suite(3, 1, tmp_path / "tasks")
    return tmp_path / "tasks"


@pytest.mark.parametrize("where,planner,field", [
    ("api_key_env", {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": KEY},
     "api_key_env"),
    ("options", {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                 "options": {"extra_body": {"api_key": KEY}}}, "options.extra_body.api_key"),
    ("option value", {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                      "options": {"extra_body": {"user": KEY}}}, "options.extra_body.user"),
    ("userinfo", {"kind": "openai", "base_url": f"http://planner:{KEY}@127.0.0.1:9/v1", "model": "m"}, "base_url"),
])
def test_a_key_pasted_into_a_recipe_is_refused_without_echo(tmp_path, tasks, where, planner, field):
    out = tmp_path / "out"
    for extra in (["--dry-run"], []):
        res = _run(tmp_path, where, _recipe(tasks, out, planner), *extra)
        assert res.exit_code != 0, res.output
        assert field in res.output and KEY not in res.output, res.output
    assert not out.exists() or _files_holding(out, KEY) == []
    assert _files_holding(tmp_path, KEY) == [str(tmp_path / f"{where}.yaml")]  # only the recipe the user wrote


def test_a_key_echoed_by_the_server_is_scrubbed_everywhere(tmp_path, tasks, echo_server, monkeypatch, caplog):
    monkeypatch.setenv(KEY_ENV, KEY)
    out = tmp_path / "out"
    planner = {"kind": "openai", "base_url": echo_server, "model": "planner", "api_key_env": KEY_ENV,
               "max_retries": 0, "endpoint_kind": "vllm"}
    caplog.set_level(logging.DEBUG)
    dry = _run(tmp_path, "dry", _recipe(tasks, out, planner), "--dry-run")
    assert dry.exit_code == 0, dry.output
    res = _run(tmp_path, "echo", _recipe(tasks, out, planner))
    files = sorted(out.glob("trajectories*.jsonl"))
    assert files, (res.output, sorted(p.name for p in out.iterdir()))
    records = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert records and all(r["outcome"] == "error" for r in records), res.output
    # the server did echo it (the test can fail): the record says so, with the key replaced
    assert all("HTTP 500" in r["error"] and "***" in r["error"] for r in records)
    assert KEY not in dry.output and KEY not in res.output and KEY not in caplog.text
    assert _files_holding(out, KEY) == []
    assert "***" in caplog.text  # the warning of each failed run, scrubbed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backends"]["planner"]["api_key_env"] == KEY_ENV  # the variable's name, never its value


def test_perception_and_search_specs_refuse_a_pasted_key_without_echo():
    from pydantic import ValidationError

    from omnidecision.backends.perception import PerceptionSpec
    from omnidecision.tools.search_apis import SearchSpec

    for build in (lambda: SearchSpec(kind="tavily", api_key_env=KEY),
                  lambda: SearchSpec(kind="searxng", base_url=f"http://u:{KEY}@search.local"),
                  lambda: SearchSpec(kind="brave", options={"token": KEY}),
                  lambda: PerceptionSpec(api_key_env=KEY),
                  lambda: PerceptionSpec(base_url=f"http://u:{KEY}@gpu-node:8001/v1"),
                  lambda: PerceptionSpec(extra_body={"authorization": f"Bearer {KEY}"})):
        with pytest.raises(ValidationError) as err:
            build()
        assert KEY not in str(err.value) and "not shown" in str(err.value)
    assert SearchSpec(kind="tavily", api_key_env="TAVILY_API_KEY", options={"max_tokens": 5}).api_key_env
