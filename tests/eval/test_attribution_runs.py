"""Failure attribution from the ledger and the run (issue 29, item 4): one hand-built incorrect run per category of
the method's diagnosis, each with the need it names and the reason in words, and a report over all of them that
spreads them over the categories instead of one bucket.

    .venv/bin/pytest tests/eval/test_attribution_runs.py -q
"""

from __future__ import annotations

import pytest

from omnidecision.eval.attribution import CATEGORIES, attribute_run
from omnidecision.eval.report import build_report, render_markdown
from omnidecision.ledger.events import ToolCalled
from omnidecision.ledger.schema import Conflict, ConflictValue, FailedCall, Ledger, Need, Rejection, Slot, SourceRef
from omnidecision.protocol.records import JudgeResult, RunRecord, StepRecord


def need(i: int, source: str = "web", status: str = "unfilled", role: str = "blocking", attempts: int = 0,
         tried: tuple[str, ...] = (), deps: tuple[int, ...] = ()) -> Need:
    return Need(index=i, description=f"n{i}", preferred_source=source, status=status, role=role, attempts=attempts,
                tried=list(tried), depends_on=list(deps), value="v" if status == "filled" else None)


def calls(*spec: tuple[int, str]) -> list[StepRecord]:
    """One planner step per (need, tool): a tool call whose observation filled nothing."""
    return [StepRecord(step=k, planner_messages=[], events=[ToolCalled(need=i, tool=tool, query="q")])
            for k, (i, tool) in enumerate(spec)]


def run(name: str, outcome: str, ledger: Ledger | None, steps: list[StepRecord] | None = None) -> RunRecord:
    return RunRecord(run_id=name, task_id=name, outcome=outcome, final_ledger=ledger, steps=steps or [],
                     mode="ledger" if ledger is not None else "react", judge=JudgeResult(correct=False, method="x"))


def led(*needs: Need, **fields) -> Ledger:
    return Ledger(initialized=True, question="q", needs=list(needs), **fields)


SRC = SourceRef(tool="web_search")
CASES = {
    # the same web source came back empty three times; the need is exhausted, the run abstains. Its fact slot is
    # unverified too, but only because the need it reads stayed open: the need, not verification, failed (the
    # demo's source_switch failures, all once called verification_conflict)
    "external_retrieval": run("retrieval", "insufficient",
                              led(need(0, status="filled"), need(1, attempts=3, tried=("web_search",), deps=(0,)),
                                  slots=[Slot(name="answer", kind="fact", needs=[0, 1])]),
                              calls((0, "web_search"), (1, "web_search"), (1, "web_search"), (1, "web_search"))),
    # clip grounding looked three times and returned nothing usable
    "media_perception": run("perception", "forced", led(need(0, "clip", attempts=3, tried=("clip_grounding",))),
                            calls((0, "clip_grounding"), (0, "clip_grounding"), (0, "clip_grounding"))),
    # two sources disagree and nobody resolved it before the budget ran out
    "verification_conflict": run("verification", "budget", led(
        need(0, status="partial", attempts=1),
        conflicts=[Conflict(id=0, need=0, values=[ConflictValue(value="1999", source=SRC),
                                                  ConflictValue(value="2001", source=SRC)])])),
    # the computation slot's code failed
    "computation": run("computation", "forced", led(
        need(0, status="filled"), slots=[Slot(name="total", kind="computation", needs=[0])],
        failed_calls=[FailedCall(slot="total", tool="code_executor", error="ZeroDivisionError: division by zero")])),
    # finished with a blocking need open that one more call could still work on
    "premature_stop": run("premature", "accepted", led(need(0, status="filled"), need(1, attempts=1, deps=(0,))),
                          calls((0, "web_search"), (1, "web_search"))),
    # the planner repeated a rejected decision
    "stuck_on_rejections": run("stuck", "stuck", led(need(0), last_rejected=Rejection(
        decision='{"action": "call", "need": 3}', reason="need 3 does not exist", streak=3))),
    # the budget went to a supplementary need while the blocking one got one call
    "budget": run("budget", "budget", led(need(0, attempts=1), need(1, "audio", status="partial", role="supplementary",
                                                                      attempts=5)),
                  calls((0, "web_search"), *[(1, "audio_scouting")] * 5)),
    "closed_but_wrong": run("closed", "accepted", led(need(0, status="filled"))),
    "no_ledger": run("react", "accepted", None),
}


@pytest.mark.parametrize("category", list(CASES))
def test_one_hand_built_run_per_category(category):
    d = attribute_run(CASES[category])
    assert d.category == category, d


def test_every_category_has_a_case():
    assert set(CASES) == set(CATEGORIES)


def test_reasons_name_the_need_and_why():
    d = attribute_run(CASES["external_retrieval"])
    assert d.need == 1 and "web_search came back empty 3 time(s) on the same source" in d.reason
    d = attribute_run(CASES["media_perception"])
    assert d.need == 0 and "clip_grounding returned nothing usable 3 time(s)" in d.reason
    assert "conflict 0 on need 0 stayed open (1999 vs 2001)" in attribute_run(CASES["verification_conflict"]).reason
    assert "code_executor failed on slot total: ZeroDivisionError" in attribute_run(CASES["computation"]).reason
    assert "5 of 6 tool calls went to supplementary needs" in attribute_run(CASES["budget"]).reason
    assert "accepted with blocking need(s) [1] open" in attribute_run(CASES["premature_stop"]).reason


def test_the_ledger_alone_decides_without_steps():
    # the ledger counts the need's attempts: three that filled nothing on one source, with or without the steps
    bare = CASES["external_retrieval"].model_copy(update={"steps": []})
    d = attribute_run(bare)
    assert d.category == "external_retrieval" and "web_search came back empty 3 time(s)" in d.reason
    # fewer attempts than the ledger allows, budget spent: the budget, not the source, is what ran out
    short = bare.model_copy(update={"outcome": "budget", "final_ledger": led(
        need(0, status="filled"), need(1, attempts=1, tried=("web_search",), deps=(0,)))})
    assert attribute_run(short).category == "budget"


def test_report_spreads_failures_over_the_categories():
    rep = build_report(list(CASES.values()))
    assert rep["attribution"] == dict.fromkeys(CATEGORIES, 1)
    assert sum(rep["attribution"].values()) == rep["wrong"] == len(CASES)
    by_run = {d["run_id"]: d for d in rep["attribution_runs"]}
    assert by_run["retrieval"]["category"] == "external_retrieval" and by_run["retrieval"]["need"] == 1
    md = render_markdown(rep)
    assert "- external_retrieval: `retrieval` insufficient: need 1 (web) stayed unfilled: web_search came back" in md
