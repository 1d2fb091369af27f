"""Closure rewards for GRPO: pure closure checks, TRL reward functions, the weighted rubric, the judges, all in one
registry by name (`rewards/registry.py`).

    .venv/bin/pytest --doctest-modules omnidecision/rewards tests/rewards -q
"""

from omnidecision.rewards.checks import Decision, get_check_reward, load_ledger, register_check, unregister_check
from omnidecision.rewards.closure import (
    ClosureRubric,
    closure_reward,
    finish_reward,
    format_reward,
    get_closure_reward,
    get_judge_reward,
)
from omnidecision.rewards.registry import (
    CHECKS,
    DEFAULT_WEIGHTS,
    REWARDS,
    get_reward,
    get_reward_funcs,
    is_known,
    register_reward,
    unregister_reward,
)

__all__ = [
    "CHECKS", "DEFAULT_WEIGHTS", "REWARDS", "ClosureRubric", "Decision", "closure_reward", "finish_reward",
    "format_reward", "get_check_reward", "get_closure_reward", "get_judge_reward", "get_reward", "get_reward_funcs",
    "is_known", "load_ledger", "register_check", "register_reward", "unregister_check", "unregister_reward",
]
