"""Difficulty-balanced selection of the GRPO training states, by the starting planner's own greedy decisions.

A GRPO group only teaches where its K decisions differ, and the planner is served greedily, so what RL can still
raise is the states the start planner decides wrongly. `balanced_selection` decodes the start planner greedily
on every training state, scores each decision with the closure rubric, and keeps every state it gets wrong
(reward below 1) plus `right_ratio` times as many states it already gets right (seeded draw): the wrong ones
carry the signal, the right ones keep the rest of the policy (finishing, frequent tools) from drifting.

Measured on the demo's harvest (SFT 300 steps, GRPO 150 steps, the same 366 held-out states, per-state delta
vs the start): all 2,235 states +0.022 [-0.001, +0.046]; only the 781 wrong ones -0.117 (finishing and the
frequent tools were forgotten); wrong + as many right, seeds 0/1/2: +0.050, -0.032, +0.019 — steady only
together with weight averaging (omnidecision/rl/averaging.py; docs/research/rl-recipe.md).

    omnidecision grpo --config configs/grpo/tiny-cpu.yaml --select_states balanced [--select_right_ratio 1.0]
"""

from __future__ import annotations

import logging
import random
import statistics
import time
from typing import Any

from omnidecision.rl.evaluate import heldout_closure_reward

logger = logging.getLogger(__name__)

PERFECT = 1.0 - 1e-6  # closure rewards are weighted means rounded to 6 places: below this, something was wrong


def balanced_indices(scores: list[float], right_ratio: float, seed: int) -> tuple[list[int], dict[str, Any]]:
    """Indices of every state scored below 1 plus `right_ratio` times as many (seeded) of the others, in their
    original order, with counts. No wrong state: every state is kept (there is nothing to focus on).

    >>> balanced_indices([1.0, 0.375, 1.0, 1.0, 0.5], right_ratio=1.0, seed=0)[0]
    [1, 2, 3, 4]
    >>> balanced_indices([1.0, 1.0], right_ratio=1.0, seed=0)[1]["kept"]
    2
    """
    if right_ratio < 0:
        raise ValueError(f"select_right_ratio must be >= 0, got {right_ratio}")
    wrong = [i for i, s in enumerate(scores) if s < PERFECT]
    right = [i for i, s in enumerate(scores) if s >= PERFECT]
    # no wrong state: nothing to focus on, keep them all
    n_right = min(len(right), round(right_ratio * len(wrong))) if wrong else len(right)
    kept_right = random.Random(seed).sample(right, n_right)
    indices = sorted(wrong + kept_right)
    stats = {"decoded": len(scores), "wrong": len(wrong), "right": len(right), "kept_right": len(kept_right),
             "kept": len(indices), "start_greedy_reward": round(statistics.fmean(scores), 4) if scores else None}
    return indices, stats


def balanced_selection(model: Any, tokenizer: Any, dataset: Any, *, right_ratio: float = 1.0, seed: int = 0,
                       **eval_kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """(the selected training states, selection stats). `eval_kwargs` go to `heldout_closure_reward` (decoding
    and rubric settings: use the ones of the held-out evaluation, so "right" means the same thing)."""
    start = time.perf_counter()
    result = heldout_closure_reward(model, dataset, n=-1, tokenizer=tokenizer, mode="greedy", **eval_kwargs)
    indices, stats = balanced_indices(result["per_state"], right_ratio, seed)
    stats["seconds"] = round(time.perf_counter() - start, 2)
    logger.info("state selection (balanced): the start planner is wrong on %d of %d training states; keeping "
                "them and %d it gets right (%d states)", stats["wrong"], stats["decoded"], stats["kept_right"],
                stats["kept"])
    return dataset.select(indices), {"mode": "balanced", "right_ratio": right_ratio, **stats}
