"""Steering a random tiny model into a reply its JSON schema accepts, for the tests against a real vLLM server: an
OpenAI `logit_bias` that prefers tokens by their first character, so the greedy choice among what the schema allows
spells a valid reply whatever the input."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from transformers import AutoTokenizer


def format_bias(model_dir: str | Path, preferred: Mapping[str, int], end: int = 20) -> dict[str, int]:
    """logit_bias (token id -> bias): the end token `end`, and each token whose text starts with a character of
    `preferred` that character's bias (a higher one first)."""
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    first = {i: tok.convert_tokens_to_string([tok.convert_ids_to_tokens(i)])[:1] for i in range(len(tok))}
    return {str(tok.eos_token_id): end} | {str(i): preferred[c] for i, c in first.items() if c and c in preferred}
