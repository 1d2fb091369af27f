"""Prompt files and the ONE function that renders the planner's messages (train/serve parity).

Collection, harvest (SFT rows), GRPO prompts and evaluation all call `render_planner_messages`, so the text a
planner is trained on is the text it is served, byte for byte.

    >>> from omnidecision.ledger import Ledger
    >>> [m["role"] for m in render_planner_messages(Ledger(question="q"))]
    ['system', 'user']
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from omnidecision.ledger import DigestBudget, Ledger, render_digest


@cache
def load_prompt(name: str) -> str:
    """The text of `omnidecision/protocol/prompts/<name>.md`, without the trailing newline."""
    return resources.files("omnidecision.protocol").joinpath("prompts", f"{name}.md").read_text("utf-8").rstrip("\n")


def render_planner_messages(ledger: Ledger, budget: DigestBudget | None = None) -> list[dict[str, str]]:
    """System prompt + the bounded ledger digest as the user turn."""
    return [
        {"role": "system", "content": load_prompt("planner")},
        {"role": "user", "content": render_digest(ledger, budget)},
    ]
