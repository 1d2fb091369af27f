"""Request fields only vLLM takes go only to vLLM (`BackendSpec.endpoint_kind`): against a strict OpenAI-schema
stub (fault injection: it answers 400 to any field outside OpenAI's request schema, as OpenAI does) every role of
the default recipes, the OmniGAIA LLM judge, the reward judge and the API-planner eval row complete; a backend
forced to send vLLM fields gets a 400 that names the field. The real-vLLM side is in test_vllm.py.

    .venv/bin/pytest tests/agent/test_endpoint_kind.py
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.backends.openai_backend import OpenAIBackend, known_endpoint_kind
from omnidecision.cli import app
from omnidecision.protocol.actions import role_schema
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatRequest
from tests.stub_chat import StrictOpenAIStub

ROOT = Path(__file__).resolve().parents[2]

NEED = {"description": "the answer", "role": "blocking", "preferred_source": "web", "query_focus": "answer"}


class AgentReplies:
    """Valid content for each role, chosen by the request's schema name: decompose one need, call it once, the
    critic fills it, then finish; the judges say correct."""

    def __init__(self) -> None:
        self.planner_calls = 0

    def __call__(self, body: dict) -> str:
        name = (body.get("response_format") or {}).get("json_schema", {}).get("name")
        if name == "decompose_output":
            return json.dumps({"needs": [NEED], "slots": []})
        if name == "planner_output":
            self.planner_calls += 1
            return json.dumps({"action": "call", "need": 0} if self.planner_calls == 1 else {"action": "finish"})
        if name == "critic_output":
            return json.dumps({"verdicts": [{"need": 0, "verdict": "supports", "value": "42", "status": "filled"}],
                               "evidence": [{"claim": "the answer is 42", "supports": [0]}]})
        if name == "finalizer_output":
            return json.dumps({"answer": "42", "check": "pass"})
        if name == "judge_verdict":
            return json.dumps({"score": 0.75, "reason": "plausible"})
        return "Correct"  # the OmniGAIA judge: free text


@pytest.fixture
def strict():
    stubs: list[StrictOpenAIStub] = []

    def make(reply=None) -> StrictOpenAIStub:
        stubs.append(StrictOpenAIStub(reply or AgentReplies()))
        return stubs[-1]

    yield make
    for s in stubs:
        s.close()


def _request(role: str = "planner") -> ChatRequest:
    return ChatRequest(role=role, messages=[{"role": "user", "content": "hi"}], json_schema=role_schema(role),
                       schema_name=f"{role}_output")


def test_request_fields_per_endpoint_kind():
    extra = {"mm_processor_kwargs": {"fps": 1}, "seed": 7}
    spec = BackendSpec(base_url="http://node-a:8000/v1", model="m", options={"extra_body": extra})
    vllm = OpenAIBackend(spec.model_copy(update={"endpoint_kind": "vllm"})).request_kwargs(_request())
    assert vllm["extra_body"] == {**extra, "chat_template_kwargs": {"enable_thinking": False}}
    openai_ = OpenAIBackend(spec.model_copy(update={"endpoint_kind": "openai"})).request_kwargs(_request())
    assert openai_["extra_body"] == {"seed": 7}  # OpenAI's own field stays, vLLM's go
    assert openai_["response_format"]["json_schema"]["name"] == "planner_output"
    assert known_endpoint_kind("https://api.openai.com/v1") == "openai"
    assert known_endpoint_kind("https://x.openai.azure.com/openai/v1") == "openai"
    assert known_endpoint_kind(None) == "openai" and known_endpoint_kind("http://127.0.0.1:8000/v1") is None
    with pytest.raises(ValueError, match="endpoint_kind"):
        BackendSpec(endpoint_kind="sglang")


def test_vllm_fields_to_an_openai_endpoint_fail_naming_the_field(strict):
    stub = strict()
    backend = OpenAIBackend(BackendSpec(base_url=stub.url, model="gpt-4.1-mini", endpoint_kind="vllm"))
    with pytest.raises(BackendError, match=r"refused the request field 'chat_template_kwargs'.*endpoint_kind: openai"):
        asyncio.run(backend.chat(_request()))
    assert len(stub.bodies) == 1 and stub.gets == 0  # a 400 is not retried; an explicit kind needs no probe


def test_auto_asks_the_endpoint_once(strict):
    stub = strict()
    backend = OpenAIBackend(BackendSpec(base_url=stub.url, model="gpt-4.1-mini"))

    async def two():
        return [await backend.chat(_request("finalizer")) for _ in range(2)]

    replies = asyncio.run(two())
    assert [json.loads(r.text)["check"] for r in replies] == ["pass", "pass"]
    assert stub.gets == 1 and not stub.refused
    assert all("chat_template_kwargs" not in b for b in stub.bodies)


def test_default_collect_recipe_every_role_and_the_judge(strict, tmp_path, monkeypatch):
    stub = strict()
    monkeypatch.setenv("OD_BASE_URL", stub.url)
    monkeypatch.setenv("OD_MODEL", "gpt-4.1-mini")
    monkeypatch.delenv("OD_OMNIGAIA", raising=False)
    res = CliRunner().invoke(app, ["collect", "--config", str(ROOT / "configs/collect/omnigaia-replay-api.yaml"),
                                   "--out", str(tmp_path), "--tasks.limit", "1", "--samples", "1", "--no-progress"])
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for f in tmp_path.rglob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(records) == 1, records
    assert records[0]["outcome"] == "accepted" and records[0]["error"] is None, records[0]
    assert not stub.refused
    names = stub.schema_names()
    for role in ("decompose", "planner", "critic", "finalizer"):
        assert f"{role}_output" in names, names
    assert "-" in names and records[0]["judge"]["method"] == "llm_judge"  # the OmniGAIA judge asked the API model


def test_api_planner_eval_row(strict, tmp_path, monkeypatch):
    """docs/cluster-workflow.md step 7's baseline row: every role (the planner too) on the API model."""
    stub = strict()
    monkeypatch.setenv("OD_BASE_URL", stub.url)
    monkeypatch.setenv("OD_MODEL", "gpt-4.1-mini")
    monkeypatch.setenv("OD_OMNIGAIA", str(ROOT / "tests/data/omnigaia_dev/dev_metadata.json"))
    # the recipe's live environment names these; the row runs in replay, so they are never contacted
    for var, value in (("OD_MEDIA_ROOT", str(tmp_path)), ("OD_PERCEPTION_URL", stub.url),
                       ("OD_PERCEPTION_MODEL", "gpt-4.1-mini"), ("OD_SEARXNG_URL", stub.url)):
        monkeypatch.setenv(var, value)
    res = CliRunner().invoke(app, [
        "eval", "--config", str(ROOT / "configs/eval/qwen3-8b-sft.yaml"), "--serve", "null",
        "--backends.planner.base_url", stub.url, "--backends.planner.model", "gpt-4.1-mini",
        "--environment.kind", "replay", "--tasks.limit", "1", "--samples", "1", "--plots", "false",
        "--out", str(tmp_path), "--no-progress"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["n"] == 1 and report["outcomes"].get("error", 0) == 0, report["outcomes"]
    assert report["planner"]["endpoint"] == stub.url and not stub.refused
    assert "planner_output" in stub.schema_names()


def test_reward_judge_with_default_options(strict):
    from omnidecision.ledger import Ledger
    from omnidecision.rewards.llm_judge import RewardJudge

    stub = strict()
    judge = RewardJudge.from_options(base_url=stub.url, model="gpt-4.1-mini")
    try:
        scores = judge.score([(Ledger(), '{"action": "finish"}')])
    finally:
        judge.close()
    assert scores == [0.75] and not stub.refused and stub.schema_names() == ["judge_verdict"]
