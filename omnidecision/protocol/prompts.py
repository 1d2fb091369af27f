"""Prompt files and the ONE function that renders the planner's messages (train/serve parity).

Collection, harvest (SFT rows), GRPO prompts and evaluation all call `render_planner_messages`, so the text a
planner is trained on is the text it is served, byte for byte.

    >>> from omnidecision.ledger import Ledger
    >>> [m["role"] for m in render_planner_messages(Ledger(question="q"))]
    ['system', 'user']
    >>> [m["role"] for m in render_planner_messages(Ledger(question="q"), system_prompt=False)]
    ['user']

`system_prompt=False` (`AgentConfig.planner_system_prompt`) leaves the instructions out: a planner fine-tuned on
rows collected that way has them in its weights, and on the tiny planner they were 40% of every prompt's tokens
(docs/research/tiny-planner.md, "Learning the planner in minutes"). Harvest keeps whichever form the collection sent.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from omnidecision.ledger import DigestBudget, Ledger, render_digest
from omnidecision.ledger.schema import TOOL_NAMES
from omnidecision.protocol.actions import PRIMARY_FIELD

# What a tool's free-text `query` stands for when it is not a search query (the react prompt says so).
_QUERY_MEANS = {"url": "a URL", "code": "Python source"}


def tool_list() -> str:
    """The tools as a prompt lists them (`{tools}` in a prompt file), from the one list in `ledger.schema`.

    >>> tool_list().split(", ")[-2:]
    ['page_reader (query = a URL)', 'code_executor (query = Python source)']
    """
    parts = [f"{t} (query = {_QUERY_MEANS[PRIMARY_FIELD[t]]})" if PRIMARY_FIELD[t] in _QUERY_MEANS else t
             for t in TOOL_NAMES]
    return ", ".join(parts)


@cache
def load_prompt(name: str) -> str:
    """The text of `omnidecision/protocol/prompts/<name>.md`, without the trailing newline; `{tools}` is the tool
    list (`tool_list`)."""
    text = resources.files("omnidecision.protocol").joinpath("prompts", f"{name}.md").read_text("utf-8")
    return text.rstrip("\n").replace("{tools}", tool_list())


def render_planner_messages(ledger: Ledger, budget: DigestBudget | None = None, *,
                            system_prompt: bool = True) -> list[dict[str, str]]:
    """System prompt (unless `system_prompt=False`) + the bounded ledger digest as the user turn."""
    user = {"role": "user", "content": render_digest(ledger, budget)}
    return [{"role": "system", "content": load_prompt("planner")}, user] if system_prompt else [user]
