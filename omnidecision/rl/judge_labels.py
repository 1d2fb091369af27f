"""The learned judge's labels of harvested RL rows: one rule, read by `judge train` (rl/judge_train.py, which pairs
them) and by its checks (rl/dryrun.py, which count them on every row before anything loads).

A decision is a positive when its step moved the ledger (`advanced`) in a run that ended judge-correct, a negative
when its step moved nothing; a decision that moved the ledger in a run that ended wrong, or a row without a valid
decision, is left out (None).

    python -c "from omnidecision.rl.judge_labels import judge_label; print(judge_label({'decision': 'x'}))"
"""

from __future__ import annotations

from typing import Any

from omnidecision.rewards.checks import Decision


def judge_label(row: dict[str, Any]) -> bool | None:
    """1/0/None for one RL row (see the module docstring); None also for rows without a valid decision.

    >>> judge_label({"decision": "not an action", "advanced": True, "correct": True}) is None
    True
    """
    decision = row.get("decision") or ""
    if not decision or row.get("advanced") is None or Decision.parse(decision).action is None:
        return None
    if not row["advanced"]:
        return False
    return True if row.get("correct") is True else None
