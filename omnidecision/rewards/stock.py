"""Reward functions for TRL's own scripts: plain module-level functions that `trl grpo --reward_funcs` loads by
dotted path (its CLI imports the module and takes the attribute, with no way to pass parameters).

    trl grpo --model_name_or_path runs/sft --dataset_name data/harvest/rl \
        --reward_funcs omnidecision.rewards.stock.closure_reward
    OMNIDECISION_JUDGE_PATH=runs/judge trl grpo ... --reward_funcs omnidecision.rewards.stock.closure_judge_reward

Each follows TRL's contract `reward(completions, **columns) -> list[float | None]` and reads the `ledger` column
of the harvest's RL rows (docs/guide/trl.md):

- `closure_reward`: the closure rubric, every registered check at its default weight (the `closure` reward);
- `closure_judge_reward`: the same with the reward judge inside it, configured by environment variables, since a
  dotted path carries no parameters: `OMNIDECISION_JUDGE_PATH` (a learned judge from `omnidecision judge train`)
  or `OMNIDECISION_JUDGE_URL` and `OMNIDECISION_JUDGE_MODEL` (an LLM judge behind an OpenAI-compatible endpoint;
  the key in the variable `OMNIDECISION_JUDGE_API_KEY_ENV` names, default OPENAI_API_KEY), and
  `OMNIDECISION_JUDGE_WEIGHT` (the judge's share against the checks' 1, default 0.5);
- `format_reward`, `finish_reward`, ...: one closure check alone (`<check>_reward` for every registered check).

    >>> from omnidecision.rewards.closure import EXAMPLE_LEDGER
    >>> closure_reward(['{"action": "call", "need": 0}', '{"action": "finish"}'], ledger=[EXAMPLE_LEDGER] * 2)
    [1.0, 0.1]
    >>> from omnidecision.rewards.stock import format_reward  # made on first use, for every registered check
    >>> format_reward(['{"action": "finish"}', 'oops'], ledger=[EXAMPLE_LEDGER] * 2)
    [1.0, 0.0]
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

from omnidecision.rewards.registry import CHECKS, get_check_reward, get_reward

# The registry imports every module of this package to find the names registered in it, closure.py among them, and
# closure.py looks names up while it loads: this module reaches closure.py through the registry (by name), never by
# an import, so that discovery never meets a half-built module.
RewardFunc = Callable[..., list[float | None]]


@functools.cache
def _closure() -> RewardFunc:
    return get_reward("closure")


def closure_reward(completions: Sequence[object], **kwargs: Any) -> list[float | None]:
    """The closure rubric: the weighted mean of every registered closure check at its default weight, in [0, 1],
    scored against the `ledger` column without executing the decision."""
    return _closure()(completions, **kwargs)


def judge_options(env: dict[str, str] | os._Environ[str] = os.environ) -> tuple[dict[str, Any], float]:
    """The judge's options and weight from the environment (see the module's doc); an error names the variables.

    >>> judge_options({"OMNIDECISION_JUDGE_PATH": "runs/judge", "OMNIDECISION_JUDGE_WEIGHT": "1"})
    ({'path': 'runs/judge'}, 1.0)
    >>> judge_options({})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: closure_judge_reward needs a judge: set OMNIDECISION_JUDGE_PATH ...
    """
    weight = float(env.get("OMNIDECISION_JUDGE_WEIGHT", "0.5"))
    if env.get("OMNIDECISION_JUDGE_PATH"):
        return {"path": env["OMNIDECISION_JUDGE_PATH"]}, weight
    if env.get("OMNIDECISION_JUDGE_URL") and env.get("OMNIDECISION_JUDGE_MODEL"):
        return {"base_url": env["OMNIDECISION_JUDGE_URL"], "model": env["OMNIDECISION_JUDGE_MODEL"],
                "api_key_env": env.get("OMNIDECISION_JUDGE_API_KEY_ENV", "OPENAI_API_KEY")}, weight
    raise ValueError("closure_judge_reward needs a judge: set OMNIDECISION_JUDGE_PATH (a learned judge folder from "
                     "`omnidecision judge train`) or OMNIDECISION_JUDGE_URL and OMNIDECISION_JUDGE_MODEL (an LLM "
                     "judge endpoint)")


@functools.cache
def _judged() -> RewardFunc:
    options, weight = judge_options()
    return get_reward("closure", judge=options, judge_share=weight)


def closure_judge_reward(completions: Sequence[object], **kwargs: Any) -> list[float | None]:
    """The closure rubric with the reward judge inside it (judge from the environment: OMNIDECISION_JUDGE_PATH, or
    OMNIDECISION_JUDGE_URL + OMNIDECISION_JUDGE_MODEL): a failed judge call leaves that sample its closure score."""
    return _judged()(completions, **kwargs)


@functools.cache
def _check_function(name: str) -> RewardFunc:
    reward = get_check_reward(name)

    def check(completions: Sequence[object], **kwargs: Any) -> list[float | None]:
        return reward(completions, **kwargs)

    check.__name__ = check.__qualname__ = f"{name}_reward"
    check.__module__ = __name__
    check.__doc__ = f"The `{name}` closure check alone, in [0, 1] (omnidecision.rewards.checks)."
    return check


def __getattr__(attr: str) -> RewardFunc:
    """`<check>_reward` for every registered closure check (`format_reward`, `tool_reward`, ...), made on first use:
    TRL's CLI reads the attribute with getattr, which lands here (PEP 562)."""
    if attr.endswith("_reward") and attr[: -len("_reward")] in CHECKS:
        return _check_function(attr[: -len("_reward")])
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
