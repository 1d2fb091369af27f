"""The closure checks' values on both sides of each threshold they state (budget, tool after an empty source,
conflict, target priority, finish), and the closure reward as the weighted mean of exactly those values: a flipped
comparison or an off-by-one in a check changes a number asserted here.

    pytest -q tests/rewards/test_check_boundaries.py
"""

from __future__ import annotations

import json

import pytest

from omnidecision.rewards import DEFAULT_WEIGHTS, ClosureRubric, Decision
from omnidecision.rewards.checks import (
    budget_check,
    conflict_check,
    example_ledger,
    finish_check,
    target_check,
    tool_check,
)


def _call(need: int, tool: str | None = None) -> Decision:
    return Decision.parse(json.dumps({"action": "call", "need": need, **({"tool": tool} if tool else {})}))


FINISH = Decision.parse('{"action": "finish"}')


@pytest.mark.parametrize(("max_calls", "want"), [(3, 0.0), (4, 1.0), (5, 1.0), (None, 1.0)])
def test_budget_a_supplementary_call_must_leave_the_blocking_needs_their_calls(max_calls, want):
    # one call spent; needs 0 and 1 are blocking and open: 2 calls required after any supplementary call
    state = example_ledger().model_copy(update={"max_tool_calls": max_calls})
    assert budget_check(_call(2), state) == want  # 3: 2 left, 1 after the call < 2 required; 4: 2 after it
    assert budget_check(_call(0), state) == 1.0  # a blocking call is what the budget is for


def test_budget_with_one_call_left_for_one_blocking_need():
    # need 0 filled: need 1 (blocking) is the only one required; 2 calls left -> a supplementary call leaves 1
    state = example_ledger()
    needs = [state.needs[0].model_copy(update={"status": "filled", "value": "Ada"}), *state.needs[1:]]
    state = state.model_copy(update={"needs": needs})
    assert budget_check(_call(2), state) == 1.0
    state = state.model_copy(update={"max_tool_calls": 2})  # 1 left: the supplementary call would use it up
    assert budget_check(_call(2), state) == 0.0


def test_tool_switches_after_an_empty_source_and_may_repeat_once_all_are_tried():
    state = example_ledger()  # need 0: audio came back empty, subtitles untried
    assert [tool_check(_call(0, t), state) for t in ("subtitle_grounding", "audio_scouting")] == [1.0, 0.0]
    both = [state.needs[0].model_copy(update={"tried": ["audio_scouting", "subtitle_grounding"]}), *state.needs[1:]]
    state = state.model_copy(update={"needs": both})
    assert [tool_check(_call(0, t), state) for t in ("subtitle_grounding", "audio_scouting")] == [1.0, 1.0]


def test_conflict_goes_to_an_independent_source_until_it_is_resolved():
    state = example_ledger(conflict=True)  # both values from the subtitles
    assert [conflict_check(_call(0, t), state) for t in ("audio_scouting", "subtitle_grounding")] == [1.0, 0.0]
    resolved = [state.conflicts[0].model_copy(update={"resolved": True})]
    state = state.model_copy(update={"conflicts": resolved})
    assert conflict_check(_call(0, "subtitle_grounding"), state) == 1.0


def test_target_prefers_blocking_and_refuses_blocked_needs():
    state = example_ledger()
    assert [target_check(_call(i), state) for i in (0, 2, 1, 7)] == [1.0, 0.5, 0.0, 0.0]
    # with need 0 filled, need 1 is actionable and blocking: the supplementary need still waits
    needs = [state.needs[0].model_copy(update={"status": "filled", "value": "Ada"}), *state.needs[1:]]
    assert [target_check(_call(i), state.model_copy(update={"needs": needs})) for i in (1, 2, 0)] == [1.0, 0.5, 0.0]


def test_finish_is_right_exactly_when_finishing_is_sound():
    open_state = example_ledger()
    done = open_state.model_copy(update={"needs": [n.model_copy(update={"status": "filled", "value": "x"})
                                                   for n in open_state.needs]})
    assert [finish_check(FINISH, s) for s in (open_state, done)] == [0.0, 1.0]
    assert [finish_check(_call(0), s) for s in (open_state, done)] == [1.0, 0.0]


def test_closure_reward_is_the_weighted_mean_of_the_checks():
    """The rubric's number from the checks' own values: the weighted mean, the call credit counted only when the
    tool fits (`CALL_CREDIT`, gated by the `tool` check)."""
    from omnidecision.rewards.checks import CHECKS
    from omnidecision.rewards.closure import CALL_CREDIT

    state = example_ledger()
    seen = set()
    for decision in (_call(0, "subtitle_grounding"), _call(0, "audio_scouting"), _call(2), FINISH):
        scores = {name: CHECKS[name](decision, state) for name in DEFAULT_WEIGHTS}
        gated = {n: s * (scores["tool"] if n in CALL_CREDIT else 1.0) for n, s in scores.items()}
        want = sum(DEFAULT_WEIGHTS[n] * s for n, s in gated.items()) / sum(DEFAULT_WEIGHTS.values())
        (got,) = ClosureRubric()([decision.text], ledger=[state.model_dump_json()])
        assert got == pytest.approx(want, abs=1e-6), (decision.text, scores)
        seen.add(round(got, 6))
    assert len(seen) == 4  # four decisions, four different rewards: the cases tell the checks apart
