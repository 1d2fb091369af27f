"""Closure rewards for GRPO: pure closure checks (a registry), TRL reward functions, the weighted rubric, the judges.

    .venv/bin/pytest --doctest-modules omnidecision/rewards tests/rewards -q
"""

from omnidecision.rewards.checks import CHECKS, DEFAULT_WEIGHTS, Decision, load_ledger, register_check
from omnidecision.rewards.closure import (
    CHECK_REWARDS,
    REWARDS,
    ClosureRubric,
    closure_reward,
    finish_reward,
    format_reward,
    get_check_reward,
    get_closure_reward,
    get_judge_reward,
    get_reward_funcs,
)

__all__ = [
    "CHECKS", "CHECK_REWARDS", "DEFAULT_WEIGHTS", "REWARDS", "ClosureRubric", "Decision", "closure_reward",
    "finish_reward", "format_reward", "get_check_reward", "get_closure_reward", "get_judge_reward",
    "get_reward_funcs", "load_ledger", "register_check",
]
