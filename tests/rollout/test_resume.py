"""Resume fidelity: every step of 60 runs of the teacher with habits, resumed with the recorded decision and the
recorded role outputs, reproduces the rest of the record exactly; so does the scripted teacher as the continuation
policy.
A record whose events or snapshots were edited is refused with the step and the field named.

    .venv/bin/pytest tests/rollout/test_resume.py -q
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

from omnidecision.backends.factory import build_backends
from omnidecision.branch.branch import RecordedPolicy, RecordedTools
from omnidecision.branch.resume import (
    ResumeError,
    first_difference,
    given_decision,
    ledger_at,
    restore,
    resume,
    verify_record,
)
from omnidecision.protocol.chat import Usage
from omnidecision.protocol.records import RunRecord

from .conftest import HABITS_CONFIG, TEACHER_SPECS

TIMING = ("latency_s", "wall_s")  # wall-clock fields: measured anew by any run that calls a backend or a tool


def _dump(record: RunRecord, drop: tuple[str, ...] = ("wall_s",)) -> Any:
    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items() if k not in drop}
        return [walk(v) for v in x] if isinstance(x, list) else x

    return walk(record.model_dump(mode="json"))


def _same(parent: RunRecord, got: RunRecord, drop: tuple[str, ...] = ("wall_s",)) -> str | None:
    """None when the records agree on every field but `drop`, else the path of the first difference."""
    return first_difference(_dump(parent, drop), _dump(got, drop))


def test_the_runs_cover_families_outcomes_and_habits(habit_runs, tasks):
    families = Counter(tasks[r.task_id].category for r in habit_runs)
    outcomes = Counter(r.outcome for r in habit_runs)
    assert len(habit_runs) >= 50 and len(families) >= 8, families
    assert {"accepted", "forced", "insufficient"} <= set(outcomes), outcomes  # habits fire: not every run succeeds
    assert sum(len(r.steps) for r in habit_runs) > 200
    assert any(r.totals.invalid_actions for r in habit_runs)  # rejected decisions are part of the resumed state


def test_every_step_resumed_with_recorded_outputs_reproduces_the_record(habit_runs, tasks):
    async def check() -> tuple[int, list[str]]:
        n, bad = 0, []
        for parent in habit_runs:
            for t in range(len(parent.steps)):
                policy, tools = RecordedPolicy(parent), RecordedTools(parent)
                point = restore(parent, t, tasks[parent.task_id], HABITS_CONFIG, {"default": policy},
                                tool_runner=tools)
                got = await resume(point)
                n += 1
                diff = _same(parent, got)
                if diff is not None or policy.off_path or tools.executed:
                    bad.append(f"{parent.run_id} step {t}: {diff} (off path {policy.off_path}, "
                               f"tools run {tools.executed})")
        return n, bad

    n, bad = asyncio.run(check())
    assert n > 200 and not bad, f"{len(bad)} of {n} resumes differ: {bad[:5]}"


def test_the_scripted_teacher_as_continuation_reproduces_its_own_record(habit_runs, tasks):
    """The teacher draws from (seed, task, sample, run id, step): restored at any step, it decides as it did."""
    teacher = build_backends(TEACHER_SPECS)

    async def check() -> tuple[int, list[str]]:
        n, bad = 0, []
        for parent in habit_runs:
            for t in range(len(parent.steps)):
                point = restore(parent, t, tasks[parent.task_id], HABITS_CONFIG, teacher,
                                tool_runner=RecordedTools(parent))
                got = await resume(point)
                n += 1
                if (diff := _same(parent, got, TIMING)) is not None:
                    bad.append(f"{parent.run_id} step {t}: {diff}")
        return n, bad

    n, bad = asyncio.run(check())
    assert n > 200 and not bad, f"{len(bad)} of {n} resumes differ: {bad[:5]}"


def test_the_real_tools_give_the_same_record_but_the_sandbox_uid(habit_runs, tasks):
    """Without recorded observations the tools run again: the offline environment answers the same, except the code
    sandbox's report of the throwaway uid it ran as (docs/rollout.md, "Limits")."""
    teacher = build_backends(TEACHER_SPECS)
    drop = (*TIMING, "isolation")

    async def check() -> list[str]:
        bad = []
        for parent in habit_runs:
            t = len(parent.steps) // 2
            got = await resume(restore(parent, t, tasks[parent.task_id], HABITS_CONFIG, teacher))
            if (diff := _same(parent, got, drop)) is not None:
                bad.append(f"{parent.run_id} step {t}: {diff}")
        return bad

    assert asyncio.run(check()) == []


def test_the_restored_state_holds_the_counters_at_the_step(habit_runs, tasks):
    parent = max(habit_runs, key=lambda r: (r.totals.invalid_actions, len(r.steps)))
    t = len(parent.steps) - 1
    point = restore(parent, t, tasks[parent.task_id], HABITS_CONFIG, build_backends(TEACHER_SPECS))
    assert point.ledger.model_dump_json() == parent.steps[t].ledger.model_dump_json()
    assert point.ledger.last_rejected == parent.steps[t].ledger.last_rejected  # the rejection streak
    before = parent.steps[:t]
    usage = sum((s.usage for s in before), Usage()) + sum((c.usage for s in before for c in s.calls), Usage())
    usage = usage + parent.decompose.usage
    assert (point.run.usage.prompt_tokens, point.run.usage.completion_tokens) == (usage.prompt_tokens,
                                                                                    usage.completion_tokens)
    assert point.run.planner_prompt_tokens == sum(s.usage.prompt_tokens for s in before)
    assert sum(point.run.tool_calls.values()) == sum(s.observation is not None for s in before)
    assert point.run.invalid == sum(e.kind == "invalid_action" for s in before for e in s.events) + sum(
        e.kind == "invalid_action" for e in parent.initial_events)
    assert point.run.ctx.task.id == parent.task_id and "search" in point.run.ctx.services  # the environment
    assert [s.step for s in point.record.steps] == list(range(t)) and point.record.steps[0] == parent.steps[0]
    assert point.record.steps[0] is not parent.steps[0]  # copied: the parent is never written to


def test_a_different_decision_changes_the_rest(habit_runs, tasks):
    parent = next(r for r in habit_runs if r.outcome == "accepted" and len(r.steps) >= 3)
    point = restore(parent, 0, tasks[parent.task_id], HABITS_CONFIG, build_backends(TEACHER_SPECS))
    got = asyncio.run(resume(point, given_decision({"action": "finish"})))
    assert got.steps[0].action == {"action": "finish"} and got.steps[0].raw_output == '{"action":"finish"}'
    assert _same(parent, got, TIMING) is not None and got.steps[0].events[0].kind == "finish"


# -- tampered records ---------------------------------------------------------------------------------------
def _tamper(record: RunRecord, edit) -> RunRecord:
    data = json.loads(record.model_dump_json())
    edit(data)
    return RunRecord.model_validate(data)


@pytest.fixture
def parent(habit_runs) -> RunRecord:
    return next(r for r in habit_runs if r.outcome == "accepted" and len(r.steps) >= 4
                and r.steps[1].events and r.steps[1].events[0].kind == "tool_call")


def test_an_edited_event_is_refused_naming_the_step_and_field(parent, tasks):
    def edit(data):
        data["steps"][1]["events"][0]["tool"] = "web_search" if data["steps"][1]["events"][0]["tool"] != \
            "web_search" else "audio_scouting"

    bad = _tamper(parent, edit)
    with pytest.raises(ResumeError) as err:
        restore(bad, 3, tasks[parent.task_id], HABITS_CONFIG, build_backends(TEACHER_SPECS))
    msg = str(err.value)
    assert f"run {parent.run_id} step 2: field steps[2].ledger." in msg, msg
    assert "tool_call_counts" in msg or "tried" in msg, msg


def test_an_edited_snapshot_is_refused_naming_the_field(parent, tasks):
    def edit(data):
        data["steps"][2]["ledger"]["needs"][0]["description"] = "something else"

    with pytest.raises(ResumeError, match=r"step 2: field steps\[2\]\.ledger\.needs\[0\]\.description differs"):
        ledger_at(_tamper(parent, edit), 1)


def test_an_event_the_reducer_rejects_is_refused_naming_the_event(parent):
    def edit(data):
        data["steps"][1]["events"].append({"kind": "need_update", "need": 99, "verdict": "supports"})

    with pytest.raises(ResumeError, match=r"step 1: events\[\d+\] \(need_update\) is rejected on replay"):
        verify_record(_tamper(parent, edit))


def test_an_edit_after_the_resume_step_is_refused_too(parent):
    """The whole record is checked, not only the steps before t: an edited record is not resumed anywhere."""
    def edit(data):
        data["final_ledger"]["step"] += 1

    with pytest.raises(ResumeError, match=r"final: field final_ledger\.step differs"):
        ledger_at(_tamper(parent, edit), 0)


@pytest.mark.parametrize("step", [-1, 99])
def test_a_step_out_of_range_is_refused(parent, step):
    with pytest.raises(ResumeError, match=f"step {step} is out of range"):
        ledger_at(parent, step)


def test_the_wrong_task_or_config_is_refused(parent, tasks):
    other = next(t for t in tasks.values() if t.id != parent.task_id)
    with pytest.raises(ResumeError, match="field task_id"):
        restore(parent, 0, other, HABITS_CONFIG, {})
    with pytest.raises(ResumeError, match="field config_digest"):
        restore(parent, 0, tasks[parent.task_id], HABITS_CONFIG.model_copy(update={"step_budget": 9}), {})


def test_a_malformed_decision_is_refused():
    with pytest.raises(ResumeError, match="is not a planner action"):
        given_decision({"action": "jump"})


def test_an_ordinary_record_carries_no_branch_fields_or_unset_costs(habit_runs):
    """Records of ordinary runs are written as before the branch and per-call cost fields existed."""
    from omnidecision.protocol.records import BRANCH_FIELDS

    line = json.loads(habit_runs[0].model_dump_json())
    assert not set(BRANCH_FIELDS) & set(line)
    assert all("cost" not in c for s in line["steps"] for c in s["calls"]) and "cost" not in line["steps"][0]
    # a deep copy: the fixture's records are shared by the session's other tests
    priced = habit_runs[0].model_copy(update={"parent_run_id": "p", "parent_step": 0}, deep=True)
    priced.steps[0] = priced.steps[0].model_copy(update={"cost": 0.25})
    back = RunRecord.model_validate_json(priced.model_dump_json())
    assert (back.parent_run_id, back.parent_step, back.steps[0].cost) == ("p", 0, 0.25)
