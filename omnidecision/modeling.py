"""The ONE planner loader and the ONE decision generator (SFT held-out scoring, RL evaluation and state selection,
GRPO's policy, on-policy rounds, export all use them).

Chat-template options are passed one way: `chat_template_kwargs` (default `CHAT_TEMPLATE_KWARGS`, i.e.
`enable_thinking=False`, the setting collection and serving use: train/serve parity, docs/architecture.md).

    python -c "from omnidecision.modeling import load_planner; print(load_planner('runs/demo/models/sft')[0])"
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# The chat-template options of every planner prompt: the same at collection, SFT, GRPO, evaluation and serving.
CHAT_TEMPLATE_KWARGS: dict[str, Any] = {"enable_thinking": False}


def is_adapter(path: str | Path) -> bool:
    return (Path(path) / "adapter_config.json").exists()


def adapter_base(path: str | Path) -> str:
    """The base model an adapter folder was trained on (its `base_model_name_or_path`)."""
    from peft import PeftConfig

    base = PeftConfig.from_pretrained(str(path)).base_model_name_or_path
    if not base:
        raise ValueError(f"{Path(path) / 'adapter_config.json'}: no base_model_name_or_path")
    return base


def load_planner(path: str | Path, *, trainable: bool = False, merge: bool = False, tokenizer_path: str | None = None,
                 base_model: str | None = None, device: str | None = None, **model_kwargs: Any) -> tuple[Any, Any]:
    """(model, tokenizer) of a planner folder or hub id: a full checkpoint, or a LoRA adapter on its base
    (continued trainable with `trainable`, merged into the base with `merge`; `base_model` overrides the
    adapter's recorded base). `device` ("cuda", "cuda:1", "cpu") loads the weights there (`device_map`; an
    adapter follows its base); None: transformers' default, the CPU. `model_kwargs` go to
    `from_pretrained` (dtype, attn_implementation, revision, device_map). The tokenizer comes from
    `tokenizer_path`, else the folder when it holds one, else the adapter's base; a missing pad token is the EOS."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = str(path)
    kwargs = {k: v for k, v in model_kwargs.items() if v is not None}
    if device is not None:
        kwargs.setdefault("device_map", device)
    if is_adapter(path):
        from peft import PeftModel

        base_dir = base_model or adapter_base(path)
        base = AutoModelForCausalLM.from_pretrained(base_dir, **kwargs)
        model = PeftModel.from_pretrained(base, path, is_trainable=trainable)
        if merge:
            model = model.merge_and_unload()
        tok_dir = tokenizer_path or (path if (Path(path) / "tokenizer_config.json").exists() else base_dir)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
        tok_dir = tokenizer_path or path
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not trainable:
        model.eval()
    return model, tokenizer


def render_prompts(tokenizer: Any, prompts: Sequence[list[dict[str, str]]],
                   chat_template_kwargs: dict[str, Any] | None = None) -> list[str]:
    """The planner prompts as text, with the generation prompt, the way they are served."""
    kwargs = CHAT_TEMPLATE_KWARGS if chat_template_kwargs is None else chat_template_kwargs
    return [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True, **kwargs) for p in prompts]


def generate_decisions(model: Any, tokenizer: Any, prompts: Sequence[list[dict[str, str]]], *, do_sample: bool = False,
                       num_return_sequences: int = 1, temperature: float = 1.0, max_new_tokens: int = 64,
                       batch_size: int = 16, chat_template_kwargs: dict[str, Any] | None = None,
                       top_p: float = 1.0, top_k: int = 0) -> list[list[str]]:
    """`num_return_sequences` decoded completions per chat prompt (left-padded batched `generate`; greedy unless
    `do_sample`, then at `temperature`, `top_p`, `top_k`). The model's train/eval mode and the tokenizer's padding side
    are restored afterwards."""
    import torch

    was_training = model.training
    model.eval()
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out: list[list[str]] = []
    try:
        for start in range(0, len(prompts), batch_size):
            chunk = prompts[start:start + batch_size]
            texts = render_prompts(tokenizer, chunk, chat_template_kwargs)
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": pad_id,
                                      "eos_token_id": tokenizer.eos_token_id,
                                      "num_return_sequences": num_return_sequences, "do_sample": do_sample}
            if do_sample:
                kwargs.update(temperature=temperature, top_p=top_p, top_k=top_k or 0)
            with torch.no_grad():
                ids = model.generate(**enc, **kwargs)
            decoded = tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            for i in range(len(chunk)):
                out.append(decoded[i * num_return_sequences:(i + 1) * num_return_sequences])
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return out


# ---- the LM head on the supervised positions only (CPU training) ------------------------------------------------
# TRL 1.16's fused LM head (`trl.trainer.utils.add_fused_lm_head`) projects only the positions with a label on
# Triton devices and every position elsewhere (to keep tile shapes fixed on compiled backends such as Neuron). With
# the assistant-only loss of a planner row (≈ 13 supervised tokens of ≈ 450), scoring every position on the CPU
# spends most of the head's time on logits that are thrown away. `compact_lm_head()` makes the CPU take the compact
# path: loss, gradients and the logged metrics are the same (tests/sft/test_compact_head.py), a step 2.5× faster
# (bench/results/sft_head.json). It switches a private TRL name, so it checks that the name is there and says so
# when it is not. SFT calls it (unless `compact_lm_head: false`), and GRPO for the policy's log-probs.
_MARK = "_omnidecision_compact_cpu"


def compact_lm_head(on: bool = True) -> bool:
    """Route CPU tensors through TRL's compact (supervised-positions-only) head path (`on=False`: TRL's own
    choice again). Idempotent; False (with a warning) when this TRL has no such switch, and training goes on
    with TRL's own path."""
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover - TRL is a hard dependency of the SFT stage
        return False
    current: Any = getattr(trl_utils, "_use_triton", None)
    if current is None or not callable(current):
        logger.warning("trl.trainer.utils._use_triton is gone (TRL %s): the fused LM head scores every position "
                       "on the CPU", getattr(__import__("trl"), "__version__", "?"))
        return False
    original = getattr(current, _MARK, None)
    if not on:
        if original is not None:
            trl_utils._use_triton = original
        return True
    if original is not None:
        return True

    def use_compact(device: Any) -> bool:
        return getattr(device, "type", None) == "cpu" or current(device)

    setattr(use_compact, _MARK, current)
    trl_utils._use_triton = use_compact
    return True
