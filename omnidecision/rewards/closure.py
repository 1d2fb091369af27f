"""The closure rewards: the weighted `ClosureRubric` over the checks (`closure`), and the judge reward (`judge`).

TRL's contract: `reward(completions, **columns) -> list[float | None]`; the RL rows carry the ledger the
planner saw as a JSON string in the `ledger` column (see omnidecision/rewards/checks.py for the checks).

    >>> completions = [[{"role": "assistant", "content": '{"action": "call", "need": 0}'}],
    ...                [{"role": "assistant", "content": '{"action": "finish"}'}]]
    >>> closure_reward(completions, ledger=[EXAMPLE_LEDGER] * 2)
    [1.0, 0.1]

Run the doctests: `.venv/bin/pytest --doctest-modules omnidecision/rewards`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from omnidecision.ledger import FailedCall, Ledger, Need  # noqa: F401  (FailedCall: doctest namespace)
from omnidecision.rewards.decision import Decision, ledgers_column
from omnidecision.rewards.registry import (
    CHECKS,
    DEFAULT_WEIGHTS,
    REWARDS,
    RewardFunc,
    get_check_reward,
    register_reward,
)

logger = logging.getLogger(__name__)

# A two-need ledger used by the doctests: need 1 waits on need 0.
EXAMPLE_LEDGER: str = Ledger(
    question="In which year was the narrator of the clip born?",
    needs=[
        Need(index=0, description="narrator name", query_focus="narrator name", preferred_source="audio"),
        Need(index=1, description="birth year", query_focus="birth year of {#0}", depends_on=[0]),
    ],
    initialized=True,
).model_dump_json()


# One TRL reward function per registered check (`format_reward`, `finish_reward`, ...) is derived from the registry
# (`checks.register_check`); the checks' own doctests show a passing and a failing decision for each.
format_reward, finish_reward = get_check_reward("format"), get_check_reward("finish")


# Call credit: what a call earns for its need and its query. With `gate_on_tool` it is earned only when the tool
# fits the need (the `tool` check): a wrong-tool call on the right need cannot fill it and burns one of its
# attempts in the loop (worse than an invalid call, which burns none), so it must not outscore a call on the
# wrong need. Ungated, GRPO's group advantage reinforced "right need, any tool": measured, held-out tool fit fell
# from 0.68 to 0.19 when training concentrated on the states the SFT planner got wrong (docs/research/rl-recipe.md).
CALL_CREDIT: tuple[str, ...] = ("target", "query", "no_repeat", "modality", "budget", "conflict")


class ClosureRubric:
    """Weighted mean of the closure checks (and optional extra components such as the judge), in [0, 1].

    Every component is logged per batch: through TRL's `log_metric` kwarg when the trainer passes it
    (`closure/<name>` in the trainer logs) and through this module's logger. A component that returns None
    for a sample (the judge failed) is left out of that sample's mean and its weight with it.

    With `gate_on_tool` (the default) the call-credit components (`CALL_CREDIT`) count only for a call whose tool
    fits its need; the components are still logged ungated.

    >>> rubric = ClosureRubric({"format": 1.0, "finish": 1.0})
    >>> rubric(['{"action": "finish"}', 'oops'], ledger=[EXAMPLE_LEDGER] * 2)
    [0.5, 0.0]
    >>> right, wrong_tool = ('{"action": "call", "need": 0, "tool": "audio_scouting"}',
    ...                      '{"action": "call", "need": 0, "tool": "web_search"}')
    >>> ClosureRubric()([right, wrong_tool, '{"action": "call", "need": 1}'], ledger=[EXAMPLE_LEDGER] * 3)
    [1.0, 0.3, 0.3]
    >>> ClosureRubric(gate_on_tool=False)([wrong_tool], ledger=[EXAMPLE_LEDGER])
    [0.85]
    """

    def __init__(self, weights: dict[str, float] | None = None,
                 extra: dict[str, tuple[RewardFunc, float]] | None = None, name: str = "closure",
                 gate_on_tool: bool = True) -> None:
        self.weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
        unknown = sorted(set(self.weights) - set(CHECKS))
        if unknown:
            raise ValueError(f"unknown closure checks {unknown}; known: {sorted(CHECKS)}")
        if any(w < 0 or not math.isfinite(w) for w in self.weights.values()):
            raise ValueError(f"closure weights must be finite and >= 0, got {self.weights}")
        self.extra = dict(extra or {})
        if not self.weights and not self.extra:
            raise ValueError("a ClosureRubric needs at least one component")
        self.name = name
        self.__name__ = f"{name}_reward"
        self.gate_on_tool = gate_on_tool

    def components(self, completions: Sequence[object], ledgers: Sequence[Ledger],
                   **kwargs: Any) -> dict[str, list[float | None]]:
        """Per-component scores, one list per component (aligned with `completions`)."""
        decisions = [Decision.parse(c) for c in completions]
        checks = {name: CHECKS[name] for name in self.weights}  # one registry lookup per batch, not per decision
        out: dict[str, list[float | None]] = {
            name: [check(d, s) for d, s in zip(decisions, ledgers, strict=True)] for name, check in checks.items()
        }
        for name, (func, _) in self.extra.items():
            out[name] = list(func(completions, ledger=[s.model_dump_json() for s in ledgers], **kwargs))
        return out

    def combine(self, comps: dict[str, list[float | None]]) -> list[float]:
        weights = {**self.weights, **{k: w for k, (_, w) in self.extra.items()}}
        n = len(next(iter(comps.values())))
        gate = comps.get("tool") if self.gate_on_tool else None  # 0/1 per decision; absent: no gating
        scores = []
        for i in range(n):
            num = den = 0.0
            for name, values in comps.items():
                value = values[i]
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                if gate is not None and name in CALL_CREDIT and gate[i] is not None:
                    value *= gate[i]
                num += weights[name] * value
                den += weights[name]
            scores.append(round(num / den, 6) if den else 0.0)
        return scores

    def __call__(self, completions: Sequence[object], **kwargs: Any) -> list[float | None]:
        states = ledgers_column(kwargs, len(completions))
        log_metric = kwargs.pop("log_metric", None)
        passthrough = {k: v for k, v in kwargs.items() if k != "ledger"}
        comps = self.components(completions, states, **passthrough)
        scores = self.combine(comps)
        means = {name: _mean(values) for name, values in comps.items()}
        for name, mean in means.items():
            if log_metric is not None and mean is not None:
                log_metric(f"{self.name}/{name}", mean)
        logger.debug("%s components: %s", self.name, {k: round(v, 4) for k, v in means.items() if v is not None})
        return list(scores)


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(kept) / len(kept) if kept else None


@register_reward("closure")
def get_closure_reward(weights: dict[str, float] | None = None, judge: dict[str, Any] | None = None,
                       judge_share: float = 1.0, gate_on_tool: bool = True) -> RewardFunc:
    """The combined closure reward; with `judge` (RewardJudge options) the judge joins as one more component:
    the closure checks together count 1 and the judge `judge_share`, i.e. reward = (closure + s * judge) / (1 + s).

    The judge must live here, inside one reward function, for a failed call to be left out: TRL sums separate
    reward functions with `nansum`, so a separate judge's None would count as 0 for that sample; the rubric drops
    the missing component and its weight, and the sample keeps its closure score.
    """
    extra = {}
    if judge:
        checks = dict(DEFAULT_WEIGHTS if weights is None else weights)
        extra["judge"] = (get_judge_reward(**judge), judge_share * (sum(checks.values()) or 1.0))
    return ClosureRubric(weights, extra=extra, gate_on_tool=gate_on_tool)


@register_reward("judge", kind="judge")
def get_judge_reward(shuffle: bool = False, shuffle_seed: int = 0, **options: Any) -> RewardFunc:
    """The reward judge as a TRL reward function. `path` (a reward model trained by `omnidecision judge train`):
    the learned judge, on CPU or the recipe's device; otherwise the LLM judge behind an OpenAI-compatible endpoint
    (options: `omnidecision.rewards.llm_judge.RewardJudge.from_options`). `shuffle`: the judge's placebo, its scores
    permuted among the completions of the same state (same ledger), so the group-relative advantage sees the
    judge's spread but none of its information."""
    func = REWARDS["learned_judge" if options.get("path") else "llm_judge"].factory(**options)
    return shuffled_within_groups(func, shuffle_seed) if shuffle else func


def shuffled_within_groups(func: RewardFunc, seed: int = 0) -> RewardFunc:
    """`func` with its scores permuted among completions that share a ledger (one GRPO group); seeded per call.

    >>> f = shuffled_within_groups(lambda completions, **kw: [float(i) for i in range(len(completions))], seed=1)
    >>> out = f(["a", "b", "c", "d"], ledger=["x", "x", "y", "y"])
    >>> sorted(out[:2]), sorted(out[2:])
    ([0.0, 1.0], [2.0, 3.0])
    """
    import random

    calls = [0]

    def shuffled(completions: Sequence[object], **kwargs: Any) -> list[float | None]:
        scores = list(func(completions, **kwargs))
        rng = random.Random(f"{seed}|{calls[0]}")
        calls[0] += 1
        groups: dict[str, list[int]] = {}
        for i, key in enumerate(kwargs.get("ledger") or range(len(scores))):
            groups.setdefault(str(key), []).append(i)
        out = list(scores)
        for idx in groups.values():
            perm = idx[:]
            rng.shuffle(perm)
            for i, j in zip(idx, perm, strict=True):
                out[i] = scores[j]
        return out

    shuffled.__name__ = getattr(func, "__name__", "judge_reward")
    return shuffled


closure_reward: RewardFunc = ClosureRubric()
