"""The OpenAI-compatible backend against a stub HTTP server (fault injection only): retry policy, request shape,
usage and cost. The real-server path is tested in test_vllm.py."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import ThreadingHTTPServer

import pytest

from omnidecision.backends.factory import build_backends, load_backend_specs
from omnidecision.backends.openai_backend import OpenAIBackend
from omnidecision.protocol.actions import role_schema
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatRequest
from tests.stub_chat import ChatStubHandler, received

REPLY = {"id": "x", "object": "chat.completion", "created": 0, "model": "stub-model",
         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '{"a": 1}'}}],
         "usage": {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}}


class Stub:
    def __init__(self, statuses: list[int]):
        self.statuses, self.bodies = list(statuses), []
        stub = self

        class Handler(ChatStubHandler):  # records every request (path, headers, body): `received(stub.server)`
            def do_POST(self):
                stub.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                status = stub.statuses.pop(0) if stub.statuses else 200
                payload = json.dumps(REPLY if status == 200 else {"error": {"message": f"status {status}"}}).encode()
                self._send(status, payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub_factory():
    stubs = []

    def make(statuses):
        stubs.append(Stub(statuses))
        return stubs[-1]

    yield make
    for s in stubs:
        s.close()


def chat(stub, **spec_kwargs):
    spec = BackendSpec(**{"base_url": stub.url, "model": "m", "max_retries": 3, **spec_kwargs})
    backend = OpenAIBackend(spec, retry_wait_s=0.001, retry_max_wait_s=0.002)
    request = ChatRequest(role="planner", messages=[{"role": "user", "content": "hi"}],
                          json_schema=role_schema("planner"), schema_name="planner_output")
    return asyncio.run(backend.chat(request))


def test_request_shape_usage_and_cost(stub_factory, monkeypatch):
    stub = stub_factory([])
    monkeypatch.setenv("STUB_PLANNER_KEY", "sk-stub-planner-1234")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-default-variable-5678")
    pinned = {"model": "planner-x", "temperature": 0.35, "max_tokens": 77, "top_p": 0.9}  # none the default
    assert all(v != BackendSpec.model_fields[k].default for k, v in pinned.items())
    resp = chat(stub, price_per_1k_prompt=0.5, price_per_1k_completion=2.0, enable_thinking=False,
                endpoint_kind="vllm", api_key_env="STUB_PLANNER_KEY", **pinned)
    assert resp.text == '{"a": 1}' and resp.model == "stub-model"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (1000, 500)
    assert resp.cost == pytest.approx(0.5 + 1.0)
    body = stub.bodies[0]
    (got,) = received(stub.server)  # what went over the wire: the chat path, the spec's values, the key of its env
    assert got.path == "/v1/chat/completions" and got.body == body
    assert {k: body[k] for k in pinned} == pinned
    assert got.header("Authorization") == "Bearer sk-stub-planner-1234"  # the spec's variable, not OPENAI_API_KEY
    assert "sk-the-default-variable-5678" not in got.raw.decode() + json.dumps(got.headers)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "planner_output"
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    plain = stub_factory([])
    assert chat(plain, structured_output=False).cost is None
    assert "response_format" not in plain.bodies[0]


def test_5xx_and_429_are_retried(stub_factory):
    stub = stub_factory([503, 429, 500])
    assert chat(stub).text == '{"a": 1}'
    assert len(stub.bodies) == 4


def test_4xx_is_not_retried(stub_factory):
    stub = stub_factory([400])
    with pytest.raises(BackendError, match="HTTP 400"):
        chat(stub)
    assert len(stub.bodies) == 1


def test_gives_up_after_max_retries(stub_factory):
    stub = stub_factory([502] * 10)
    with pytest.raises(BackendError, match="HTTP 502"):
        chat(stub)
    assert len(stub.bodies) == 4  # 1 + max_retries


def test_factory_shares_identical_specs_and_reads_yaml(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text("backends:\n  planner: {base_url: 'http://h/v1', model: p}\n"
                    "  critic: {base_url: 'http://h/v1', model: p}\n  finalizer: {kind: openai, model: big}\n")
    backends = build_backends(load_backend_specs(path))
    assert backends["planner"] is backends["critic"] and backends["finalizer"] is not backends["planner"]
    path.write_text("planner: {base_url: 'http://h/v1', temprature: 0.2}\n")
    with pytest.raises(ValueError, match=r"b.yaml: backends.planner.temprature"):
        load_backend_specs(path)
    with pytest.raises(ValueError, match="unknown backend kind"):
        build_backends({"planner": BackendSpec(kind="nope")})
