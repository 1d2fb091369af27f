"""Decision-level diagnostics of an eval: does the planner use what the digest shows it? Computed from the recorded
run steps (the ledger snapshot each planner decision saw, and the decision), no model call, no replay.

- **repeat after an empty return** (`repeat_after_empty`): at a state where a need's last call came back without
  the value (the need is actionable and still unfilled, it was called before) and another of its listed sources is
  untried (`sources=` still lists a tool not called on it), did the planner call the same (need, tool) again?
  Rate = repeats / such states; `runs` counts the runs with such a state and `runs_with_event` those with at
  least one repeat.
  A decision at such a state that targets another need, or finishes, is not a repeat (it is counted in `states`).
- **finish while a blocking need can advance** (`premature_finish`): at a state where a blocking need is actionable
  (open, dependencies filled, attempts left) and the tool budget is not spent, did the planner finish? Rate =
  finishes / such states (runs as above).

Both overall and per task family (`by_category`). Runs of the react/memory baselines (no ledger) are left out.

    python -m omnidecision.eval.decisions runs/eval/trajectories.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from omnidecision.ledger import (
    Ledger,
    ToolCalled,
    actionable_need_indices,
    can_advance,
    need_tools,
    sources_to_try,
)
from omnidecision.protocol.records import RunRecord, StepRecord

logger = logging.getLogger(__name__)

KINDS = ("repeat_after_empty", "premature_finish")


@dataclass
class _Tally:
    states: int = 0
    events: int = 0
    runs: set[str] = field(default_factory=set)
    runs_with_event: set[str] = field(default_factory=set)

    def add(self, run_id: str, event: bool) -> None:
        self.states += 1
        self.events += int(event)
        self.runs.add(run_id)
        if event:
            self.runs_with_event.add(run_id)

    def as_dict(self) -> dict[str, Any]:
        return {"states": self.states, "events": self.events,
                "rate": round(self.events / self.states, 4) if self.states else None,
                "runs": len(self.runs), "runs_with_event": len(self.runs_with_event)}


def empty_return_needs(state: Ledger, last_tool: dict[int, str]) -> dict[int, str]:
    """need index → the tool of its last call, for every need whose last call came back without the value while
    another listed source is untried: actionable, unfilled with no value, called before, a listed tool not tried."""
    out = {}
    for i in actionable_need_indices(state):
        need = state.needs[i]
        if need.status != "unfilled" or need.value is not None or i not in last_tool:
            continue
        if any(t not in need.tried for t in need_tools(need)):
            out[i] = last_tool[i]
    return out


def advanceable_blocking(state: Ledger) -> bool:
    """A blocking need is actionable and a tool call can still be made (the budget is not spent)."""
    return can_advance(state) and any(state.needs[i].role == "blocking" for i in actionable_need_indices(state))


def _called(step: StepRecord, state: Ledger) -> tuple[int, str] | None:
    """(need, tool) the step's decision called: the tool that ran (its ToolCalled event), else the decision's tool
    (or the first of the need's `sources=` when it named none: what the loop would run). None: not a need call."""
    for event in step.events:
        if isinstance(event, ToolCalled) and event.need is not None:
            return event.need, event.tool
    action = step.action or {}
    if action.get("action") != "call" or action.get("slot") is not None or not isinstance(action.get("need"), int):
        return None
    need = state.need(action["need"])
    tool = action.get("tool") or (sources_to_try(need)[0] if need is not None else None)
    return (action["need"], tool) if tool else None


def _finished(step: StepRecord) -> bool:
    return (step.action or {}).get("action") == "finish"


def decision_diagnostics(records: Iterable[RunRecord]) -> dict[str, Any]:
    """The two rates over every ledger-mode planner decision of `records`, overall and per task family."""
    tallies: dict[str, dict[str, _Tally]] = defaultdict(lambda: {k: _Tally() for k in KINDS})
    for rec in records:
        if rec.mode != "ledger":
            continue
        last_tool: dict[int, str] = {}
        for step in rec.steps:
            state = step.ledger
            if state is not None and state.initialized:
                called = _called(step, state)
                groups = (tallies["all"], tallies[rec.category or "?"])
                empty = empty_return_needs(state, last_tool)
                if empty:
                    repeat = called is not None and empty.get(called[0]) == called[1]
                    for g in groups:
                        g["repeat_after_empty"].add(rec.run_id, repeat)
                if advanceable_blocking(state):
                    for g in groups:
                        g["premature_finish"].add(rec.run_id, _finished(step))
            for event in step.events:  # what ran at this step is the last call of its need from now on
                if isinstance(event, ToolCalled) and event.need is not None:
                    last_tool[event.need] = event.tool
    overall = tallies.pop("all", None) or {k: _Tally() for k in KINDS}
    return {**{k: overall[k].as_dict() for k in KINDS},
            "by_category": {cat: {k: t[k].as_dict() for k in KINDS} for cat, t in sorted(tallies.items())}}


def _rate(d: dict[str, Any]) -> str:
    if not d["states"]:
        return "– (no such state)"
    return (f"**{100 * d['rate']:.1f}%** of {d['states']} states ({d['events']}); runs with one: "
            f"{d['runs_with_event']} of {d['runs']}")


def decision_lines(diag: dict[str, Any]) -> list[str]:
    """report.md's section: the two rates, then per family where either applies."""
    lines = ["", "## Decisions where the digest says what to do", "",
             f"- repeats the same (need, tool) after it came back without the value, another listed source "
             f"untried: {_rate(diag['repeat_after_empty'])}",
             f"- finishes while a blocking need can still advance: {_rate(diag['premature_finish'])}"]
    rows = [(cat, d) for cat, d in diag["by_category"].items() if any(d[k]["states"] for k in KINDS)]
    if rows:
        lines += ["", "| family | repeat after empty | states | finish while advanceable | states |",
                  "|---|---|---|---|---|"]
        for cat, d in rows:
            cells = []
            for k in KINDS:
                rate = d[k]["rate"]
                cells += ["–" if rate is None else f"{100 * rate:.1f}%", str(d[k]["states"])]
            lines.append(f"| {cat} | " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    from omnidecision.rollout.store import read_records  # (line, record) pairs; a torn last line is skipped

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trajectories", nargs="+")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO)
    print(json.dumps(decision_diagnostics(r for path in a.trajectories for _, r in read_records(path)), indent=1))
