"""What a cluster SFT run relies on, pinned by its effect on the trainer TRL builds (not by the config's spelling):

- the loss mask default: a recipe that leaves `assistant_only_loss` out still puts loss on the assistant action and
  its end-of-turn token only, checked on real rows tokenized by TRL's own data path (`SFTTrainer`'s preparation,
  through `build_trainer`);
- the cluster recipe's weight dtype (`dtype: bfloat16`): the weights the trainer holds are bfloat16, though the
  checkpoint on disk is float32;
- its LoRA targets (`all-linear`): every linear projection of every decoder layer carries an adapter; nothing else
  is trainable.

    pytest -q tests/sft/test_pinned_defaults.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
IM_END = "<|im_end|>"
LINEAR = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def _recipe_without(tmp_path: Path, recipe: str, *keys: str) -> Path:
    """A copy of `configs/sft/<recipe>` with `keys` left out (what a user's own recipe may do)."""
    data = yaml.safe_load((ROOT / "configs" / "sft" / recipe).read_text("utf-8"))
    for key in keys:
        assert key in data, f"{recipe} no longer sets {key}: this test leaves it out to read the default"
        del data[key]
    out = tmp_path / f"no-{'-'.join(keys)}.yaml"
    out.write_text(yaml.safe_dump(data), "utf-8")
    return out


def _build(recipe: Path, model: Path, data: Path, out: Path, *extra: str):
    from omnidecision.sft.config import parse_args
    from omnidecision.sft.train import build_trainer

    args = parse_args(["--config", str(recipe), "--model_name_or_path", str(model), "--dataset_name", str(data),
                       "--output_dir", str(out), "--max_steps", "1", "--eval_strategy", "no", "--save_strategy", "no",
                       "--load_best_model_at_end", "false", "--early_stopping_patience", "0", "--report_to", "none",
                       *extra])
    trainer, _, _ = build_trainer(*args)
    return trainer


def test_loss_mask_default_is_the_assistant_action_and_its_end(tiny_model, sft_data, tmp_path):
    from transformers import AutoTokenizer

    recipe = _recipe_without(tmp_path, "tiny-cpu.yaml", "assistant_only_loss")
    trainer = _build(recipe, tiny_model, sft_data, tmp_path / "out", "--max_train_samples", "8")
    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    actions = {r["messages"][-1]["content"] for r in _rows(sft_data)}
    assert len(trainer.train_dataset) == 8
    for row in trainer.train_dataset:
        ids = row["input_ids"]
        # TRL's collator builds the labels from the row's assistant mask: ask it, as training does
        batch = trainer.data_collator([row])
        labels = batch["labels"][0].tolist()
        on = [i for i, label in enumerate(labels) if label != -100]
        assert on == list(range(on[0], on[-1] + 1)), "one contiguous span carries loss"
        supervised = tok.decode([ids[i] for i in on])
        assert supervised.endswith(IM_END) and supervised[:-len(IM_END)] in actions, supervised
        assert ids[on[-1]] == tok.convert_tokens_to_ids(IM_END)
        # nothing of the prompt: everything before the span is the system + user turns and the assistant header
        assert tok.decode(ids[:on[0]]).endswith("<|im_start|>assistant\n")
        assert tok.decode(ids[on[-1] + 1:]) in ("", "\n")
        assert len(on) < len(ids) / 2  # the digest is most of a row: a mask that covers it fails here too


def _rows(folder: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in (folder / "train.jsonl").read_text("utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def qwen3_shaped(tmp_path_factory) -> Path:
    """A tiny float32 Qwen3 with every projection Qwen3-8B has (q/k/v/o, gate/up/down), saved in float32."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    tiny = build_tiny_planner(tmp_path_factory.mktemp("tok") / "t", texts=list(default_corpus(n=30)), hidden=32,
                              layers=1, heads=2, vocab_size=512)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny))
    folder = tmp_path_factory.mktemp("qwen3") / "m"
    config = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, tie_word_embeddings=True,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    Qwen3ForCausalLM(config).to(torch.float32).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_cluster_lora_recipe_trains_bf16_weights_with_an_adapter_on_every_linear(qwen3_shaped, sft_data, tmp_path):
    import torch

    recipe = ROOT / "configs" / "sft" / "qwen3-8b-lora.yaml"
    # CPU stand-ins for the GPU-only settings; dtype and the LoRA fields stay the recipe's
    trainer = _build(recipe, qwen3_shaped, sft_data, tmp_path / "out", "--bf16", "false", "--use_cpu", "true",
                     "--gradient_checkpointing", "false", "--max_train_samples", "4")
    model = trainer.model
    base = {name: p for name, p in model.named_parameters() if "lora_" not in name}
    dtypes = {p.dtype for p in base.values()}
    assert base and dtypes == {torch.bfloat16}, f"dtype: bfloat16 should reach the weights, they are {dtypes}"
    assert not any(p.requires_grad for p in base.values()), "LoRA: the base stays frozen"
    adapted = {name.split(".lora_")[0] for name, p in model.named_parameters() if "lora_A" in name}
    layers = model.get_base_model().config.num_hidden_layers
    for layer in range(layers):
        here = {n.rsplit(".", 1)[-1] for n in adapted if f".layers.{layer}." in n}
        assert here == LINEAR, f"layer {layer}: adapters on {sorted(here)}, want every linear {sorted(LINEAR)}"
    assert not any("lm_head" in n or "embed" in n for n in adapted)
    assert all(p.requires_grad for name, p in model.named_parameters() if "lora_" in name)
