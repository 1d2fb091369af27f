"""Executed returns (grounding/returns.py): the recorded decision executed from its state with the recorded policy
gives the recorded outcome; a call that can fill a blocking need and a premature finish lead to different returns;
the cache answers without executing again; the rule planner is never a reward source."""

from __future__ import annotations

import asyncio

import pytest
import yaml

from omnidecision.branch.parent import load_parent
from omnidecision.grounding import returns as returns_module
from omnidecision.grounding.returns import Executor, ReturnCache, parent_index
from omnidecision.ledger import actionable_need_indices, can_advance, ready, unmet_blocking
from omnidecision.rollout.store import load_records


def _parents(habits_runs):
    index = parent_index([habits_runs["collect"]])
    return [load_parent(index[r.run_id], r.run_id) for r in load_records(habits_runs["collect"])]


def test_the_recorded_decision_executed_from_its_state_gives_the_recorded_outcome(habits_runs):
    ex = Executor("teacher")
    checked = 0
    for parent in _parents(habits_runs):
        rec = parent.record
        for step in range(len(rec.steps)):
            run = asyncio.run(ex.execute(parent, step, rec.steps[step].raw_output, seed=0))
            assert (run.outcome, run.correct) == (rec.outcome, rec.judge.correct), (rec.run_id, step)
            checked += 1
    assert checked >= 50


def test_a_call_on_a_blocking_need_and_a_premature_finish_lead_to_different_returns(habits_runs):
    ex = Executor("teacher")
    pairs = []
    for parent in _parents(habits_runs):
        for step, s in enumerate(parent.record.steps):
            state = s.ledger
            blocking = [i for i in actionable_need_indices(state) if i in unmet_blocking(state)]
            if ready(state) or not can_advance(state) or not blocking:
                continue  # finishing here is not premature, or no call can fill a blocking need
            call = f'{{"action": "call", "need": {blocking[0]}}}'
            finish = '{"action": "finish"}'
            pairs.append((asyncio.run(ex.executed_return(parent, step, call, n=2))[0],
                          asyncio.run(ex.executed_return(parent, step, finish, n=2))[0]))
    assert len(pairs) >= 10
    assert any(c != f for c, f in pairs), "no state where the call and the premature finish led to different returns"
    assert sum(c for c, _ in pairs) > sum(f for _, f in pairs)


def test_the_cache_returns_the_value_without_executing_again(habits_runs, tmp_path, monkeypatch):
    parent = _parents(habits_runs)[0]
    cache = tmp_path / "returns.sqlite"
    first = Executor("teacher", ReturnCache(cache))
    value = asyncio.run(first.executed_return(parent, 1, '{"action": "finish"}', n=2))
    assert first.executions == 2 and first.cached == 0
    again = asyncio.run(first.executed_return(parent, 1, '{"action": "finish"}', n=2))
    assert again[:2] == value[:2] and first.executions == 2 and first.cached == 2

    async def never(*a, **k):
        raise AssertionError("executed although the cache holds the value")

    monkeypatch.setattr(returns_module, "branch_run", never)
    fresh = Executor("teacher", ReturnCache(cache))  # a new process reading the same file
    assert asyncio.run(fresh.executed_return(parent, 1, '{"action": "finish"}', n=2))[:2] == value[:2]
    assert fresh.executions == 0 and fresh.cached == 2


def test_the_rule_planner_is_never_a_reward_source(habits_runs, tmp_path):
    parent = _parents(habits_runs)[0]
    rule = tmp_path / "rule.yaml"  # the scripted teacher without habits or noise decides as the rule planner
    rule.write_text(yaml.safe_dump({"default": {"kind": "teacher", "options": {"noise": 0.0, "habits": 0.0}}}))
    with pytest.raises(ValueError, match="never a reward source"):
        asyncio.run(Executor(str(rule)).execute(parent, 0, '{"action": "finish"}', 0))
    labelled = asyncio.run(Executor(str(rule), reference=True).execute(parent, 0, '{"action": "finish"}', 0))
    assert labelled.policy.startswith("rule.yaml#")


def test_a_teacher_policy_over_a_served_planners_collection_is_the_rule_planner_and_refused():
    """`teacher` over a collection whose planner is not the teacher builds the default teacher (no habits, no noise):
    the rule planner, so it is refused as a reward source."""
    from omnidecision.branch.branch import policy_specs
    from omnidecision.protocol.chat import BackendSpec

    served = {"default": BackendSpec(kind="teacher", options={"noise": 0.0}),
              "planner": BackendSpec(kind="local", model="runs/demo/models/sft")}
    assert returns_module.is_rule_policy(policy_specs("teacher", served))
    habits = {"default": BackendSpec(kind="teacher", options={"habits": 0.5, "noise": 0.02})}
    assert not returns_module.is_rule_policy(policy_specs("teacher", habits))
