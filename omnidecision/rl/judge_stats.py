"""The reward judge's accounting in a GRPO run: logged per step wherever the judge sits, summed over every rank.

- `with_judge_logging`: a judge inside the closure reward (the recipes' layout: `judge_weight > 0`) is called by
  the rubric without TRL's `log_metric`, so its `judge/failures` and `judge/cache_hits` were never logged; the
  wrapper logs them around the rubric's call (TRL averages `log_metric` values over the processes).
- `gather_judge_stats`: each process has its own judge (its share of the concurrency, its own cache file), so the
  counters in `closure_eval.json` are the sum over all processes (accelerate's `gather_object`), not rank 0's.

    python -c "from omnidecision.rl.judge_stats import sum_stats; print(sum_stats([{'requests': 2}, {'requests': 3}]))"
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from typing import Any

logger = logging.getLogger(__name__)


def judges_of(reward_funcs: list[Any]) -> list[Any]:
    """The RewardJudge objects behind the reward functions (alone, or inside a ClosureRubric)."""
    funcs = list(reward_funcs)
    for f in reward_funcs:
        funcs += [extra_func for extra_func, _ in getattr(f, "extra", {}).values()]
    return [f.judge for f in funcs if getattr(f, "judge", None) is not None and hasattr(f.judge, "stats")]


def with_judge_logging(reward_funcs: list[Any]) -> list[Any]:
    """`reward_funcs` with every reward that holds a judge among its components wrapped to log the judge's
    failures and cache hits of each call through TRL's `log_metric` (a judge that is its own reward logs itself)."""
    out = []
    for func in reward_funcs:
        inner = [extra for extra, _ in getattr(func, "extra", {}).values()]
        judges = [f.judge for f in inner if hasattr(getattr(f, "judge", None), "stats")]
        out.append(_logged(func, judges) if judges else func)
    return out


def _logged(func: Any, judges: list[Any]) -> Any:
    def reward(completions: Any, **kwargs: Any) -> Any:
        log_metric = kwargs.get("log_metric")
        before = [j.stats.as_dict() for j in judges]
        scores = func(completions, **kwargs)
        after = [j.stats.as_dict() for j in judges]
        failed = sum(a["failed"] - b["failed"] for a, b in zip(after, before, strict=True))
        hits = sum(a["cache_hits"] - b["cache_hits"] for a, b in zip(after, before, strict=True))
        if log_metric is not None:
            log_metric("judge/failures", float(failed))
            log_metric("judge/cache_hits", float(hits))
        if failed:
            logger.warning("reward judge inside %s: %d of %d samples failed in this batch",
                           getattr(func, "__name__", "the reward"), failed, len(completions))
        return scores

    functools.update_wrapper(reward, func)  # TRL names the reward by __name__; `extra` stays visible
    return reward


def sum_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The counters of several judges (one per process) added up; `failures` by reason.

    >>> sum_stats([{"requests": 2, "failed": 1, "failures": {"timeout": 1}},
    ...            {"requests": 3, "failed": 2, "failures": {"timeout": 1, "http 500": 1}}])
    {'requests': 5, 'failed': 3, 'failures': {'timeout': 2, 'http 500': 1}, 'processes': 2}
    """
    total: dict[str, Any] = {}
    reasons: Counter[str] = Counter()
    for part in parts:
        for key, value in part.items():
            if key == "failures":
                reasons.update(value or {})
            elif isinstance(value, (int, float)):
                total[key] = total.get(key, 0) + value
    return {**total, "failures": dict(reasons), "processes": len(parts)}


def gather_judge_stats(judges: list[Any]) -> dict[str, Any] | None:
    """The judges' counters summed over every process of the launch (a collective call: every rank calls it);
    None when no judge took part."""
    from accelerate.utils import gather_object

    local = sum_stats([j.stats.as_dict() for j in judges]) if judges else None
    parts = gather_object([local])  # one process: [local]; else every rank's, in rank order
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    merged = sum_stats(parts)
    merged["processes"] = len(parts)
    return merged
