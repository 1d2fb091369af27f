"""Train/serve parity helpers (docs/architecture.md, data contracts), shared by harvest, SFT, GRPO and eval.

- `planner_prompt_ids(tokenizer, messages, enable_thinking=False)`: the token ids the planner is served for a
  prompt (system + user; any trailing assistant turn is dropped), with the generation prompt, through the
  tokenizer's OWN chat template. SFT, GRPO and eval call this one function.
- `check_row_parity(row_messages, recorded, tokenizer=None)`: a harvested SFT row against the planner messages
  the agent recorded at that step: same system and user text, and (with a tokenizer) the same prompt ids, and
  the prompt ids are a prefix of the training ids of the whole row (so what is trained is what is served).

- `system_prompt_mismatch(model_dir, planner_system_prompt)`: a served planner trained on rows with (without) the
  planner's system turn, run by an agent that leaves it out (sends it): the reason, from the checkpoint's
  `provenance.json` (eval logs it as a warning), else None.

    python -c "from omnidecision.rollout.parity import planner_prompt_ids; help(planner_prompt_ids)"
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def _ids(out: Any) -> list[int]:
    """`apply_chat_template(tokenize=True)` returns a list or (transformers >= 5) a BatchEncoding."""
    if isinstance(out, Mapping) or hasattr(out, "keys"):
        out = out["input_ids"]
    if out and isinstance(out[0], list):  # a batch of one
        out = out[0]
    return [int(i) for i in out]


def prompt_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The prompt part of a conversation: everything before a trailing assistant turn, as plain role/content."""
    msgs = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    while msgs and msgs[-1]["role"] == "assistant":
        msgs.pop()
    return msgs


def planner_prompt_ids(tokenizer: Any, messages: Sequence[Mapping[str, Any]], enable_thinking: bool = False
                       ) -> list[int]:
    """Token ids of the planner prompt as served: chat template + generation prompt, `enable_thinking` passed
    through (Qwen3 templates add or omit a think block by it; it must match between training and serving)."""
    out = tokenizer.apply_chat_template(prompt_messages(messages), tokenize=True, add_generation_prompt=True,
                                        enable_thinking=enable_thinking)
    return _ids(out)


def conversation_ids(tokenizer: Any, messages: Sequence[Mapping[str, Any]], enable_thinking: bool = False
                     ) -> list[int]:
    """Token ids of a whole conversation (prompt + assistant action) as the SFT trainer tokenises it."""
    msgs = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    out = tokenizer.apply_chat_template(msgs, tokenize=True, enable_thinking=enable_thinking)
    return _ids(out)


def check_row_parity(row_messages: Sequence[Mapping[str, Any]], recorded: Sequence[Mapping[str, Any]],
                     tokenizer: Any = None, enable_thinking: bool = False) -> list[str]:
    """Problems (empty list = parity holds) between an SFT row's messages and the recorded planner messages."""
    problems: list[str] = []
    row_prompt, rec_prompt = prompt_messages(row_messages), prompt_messages(recorded)
    if [m["role"] for m in row_prompt] != [m["role"] for m in rec_prompt]:
        problems.append(f"roles differ: {[m['role'] for m in row_prompt]} vs {[m['role'] for m in rec_prompt]}")
        return problems
    for k, (a, b) in enumerate(zip(row_prompt, rec_prompt, strict=True)):
        if a["content"] != b["content"]:
            i = next((j for j, (x, y) in enumerate(zip(a["content"], b["content"], strict=False)) if x != y),
                     min(len(a["content"]), len(b["content"])))
            problems.append(f"message {k} ({a['role']}) differs at char {i}")
    if tokenizer is None or problems:
        return problems
    row_ids = planner_prompt_ids(tokenizer, row_prompt, enable_thinking)
    rec_ids = planner_prompt_ids(tokenizer, rec_prompt, enable_thinking)
    if row_ids != rec_ids:
        problems.append("prompt token ids differ")
    if len(row_messages) > len(row_prompt):
        full = conversation_ids(tokenizer, row_messages, enable_thinking)
        if full[:len(rec_ids)] != rec_ids:
            problems.append("the served prompt ids are not a prefix of the training ids (chat template mismatch: "
                            "generation prompt vs assistant turn)")
    return problems


def system_prompt_mismatch(model_dir: str | Path, planner_system_prompt: bool) -> str | None:
    """Why serving `model_dir` with `AgentConfig.planner_system_prompt` breaks train/serve parity, or None (parity
    holds, or the checkpoint has no provenance with the data stats to tell)."""
    path = Path(model_dir) / "provenance.json"
    try:
        train = json.loads(path.read_text("utf-8"))["data"]["train"]
        rows, system = int(train["rows"]), int(train["system_prompt_rows"])
    except (OSError, KeyError, TypeError, ValueError):
        return None
    if planner_system_prompt and rows and system == 0:
        return (f"{path}: the planner was trained on {rows} rows without a system turn, and the agent sends one "
                "(set agent.planner_system_prompt: false)")
    if not planner_system_prompt and system == rows and rows:
        return (f"{path}: the planner was trained on {rows} rows with the system turn, and the agent leaves it out "
                "(set agent.planner_system_prompt: true)")
    return None
