"""A planner completion as the rewards see it (`Decision`, parsed once with the agent's own parser), and the RL row's
`ledger` column as Ledgers: what every reward function reads.

    >>> Decision.parse([{"role": "assistant", "content": '{"action": "finish"}'}]).is_finish
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from omnidecision.ledger import Ledger
from omnidecision.protocol.actions import CallAction, FinishAction, parse_planner_output


@dataclass(frozen=True)
class Decision:
    """One planner completion: the raw text, the parsed action (or None) and the parse error (or None)."""

    text: str
    action: CallAction | FinishAction | None
    error: str | None

    @classmethod
    def parse(cls, text: object) -> Decision:
        """Parse a completion: a string, or TRL's conversational `[{"role": "assistant", "content": ...}]`."""
        text = completion_text(text)
        action, error = parse_planner_output(text)
        return cls(text=text, action=action, error=error)

    @property
    def is_call(self) -> bool:
        return isinstance(self.action, CallAction)

    @property
    def is_finish(self) -> bool:
        return isinstance(self.action, FinishAction)


def completion_text(completion: object) -> str:
    """The assistant text of a TRL completion (plain string or a list of chat messages).

    >>> completion_text([{"role": "assistant", "content": "hi"}])
    'hi'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict)
                       and m.get("role", "assistant") == "assistant")
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    return ""


def load_ledger(value: object) -> Ledger:
    """A Ledger from the RL row's `ledger` column (a JSON string, a dict, or a Ledger)."""
    if isinstance(value, Ledger):
        return value
    if isinstance(value, str):
        return Ledger.model_validate_json(value)
    if isinstance(value, dict):
        return Ledger.model_validate(value)
    raise TypeError(f"column `ledger`: expected a Ledger JSON string or dict, got {type(value).__name__}")


@lru_cache(maxsize=4096)
def _ledger_from_json(text: str) -> Ledger:
    return Ledger.model_validate_json(text)


def clear_ledger_cache() -> None:
    """Forget every ledger `ledgers_column` has parsed (the K candidates of one state share one parse; a benchmark
    measures from a cold cache: bench/bench_rewards.py)."""
    _ledger_from_json.cache_clear()


def ledgers_column(kwargs: dict[str, Any], n: int) -> list[Ledger]:
    """The `ledger` column TRL passes a reward function (one Ledger JSON string per completion), parsed."""
    column = kwargs.get("ledger")
    if column is None:
        raise KeyError("closure rewards need the `ledger` column (a Ledger JSON string per row) in the RL dataset")
    if len(column) != n:
        raise ValueError(f"column `ledger` has {len(column)} rows for {n} completions")
    return [_ledger_from_json(v) if isinstance(v, str) else load_ledger(v) for v in column]
