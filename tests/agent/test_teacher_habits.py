"""The teacher with habits fails where its habits say: one synthetic task per habit, run through the real loop with
only that habit switched on (firing at every state where it applies), against the same task without habits."""

from __future__ import annotations

import asyncio

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.backends.factory import build_backends
from omnidecision.backends.teacher import HABIT_KNOBS, TeacherBackend, normalise_habits
from omnidecision.protocol.chat import BackendSpec
from omnidecision.tasks.synth import load_suite, write_suite

# habit -> (the family whose task shows it, the outcome the habit leads to when it fires at every chance)
CASES = {
    "retry_empty_source": ("source_switch", "insufficient"),
    "early_finish": ("audio_subtitle_web", "forced"),
    "settle_first_value": ("conflict_second_source", "forced"),
    "supplementary_first": ("tight_budget", "budget"),
}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    out = tmp_path_factory.mktemp("habits")
    write_suite(80, 3, out)
    by_family = {}
    for t in load_suite(out):
        by_family.setdefault(t.category, t)
    return by_family


def _run(task, habits):
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"habits": habits, "habit_rate": 1.0})})
    return asyncio.run(run_task(task, AgentConfig(), backends, sample=0))


def _decisions(record):
    return [s.action for s in record.steps if s.action is not None]


@pytest.mark.parametrize("habit", HABIT_KNOBS)
def test_each_habit_fails_its_task_and_the_teacher_without_it_solves_it(tasks, habit):
    family, outcome = CASES[habit]
    task = tasks[family]
    clean = _run(task, None)
    assert (clean.outcome, clean.answer) == ("accepted", task.answer)
    bad = _run(task, {habit: 1.0})
    assert bad.outcome == outcome, (habit, bad.outcome, _decisions(bad))
    if outcome != "budget":  # a budget stop's best-effort draft can still name the right value
        assert bad.answer != task.answer
    acts = _decisions(bad)
    if habit == "retry_empty_source":  # the same tool on the same need until the need's attempts are spent
        calls = [(a["need"], a.get("tool")) for a in acts if a["action"] == "call"]
        assert any(calls.count(c) >= 2 for c in calls), calls
        assert all(t != "page_reader" for _, t in calls)
    elif habit in ("early_finish", "settle_first_value"):  # finishes with the ledger not ready, three times
        finishes = [s for s in bad.steps if s.action and s.action["action"] == "finish"]
        assert len(finishes) >= 3
    else:  # calls spent on supplementary needs before the blocking chain
        first = acts[0]
        assert first["action"] == "call"
        need = next(n for n in bad.steps[0].ledger.needs if n.index == first["need"])
        assert need.role == "supplementary"


def test_the_other_habits_leave_a_task_alone(tasks):
    """A habit fires only where it applies: the early-finish task has no conflict and no supplementary need, so
    `settle_first_value` and `supplementary_first` at full strength change nothing."""
    task = tasks["audio_subtitle_web"]
    others = {h: 1.0 for h in HABIT_KNOBS if h not in ("early_finish", "retry_empty_source")}
    rec = _run(task, others)
    assert (rec.outcome, rec.answer) == ("accepted", task.answer)


def test_habits_are_validated_and_drawn_per_run(tasks):
    with pytest.raises(ValueError, match="unknown teacher habit"):
        TeacherBackend(habits={"laziness": 0.5})
    with pytest.raises(ValueError, match="not a probability"):
        TeacherBackend(habits=1.5)
    assert normalise_habits(0.25) == dict.fromkeys(HABIT_KNOBS, 0.25)
    teacher = TeacherBackend(habits=0.5, seed=7)
    task = tasks["source_switch"]
    draws = [teacher.habit_on(task, {"sample": s}, "early_finish") for s in range(40)]
    assert draws == [teacher.habit_on(task, {"sample": s}, "early_finish") for s in range(40)]  # deterministic
    assert 8 <= sum(draws) <= 32  # about half of the runs, not all or none


def test_the_teacher_names_a_tool_only_where_it_departs_from_the_loops_default(tasks):
    """The teacher's decision text is the short form (protocol.actions.short_form): a clean source_switch run names
    no tool in any call and still switches sources (the loop runs the first of the line's sources=), while the
    retry habit's calls name the tool that already came back empty on that need."""
    task = tasks["source_switch"]
    clean = _run(task, None)
    calls = [s for s in clean.steps if s.action is not None and s.action["action"] == "call"]
    assert calls and all("tool" not in s.action for s in calls), [s.action for s in calls]
    ran: dict[int, list[str]] = {}
    for s in calls:
        if s.action.get("need") is not None:
            ran.setdefault(s.action["need"], []).append(s.observation["tool"])
    assert any(len(set(tools)) > 1 for tools in ran.values()), ran  # a need whose second call ran the other source
    bad = _run(task, {"retry_empty_source": 1.0})
    named = [s for s in bad.steps if s.action is not None and s.action.get("tool")]
    assert named, _decisions(bad)
    for s in named:
        assert s.action["tool"] in s.ledger.needs[s.action["need"]].tried, (s.action, s.ledger.needs)
