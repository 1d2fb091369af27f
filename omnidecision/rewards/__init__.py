"""Closure rewards for GRPO: pure closure checks, TRL reward functions, the weighted rubric, the reward judge.

    .venv/bin/pytest --doctest-modules omnidecision/rewards tests/rewards -q
"""

from omnidecision.rewards.checks import CHECKS, DEFAULT_WEIGHTS, Decision, load_ledger
from omnidecision.rewards.closure import (
    REWARDS,
    ClosureRubric,
    closure_reward,
    finish_reward,
    format_reward,
    get_check_reward,
    get_closure_reward,
    get_judge_reward,
    get_reward_funcs,
    modality_reward,
    no_repeat_reward,
    query_reward,
    target_reward,
    tool_reward,
)

__all__ = [
    "CHECKS", "DEFAULT_WEIGHTS", "REWARDS", "ClosureRubric", "Decision", "closure_reward", "finish_reward",
    "format_reward", "get_check_reward", "get_closure_reward", "get_judge_reward", "get_reward_funcs", "load_ledger",
    "modality_reward", "no_repeat_reward", "query_reward", "target_reward", "tool_reward",
]
