"""What a cluster GRPO run relies on in its recipe (configs/grpo/qwen3-8b-lora-vllm-server.yaml), pinned by effect:

- `dtype: bfloat16`: the policy GRPO trains is loaded in bfloat16 (the checkpoint on disk is float32);
- its LoRA targets: the adapter GRPO puts on a merged start covers every linear projection of every layer;
- `judge_weight: 0.5`: a decision's reward is (closure + 0.5 * judge) / 1.5, computed from the recipe's own reward
  functions against the closure checks alone and the judge's own scores.

    pytest -q tests/rl/test_pinned_recipes.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("trl", "peft")

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "grpo" / "qwen3-8b-lora-vllm-server.yaml"
LINEAR = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
CPU = ["--bf16", "false", "--use_cpu", "true", "--use_vllm", "false", "--report_to", "none"]


@pytest.fixture(scope="module")
def qwen3_shaped(tmp_path_factory, tiny_planner) -> Path:
    """A tiny float32 Qwen3 with every projection Qwen3-8B has, saved in float32 with the tiny planner's tokenizer."""
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    tok = AutoTokenizer.from_pretrained(str(tiny_planner))
    folder = tmp_path_factory.mktemp("qwen3") / "m"
    config = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, tie_word_embeddings=True,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    Qwen3ForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _parse(*extra: str):
    from omnidecision.rl.config import parse_args

    return parse_args(["--config", str(RECIPE), *CPU, *extra])


def test_cluster_grpo_policy_is_bf16_with_an_adapter_on_every_linear(qwen3_shaped, rl_dir, tmp_path):
    import torch
    from peft import get_peft_model

    from omnidecision.rl.train import load_policy

    _, _, model_args = _parse("--model_name_or_path", str(qwen3_shaped), "--dataset_name", str(rl_dir),
                              "--output_dir", str(tmp_path / "out"))
    model, _, peft_config = load_policy(model_args)
    dtypes = {p.dtype for p in model.parameters()}
    assert dtypes == {torch.bfloat16}, f"dtype: bfloat16 should reach the policy's weights, they are {dtypes}"
    assert peft_config is not None, "a merged start gets a new adapter (use_peft)"
    wrapped = get_peft_model(model, peft_config)  # what GRPOTrainer does with `peft_config`
    adapted = {n.split(".lora_")[0] for n, _ in wrapped.named_parameters() if "lora_A" in n}
    for layer in range(model.config.num_hidden_layers):
        here = {n.rsplit(".", 1)[-1] for n in adapted if f".layers.{layer}." in n}
        assert here == LINEAR, f"layer {layer}: adapters on {sorted(here)}, want every linear {sorted(LINEAR)}"


@pytest.fixture(scope="module")
def learned_judge(tmp_path_factory, tiny_planner) -> Path:
    """A reward-model folder (one-output head over the tiny planner; untrained: its scores are what they are)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("judge") / "j"
    tok = AutoTokenizer.from_pretrained(str(tiny_planner))
    rm = AutoModelForSequenceClassification.from_pretrained(str(tiny_planner), num_labels=1)
    rm.config.pad_token_id = tok.pad_token_id
    rm.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_cluster_judge_weight_is_half_of_the_closure_checks(rl_dir, learned_judge, tmp_path):
    import yaml

    from omnidecision.rewards import get_reward_funcs
    from omnidecision.rewards.learned_judge import LearnedJudge
    from omnidecision.rl.config import parse_args
    from omnidecision.rl.data import load_rl_splits

    # the recipe's judge behind an endpoint, stood in for by a local learned judge (judge_path instead of the URL);
    # judge_weight and the closure settings stay the recipe's
    recipe = yaml.safe_load(RECIPE.read_text("utf-8"))
    assert recipe.pop("judge_base_url") and recipe.pop("judge_model")
    local = tmp_path / "recipe.yaml"
    local.write_text(yaml.safe_dump(recipe), "utf-8")
    script, _, _ = parse_args(["--config", str(local), *CPU, "--dataset_name", str(rl_dir), "--judge_path",
                               str(learned_judge), "--output_dir", str(tmp_path / "out")])
    rows = [dict(r) for r in load_rl_splits(rl_dir)["train"]][:6]
    completions = []
    for r in rows:  # a call on the first need, and a finish, per state
        need = json.loads(r["ledger"])["needs"][0]["index"] if isinstance(r["ledger"], str) else 0
        completions += [json.dumps({"action": "call", "need": need}), json.dumps({"action": "finish"})]
    columns = {k: [r[k] for r in rows for _ in range(2)] for k in rows[0] if k not in ("prompt", "completion")}
    columns["prompts"] = [r["prompt"] for r in rows for _ in range(2)]

    params = script.reward_params(output_dir=str(tmp_path / "out"))
    (with_judge,) = get_reward_funcs(script.reward_funcs, **params)
    alone_params = {k: {kk: vv for kk, vv in v.items() if kk not in ("judge", "judge_share")}
                    for k, v in params.items()}
    (closure,) = get_reward_funcs(script.reward_funcs, **alone_params)
    judge = LearnedJudge(str(learned_judge)).score(columns["prompts"], completions)

    got = with_judge(completions, **columns)
    base = closure(completions, **columns)
    assert all(s is not None for s in judge)
    # the judge's scores vary and differ from the checks', so the mix below tells one weight from another
    assert len({round(s, 4) for s in judge}) > 1
    assert any(round(b, 4) != round(s, 4) for b, s in zip(base, judge, strict=True))
    for g, c, s in zip(got, base, judge, strict=True):
        assert g == pytest.approx((c + 0.5 * s) / 1.5, abs=1e-5), (g, c, s)
