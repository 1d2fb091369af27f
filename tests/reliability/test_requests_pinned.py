"""What the project SENDS to a real endpoint, pinned (issue 65, item 7): the stub endpoints record every request
(tests/stub_chat.py: path, headers, JSON body) and these tests assert the request as well as what the project did
with the answer, for each client the project has: the agent's roles through a collect recipe (planner, critic, the
`default` roles, the OmniGAIA answer judge), the eval's planner, the LLM reward judge (`RewardJudge.from_options`),
GRPO's judge (`GRPOScriptArguments.judge_*` → reward factory → request) and a live recipe's perception endpoint.

The expected values are read from the recipe / config objects the test builds (never a copy of a default), and
every pinned field holds a value other than its default, so a client that sends the default instead of the
recipe's value (or drops a field) fails here. The Authorization header carries the key of the variable the
spec's `*_env` names, and no other planted secret appears anywhere in any request. Planted "the backend sends
BackendSpec's default temperature instead of the spec's" (backends/openai_backend.py `request_kwargs`): the collect,
eval and reward-judge tests fail; planted "the key is read from OPENAI_API_KEY": collect and the reward judge fail.

    .venv/bin/pytest tests/reliability/test_requests_pinned.py -q
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from omnidecision.backends.openai_backend import openai_request_fields
from omnidecision.backends.perception import OpenAIPerception, PerceptionSpec
from omnidecision.cli import app
from omnidecision.ledger import Ledger
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rewards import get_reward_funcs
from omnidecision.rewards.closure import EXAMPLE_LEDGER
from omnidecision.rewards.llm_judge import RewardJudge
from omnidecision.rl.judge_stats import judges_of
from omnidecision.rollout.recipe import EvalRecipe, RolloutRecipe, load_recipe
from omnidecision.tasks.schema import Asset
from tests.agent.test_endpoint_kind import AgentReplies
from tests.stub_chat import Received, StrictOpenAIStub

ROOT = Path(__file__).resolve().parents[2]
OMNIGAIA_DEV = ROOT / "tests" / "data" / "omnigaia_dev" / "dev_metadata.json"

# one key per variable a spec names, and decoys no request may carry (a client that sent the default variable's
# key, or the environment's other tokens, would show one of them)
KEYS = {"PINNED_DEFAULT_KEY": "sk-pinned-default-0a1b2c3d4e5f", "PINNED_PLANNER_KEY": "sk-pinned-planner-6a7b8c9d",
        "PINNED_CRITIC_KEY": "sk-pinned-critic-1f2e3d4c5b", "PINNED_JUDGE_KEY": "sk-pinned-judge-9e8d7c6b5a"}
DECOYS = {"OPENAI_API_KEY": "sk-decoy-openai-default-77aa88bb", "HF_TOKEN": "hf_decoyTokenNeverSent1234567",
          "WANDB_API_KEY": "decoywandbkey0123456789abcdef"}

# the request fields a BackendSpec decides, pinned with a value other than the default in every spec below
PINNED = ("model", "temperature", "top_p", "max_tokens")

SPECS: dict[str, dict[str, Any]] = {
    "default": {"kind": "openai", "model": "default-pinned", "api_key_env": "PINNED_DEFAULT_KEY", "temperature": 0.61,
                "top_p": 0.77, "max_tokens": 333, "endpoint_kind": "vllm", "enable_thinking": True,
                "options": {"extra_body": {"seed": 1234, "stop": ["</pinned>"]}}},
    "planner": {"kind": "openai", "model": "planner-pinned", "api_key_env": "PINNED_PLANNER_KEY", "temperature": 0.37,
                "top_p": 0.83, "max_tokens": 211, "endpoint_kind": "vllm",
                "options": {"extra_body": {"seed": 7, "stop": ["</act>", "\n\n"], "top_k": 5}}},
    "critic": {"kind": "openai", "model": "critic-pinned", "api_key_env": "PINNED_CRITIC_KEY", "temperature": 0.13,
               "top_p": 0.91, "max_tokens": 444, "endpoint_kind": "openai",
               "options": {"extra_body": {"seed": 99, "top_k": 3}}},  # top_k: vLLM's, dropped for "openai"
}
JUDGE_LLM = {"kind": "openai", "model": "judge-pinned", "api_key_env": "PINNED_JUDGE_KEY", "temperature": 0.05,
             "top_p": 0.5, "max_tokens": 17, "structured_output": False, "endpoint_kind": "openai"}


@pytest.fixture
def endpoint(monkeypatch):
    """A lenient (vLLM-like) recording endpoint answering each role validly; the planted keys and decoys set."""
    for var, value in {**KEYS, **DECOYS}.items():
        monkeypatch.setenv(var, value)
    stub = StrictOpenAIStub(AgentReplies(), models=("default-pinned",), strict=False)
    yield stub
    stub.close()


def _write_recipe(tmp_path: Path, url: str, extra: dict[str, Any] | None = None) -> Path:
    backends = {role: {**spec, "base_url": url} for role, spec in SPECS.items()}
    recipe = {"tasks": {"path": str(OMNIGAIA_DEV), "format": "omnigaia", "limit": 1},
              "environment": {"kind": "replay"}, "backends": backends, "samples": 1,
              "judge": {"enabled": True, "scorer": "gaia", "llm": {**JUDGE_LLM, "base_url": url}}, **(extra or {})}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def _spec_default(name: str) -> Any:
    return BackendSpec.model_fields[name].default


def _expected_body(spec: BackendSpec, kind: str) -> dict[str, Any]:
    """The top-level request fields `spec` decides, as an endpoint of `kind` must receive them."""
    body: dict[str, Any] = {name: getattr(spec, name) for name in PINNED}
    extra = dict(spec.options.get("extra_body", {}))
    if kind == "openai":
        extra = {k: v for k, v in extra.items() if k in openai_request_fields()}
    else:
        extra.setdefault("chat_template_kwargs", {"enable_thinking": spec.enable_thinking})
    return {**body, **extra}


def _assert_request(got: Received, spec: BackendSpec, who: str, kind: str | None = None) -> None:
    """`got` carries exactly what `spec` says, the key of `spec.api_key_env` and no other secret. `kind`: the
    endpoint's kind when the spec says "auto" (the stub lists its models as owned by "openai")."""
    kind = kind or spec.endpoint_kind
    assert kind in ("vllm", "openai"), (who, kind)
    assert got.method == "POST" and got.path.endswith("/chat/completions"), (who, got.path)
    body = got.body
    for name, value in _expected_body(spec, kind).items():
        assert body.get(name) == value, f"{who}: sent {name}={body.get(name)!r}, the recipe says {value!r}"
    if kind == "openai":
        sent = set(body) - openai_request_fields()
        assert not sent, f"{who}: fields outside OpenAI's schema sent to an openai endpoint: {sorted(sent)}"
    assert ("response_format" in body) == spec.structured_output, (who, body.get("response_format"))
    assert got.header("Authorization") == f"Bearer {KEYS[spec.api_key_env]}", f"{who}: wrong Authorization"
    assert got.header("Content-Type") == "application/json", who
    _assert_no_other_secret(got, spec.api_key_env, who)


def _assert_no_other_secret(got: Received, key_env: str, who: str) -> None:
    """No planted value but `key_env`'s anywhere in the request, and no credential-like header beside
    Authorization (the specs here set no `default_headers`)."""
    text = got.raw.decode() + json.dumps(got.headers)
    for var, value in {**KEYS, **DECOYS}.items():
        if var != key_env:
            assert value not in text, f"{who}: the value of ${var} leaked into the request"
    credential_like = [h for h in got.headers if h != "authorization" and any(
        word in h for word in ("key", "token", "secret", "cookie", "auth"))]
    assert not credential_like, f"{who}: credential-like headers sent: {credential_like}"


def test_the_specs_pin_values_other_than_the_defaults():
    """Each pinned field differs from BackendSpec's default in every spec (so a client that sent the default, or
    one role's value for another's, would be caught)."""
    for spec in [*SPECS.values(), JUDGE_LLM]:
        for name in (*PINNED, "api_key_env"):
            assert spec[name] != _spec_default(name), (spec["model"], name)
    for name in PINNED:
        values = [spec[name] for spec in [*SPECS.values(), JUDGE_LLM]]
        assert len(set(values)) == len(values), f"{name}: two specs share {values}"


def _by_role(stub: StrictOpenAIStub) -> dict[str, list[Received]]:
    """The POSTs grouped by the role the request's schema names ("judge": the OmniGAIA judge, free text)."""
    out: dict[str, list[Received]] = {}
    for got in stub.received():
        if got.method != "POST":
            continue
        name = (got.body.get("response_format") or {}).get("json_schema", {}).get("name", "judge_output")
        out.setdefault(name.removesuffix("_output"), []).append(got)
    return out


def test_collect_sends_each_roles_recipe_values(endpoint, tmp_path):
    path = _write_recipe(tmp_path, endpoint.url)
    recipe = load_recipe(path, model=RolloutRecipe)  # the expected values: the recipe as the project reads it
    res = CliRunner().invoke(app, ["collect", "--config", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for f in (tmp_path / "out").rglob("trajectories*.jsonl")
               for line in f.read_text().splitlines()]
    assert len(records) == 1 and records[0]["error"] is None, records
    assert records[0]["judge"]["method"] == "llm_judge", records[0]["judge"]  # the answer judge was asked
    roles = _by_role(endpoint)
    assert {"decompose", "planner", "critic", "finalizer", "judge"} <= set(roles), sorted(roles)
    expected = {"planner": recipe.backends["planner"], "critic": recipe.backends["critic"],
                "decompose": recipe.backends["default"], "finalizer": recipe.backends["default"],
                "judge": recipe.judge.llm}
    for role, spec in expected.items():
        for got in roles[role]:
            _assert_request(got, spec, role)
    assert endpoint.gets == 0  # every endpoint_kind is explicit: no /models probe


def test_eval_sends_the_planners_recipe_values(endpoint, tmp_path):
    """The eval client (no server of its own: the planner is any endpoint), a planner override on the command line
    included: the request carries the overridden temperature."""
    path = _write_recipe(tmp_path, endpoint.url, {"plots": False, "name": "pinned"})
    overrides = ["--backends.planner.temperature", "0.29"]
    recipe = load_recipe(path, ["backends.planner.temperature=0.29"], model=EvalRecipe)
    assert recipe.backends["planner"].temperature == 0.29 != SPECS["planner"]["temperature"]
    res = CliRunner().invoke(app, ["eval", "--config", str(path), "--out", str(tmp_path / "out"), "--no-progress",
                                   *overrides])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["n"] == 1 and report["planner"]["model"] == recipe.backends["planner"].model, report["planner"]
    roles = _by_role(endpoint)
    assert roles.get("planner"), sorted(roles)
    for got in roles["planner"]:
        _assert_request(got, recipe.backends["planner"], "eval planner")
    for got in roles.get("critic", []):
        _assert_request(got, recipe.backends["critic"], "eval critic")


def _judge_default(name: str) -> Any:
    return inspect.signature(RewardJudge.from_options).parameters[name].default


def test_reward_judge_sends_its_options(endpoint):
    options = {"base_url": endpoint.url, "model": "reward-judge-pinned", "api_key_env": "PINNED_JUDGE_KEY",
               "max_tokens": 55, "temperature": 0.42, "timeout_s": 9.0, "concurrency": 2}
    for name in ("model", "api_key_env", "max_tokens", "temperature", "timeout_s", "concurrency"):
        assert options[name] != _judge_default(name), name
    judge = RewardJudge.from_options(**options)
    try:
        scores = judge.score([(Ledger.model_validate_json(EXAMPLE_LEDGER), '{"action": "finish"}')])
    finally:
        judge.close()
    assert scores == [0.75]  # AgentReplies' judge_verdict
    (got,) = [r for r in endpoint.received() if r.method == "POST"]
    spec = judge.backend.spec
    assert (spec.model, spec.max_tokens, spec.temperature) == (options["model"], options["max_tokens"],
                                                                options["temperature"])
    _assert_request(got, spec, "reward judge", kind="openai")
    assert got.body["response_format"]["json_schema"]["name"] == "judge_verdict"
    assert "CANDIDATE DECISION" in got.body["messages"][-1]["content"]


@pytest.mark.requires("trl")
def test_grpo_judge_sends_the_recipes_judge_fields(endpoint, tmp_path):
    """GRPO's judge inside the closure reward, from the recipe's `judge_*` fields through `reward_params` and the
    reward registry, as `rl/train.py` builds it. The recipe has no judge temperature or max tokens: the request
    carries `RewardJudge.from_options`' own (read from its signature)."""
    from omnidecision.rl.config import parse_args  # imports trl, an optional dependency (requires above)

    script, _, _ = parse_args([
        "--config", str(ROOT / "configs" / "grpo" / "tiny-cpu.yaml"), "--output_dir", str(tmp_path / "out"),
        "--reward_funcs", "closure", "--reward_weights", "1.0", "--judge_weight", "1.0",
        "--judge_base_url", endpoint.url, "--judge_model", "grpo-judge-pinned", "--judge_api_key_env",
        "PINNED_JUDGE_KEY", "--judge_timeout_s", "11", "--report_to", "none"])
    defaults = {f.name: f.default for f in dataclasses.fields(script)}
    for name in ("judge_model", "judge_api_key_env", "judge_timeout_s", "judge_base_url"):
        assert getattr(script, name) != defaults[name], name
    funcs = get_reward_funcs(script.reward_funcs, **script.reward_params(output_dir=str(tmp_path / "out")))
    (judge,) = judges_of(funcs)
    try:
        scores = funcs[0](['{"action": "call", "need": 0, "tool": "audio_scouting"}'], ledger=[EXAMPLE_LEDGER])
    finally:
        judge.close()
    assert judge.timeout_s == judge.backend.spec.timeout_s == script.judge_timeout_s
    # closure 1.0 on EXAMPLE_LEDGER, the judge's 0.75 (AgentReplies) at the recipe's weight
    w = script.judge_weight
    assert scores == [pytest.approx((1.0 + w * 0.75) / (1 + w))], scores
    (got,) = [r for r in endpoint.received() if r.method == "POST"]
    spec = BackendSpec(base_url=script.judge_base_url, model=script.judge_model,
                       api_key_env=script.judge_api_key_env, max_tokens=_judge_default("max_tokens"),
                       temperature=_judge_default("temperature"), structured_output=_judge_default("structured"))
    _assert_request(got, spec, "grpo judge", kind="openai")


def test_perception_endpoint_sends_its_spec(endpoint, tmp_path):
    """A live recipe's perception endpoint (`environment.perception.<tool>`): free text, the spec's model, temperature,
    max tokens and extra_body, the key of its own variable."""
    from PIL import Image  # Pillow: only this test draws an image

    Image.new("RGB", (40, 30), (200, 30, 30)).save(tmp_path / "photo.jpg")
    spec = PerceptionSpec(base_url=endpoint.url, model="vlm-pinned", api_key_env="PINNED_CRITIC_KEY",
                          temperature=0.21, max_tokens=99, extra_body={"seed": 5, "mm_processor_kwargs": {"fps": 1}})
    for name in ("model", "api_key_env", "temperature", "max_tokens", "extra_body"):
        assert getattr(spec, name) != PerceptionSpec.model_fields[name].get_default(call_default_factory=True), name
    service = OpenAIPerception(spec, media_root=tmp_path)
    obs = asyncio.run(service.perceive("frame_confirmation", Asset(id="photo", type="image", path="photo.jpg"),
                                       "what colour is it"))
    assert obs is not None and obs.ok and obs.text == "Correct" and obs.source.asset_id == "photo"  # the reply
    (got,) = [r for r in endpoint.received() if r.method == "POST"]
    # the stub's /models says "openai": vLLM's own field (mm_processor_kwargs) is dropped, OpenAI's seed is sent
    _assert_request(got, spec.backend_spec(), "perception", kind="openai")
    assert (got.body["model"], got.body["temperature"], got.body["max_tokens"]) == (spec.model, spec.temperature,
                                                                                   spec.max_tokens)
    assert got.body["seed"] == spec.extra_body["seed"] and "mm_processor_kwargs" not in got.body
    assert got.body["messages"][1]["content"][1]["type"] == "image_url"
