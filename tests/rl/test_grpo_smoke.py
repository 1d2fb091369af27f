"""GRPO smoke tests on a from-scratch tiny planner: a few steps run, every reward component is logged, the
held-out closure reward of the start and the trained planner lands in closure_eval.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("trl")  # skips without it; fails under CI=true (tests/conftest.py)


# omnidecision.rl.config and .train import trl: imported when a test runs (after the requires check), so a machine
# without trl skips these tests (fails them in CI) instead of failing their collection
def parse_args(argv: list[str]):
    from omnidecision.rl.config import parse_args as parse

    return parse(argv)


def main(*args, **kwargs):
    from omnidecision.rl.train import main as train_main

    return train_main(*args, **kwargs)

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "grpo" / "tiny-cpu.yaml"


def _args(model: Path, data: Path, out: Path, *extra: str):
    return parse_args([
        "--config", str(RECIPE), "--model_name_or_path", str(model), "--dataset_name", str(data),
        "--output_dir", str(out), "--max_steps", "2", "--num_generations", "4", "--per_device_train_batch_size", "4",
        "--generation_batch_size", "8", "--max_completion_length", "16", "--eval_closure_n", "4",
        "--logging_steps", "1", "--save_strategy", "no", *extra,
    ])


def test_grpo_runs_and_logs_every_component(tiny_planner, rl_dir, tmp_path):
    out = tmp_path / "grpo"
    report = main(*_args(tiny_planner, rl_dir, out, "--reward_funcs", "closure", "format", "finish",
                         "--reward_weights", "1.0", "0.25", "0.25"))
    assert report["steps"] == 2
    saved = json.loads((out / "closure_eval.json").read_text())
    for key in ("start", "trained"):
        closure = saved[key]["closure"]
        assert closure["n"] == 4 and 0.0 <= closure["mean"] <= 1.0
        assert closure["ci95_low"] <= closure["mean"] <= closure["ci95_high"]
        assert set(saved[key]["components"]) == {"format", "finish", "target", "tool", "query", "no_repeat",
                                                 "modality", "budget", "conflict"}
    # the paired comparison is over the same states: its mean difference is the difference of the means
    paired = saved["paired"]
    assert paired["n"] == 4 and paired["wins"] + paired["losses"] + paired["ties"] == 4
    start, trained = saved["start"]["per_state"], saved["trained"]["per_state"]
    assert paired["delta_mean"] == pytest.approx(sum(trained) / 4 - sum(start) / 4, abs=1e-3)
    assert paired["ci95_low"] <= paired["delta_mean"] <= paired["ci95_high"]
    logged = {k for row in json.loads((out / "log_history.json").read_text()) for k in row}
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2  # what HF tools read
    assert "train_runtime" in json.loads((out / "train_results.json").read_text()) and (out / "README.md").exists()
    for name in ("format", "finish", "target", "tool", "query", "no_repeat", "modality", "budget", "conflict"):
        assert f"closure/{name}" in logged, sorted(logged)
    for func in ("closure_reward", "format_reward", "finish_reward"):
        assert f"rewards/{func}/mean" in logged, sorted(logged)
    import pandas as pd

    tables = sorted((out / "completions").glob("*.parquet"))
    assert tables, "log_completions wrote no table"
    frame = pd.read_parquet(tables[-1])
    assert {"closure_reward", "format_reward", "finish_reward", "advantage"} <= set(frame.columns)
    assert (out / "model.safetensors").exists()


def test_grpo_continues_an_sft_adapter(tiny_planner, rl_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter = tmp_path / "sft-adapter"
    base = AutoModelForCausalLM.from_pretrained(str(tiny_planner))
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    lora.save_pretrained(adapter)
    AutoTokenizer.from_pretrained(str(tiny_planner)).save_pretrained(adapter)
    out = tmp_path / "grpo-lora"
    report = main(*_args(adapter, rl_dir, out, "--max_steps", "1", "--reward_funcs", "closure",
                         "--reward_weights", "1.0"))
    assert report["steps"] == 1
    assert (out / "adapter_config.json").exists()  # still an adapter, not a merged model
    assert report["trained"]["n_states"] == 4


def test_recipe_checks():
    with pytest.raises(ValueError, match="multiple of num_generations"):
        parse_args(["--config", str(RECIPE), "--generation_batch_size", "12", "--num_generations", "8"])
    with pytest.raises(ValueError, match="num_generations must be >= 2"):
        parse_args(["--config", str(RECIPE), "--num_generations", "1", "--generation_batch_size", "4"])
    with pytest.raises(ValueError, match="judge_base_url"):
        parse_args(["--config", str(RECIPE), "--reward_funcs", "judge", "--reward_weights", "1"])
    with pytest.raises(ValueError, match="nansum"):  # a separate judge next to other rewards: failures would be 0
        parse_args(["--config", str(RECIPE), "--reward_funcs", "closure", "judge"])
    script, _, _ = parse_args(["--config", str(RECIPE), "--closure_weights", '{"format": 2}'])
    assert script.reward_params() == {"closure": {"weights": {"format": 2}, "gate_on_tool": True}}
    script, _, _ = parse_args(["--config", str(RECIPE), "--closure_gate_on_tool", "false"])
    assert script.reward_params() == {"closure": {"weights": None, "gate_on_tool": False}}
    with pytest.raises(ValueError, match="eval_closure_n >= -1"):
        parse_args(["--config", str(RECIPE), "--eval_closure_n", "-2"])


@pytest.mark.parametrize("name", ["qwen3-8b-lora-vllm-server", "qwen3-8b-vllm-colocate"])
def test_gpu_recipes_parse(name):
    script, train, model = parse_args(["--config", str(RECIPE.parent / f"{name}.yaml"), "--bf16", "false",
                                       "--use_cpu", "true"])
    assert train.use_vllm and train.generation_batch_size % train.num_generations == 0
    assert script.reward_funcs[0] == "closure"


@pytest.mark.gpu  # the CPU path: a GPU machine skips it
def test_use_vllm_on_cpu_is_a_clear_error(tiny_planner, rl_dir, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU machine can use vLLM")
    with pytest.raises(RuntimeError, match="needs CUDA"):
        main(*_args(tiny_planner, rl_dir, tmp_path / "x", "--use_vllm", "true"))


def test_balanced_state_selection_keeps_the_wrong_states(tiny_planner, rl_dir, tmp_path):
    """The untrained tiny planner gets (nearly) every state wrong: all of those are kept, with as many right ones
    as it has up to the ratio; the stats and the trained step count land in closure_eval.json."""
    out = tmp_path / "grpo-balanced"
    report = main(*_args(tiny_planner, rl_dir, out, "--max_steps", "1", "--reward_funcs", "closure",
                         "--reward_weights", "1.0", "--select_states", "balanced", "--select_right_ratio", "0.5"))
    sel = report["selection"]
    assert sel["mode"] == "balanced" and sel["wrong"] + sel["right"] == sel["decoded"] > 0
    assert sel["kept_right"] == min(sel["right"], round(0.5 * sel["wrong"]))
    assert sel["kept"] == sel["wrong"] + sel["kept_right"]
    assert json.loads((out / "closure_eval.json").read_text())["selection"] == sel
    with pytest.raises(ValueError, match="select_right_ratio"):
        parse_args(["--config", str(RECIPE), "--select_states", "balanced", "--select_right_ratio", "-1"])


def test_grpo_saves_the_mean_of_its_checkpointed_weights(tiny_planner, rl_dir, tmp_path):
    import torch
    from safetensors.torch import load_file

    from omnidecision.rl.averaging import STATE_FILE

    out = tmp_path / "grpo-avg"
    report = main(*_args(tiny_planner, rl_dir, out, "--max_steps", "2", "--reward_funcs", "closure",
                         "--reward_weights", "1.0", "--weight_average", "true", "--weight_average_start", "0.0",
                         "--save_strategy", "steps", "--save_steps", "1", "--save_total_limit", "2",
                         # weight decay moves every weight each step even where the untrained planner earns no
                         # advantage, so the two checkpoints differ
                         "--learning_rate", "1e-2", "--weight_decay", "0.5",
                         # the averaging itself: saved as the final weights (dev_closure could pick the start)
                         "--checkpoint_policy", "final"))
    wa = report["weight_average"]
    assert wa["snapshots"] == 2 and wa["start_step"] == 1
    assert wa["last"]["n_states"] == report["trained"]["n_states"] == 4
    one, two = (load_file(out / f"checkpoint-{s}" / "model.safetensors") for s in (1, 2))
    final = load_file(out / "model.safetensors")
    moved = [k for k in final if not torch.equal(one[k], two[k])]
    assert moved, "the two steps changed no weight: nothing to average"
    for k in moved:
        assert torch.allclose(final[k], (one[k] + two[k]) / 2, atol=1e-6), k
    assert json.loads((out / "closure_eval.json").read_text())["weight_average"]["snapshots"] == 2
    # the running mean travels with each checkpoint, for a resume
    saved = torch.load(out / "checkpoint-2" / STATE_FILE, weights_only=True)
    assert saved["count"] == 2 and set(saved["mean"]) <= set(dict(final))
