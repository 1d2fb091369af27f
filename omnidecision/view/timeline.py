"""One run as the viewer shows it: per step the digest, the decision (rejected or not, and why), the observation,
the critic's verdicts and the ledger after the step; the needs' statuses as a grid across steps; the ending.

The ledger after a step is the pure reducer applied to the snapshot the planner saw and the step's events (the
replay contract of the run record), so what the page shows is what the agent committed.

    python -m omnidecision.view.timeline runs/eval-teacher/trajectories.jsonl   # one line per step of the 1st run
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnidecision.ledger import EventRejected, Ledger, reduce
from omnidecision.ledger.events import FinalizerChecked, InvalidAction, LedgerEvent, ToolCalled
from omnidecision.ledger.readiness import actionable_need_indices, blocked_need_indices
from omnidecision.ledger.schema import SourceRef
from omnidecision.view.load import RunRecord, StepRecord, read_jsonl


def source_label(src: SourceRef | None) -> str:
    """`tool · asset-or-url`, the time window shown separately by `time_window`."""
    if src is None:
        return ""
    where = src.asset_id or src.url or ""
    return f"{src.tool} · {where}" if where else src.tool


def time_window(src: SourceRef | None) -> str:
    """`12.5–14 s` for a source with a span, `from 12.5 s` with only a start, else ''.

    >>> time_window(SourceRef(tool="clip_grounding", asset_id="v0", start=12.5, end=14.0))
    '12.5–14 s'
    """
    if src is None or src.start is None:
        return ""
    return f"{src.start:g}–{src.end:g} s" if src.end is not None else f"from {src.start:g} s"


def digest_of(step: StepRecord) -> str:
    """The text the planner read at this step: its last user message."""
    for m in reversed(step.planner_messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):  # multimodal content parts: keep the text parts
                return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _after(before: Ledger | None, events: list[LedgerEvent], fallback: Ledger | None) -> Ledger | None:
    if before is None:
        return fallback
    state = before
    try:
        for e in events:
            state = reduce(state, e)
    except EventRejected:  # a record that does not replay: show the next recorded snapshot instead
        return fallback
    return state


@dataclass
class StepView:
    record: StepRecord
    digest: str
    kind: str  # call | finish | invalid | none
    decision: str  # one line: what the planner decided, with the resolved tool and query
    rejected: str | None  # why the loop rejected the decision (not executed), or None
    tool_call: ToolCalled | None
    finalizer: FinalizerChecked | None
    invalid_events: list[InvalidAction]
    before: Ledger | None
    after: Ledger | None
    new_evidence: set[int] = field(default_factory=set)
    changed_needs: set[int] = field(default_factory=set)
    actionable: list[int] = field(default_factory=list)
    blocked: list[int] = field(default_factory=list)

    @property
    def ledger_changed(self) -> bool:
        """Whether the step changed the needs, evidence, conflicts or slots (not just the counters)."""
        if self.before is None or self.after is None:
            return self.after is not None
        b, a = self.before, self.after
        return (a.needs, a.evidence, a.conflicts, a.slots) != (b.needs, b.evidence, b.conflicts, b.slots)

    @property
    def target(self) -> int | None:
        if self.tool_call is not None:
            return self.tool_call.need
        need = (self.record.action or {}).get("need")
        return need if isinstance(need, int) else None


@dataclass
class GridRow:
    index: int
    description: str
    role: str
    cells: list[tuple[str, str, bool]]  # (status, value, targeted at that column's step)


@dataclass
class RunView:
    record: RunRecord
    initial: Ledger | None
    steps: list[StepView]
    final_after: Ledger | None  # after the final events (the recorded final ledger)
    columns: list[str]  # grid columns: "init" (after decompose), each step's number, "end" after final events
    grid: list[GridRow]
    finalizer: FinalizerChecked | None  # the last finalizer check of the run
    final_invalid: list[InvalidAction]

    @property
    def correct(self) -> str:
        return correct_label(self.record)


def correct_label(record: RunRecord) -> str:
    """correct | wrong | unjudged (no judge, or the judge failed: never counted as correct)."""
    if record.judge is None or record.judge.correct is None:
        return "unjudged"
    return "correct" if record.judge.correct else "wrong"


def _decision(step: StepRecord, tool_call: ToolCalled | None) -> tuple[str, str]:
    action = step.action or {}
    if action.get("action") == "finish":
        return "finish", "finish"
    if action.get("action") == "call":
        need = action.get("need")
        tool = tool_call.tool if tool_call else action.get("tool") or "(need's tool)"
        query = tool_call.query if tool_call else action.get("query")
        return "call", f"call need {need} · {tool}" + (f" · “{query}”" if query else "")
    if step.invalid:
        return "invalid", "unparsable output"
    return "none", "no decision"


def _step_view(step: StepRecord, after: Ledger | None) -> StepView:
    tool_call = next((e for e in step.events if isinstance(e, ToolCalled)), None)
    finalizer = next((e for e in reversed(step.events) if isinstance(e, FinalizerChecked)), None)
    kind, decision = _decision(step, tool_call)
    rejected = step.invalid
    if rejected is None and kind == "finish" and finalizer is not None and not finalizer.passed:
        rejected = f"finish not accepted: {finalizer.diagnosis or 'the finalizer check failed'}"
    before = step.ledger
    view = StepView(record=step, digest=digest_of(step), kind=kind, decision=decision, rejected=rejected,
                    tool_call=tool_call, finalizer=finalizer,
                    invalid_events=[e for e in step.events if isinstance(e, InvalidAction)], before=before,
                    after=after)
    if before is not None and after is not None:
        view.new_evidence = {a.id for a in after.evidence[len(before.evidence):]}
        view.changed_needs = {n.index for n in after.needs
                              if n.index >= len(before.needs) or n != before.needs[n.index]}
        view.actionable, view.blocked = actionable_need_indices(before), blocked_need_indices(before)
    return view


def build(record: RunRecord) -> RunView:
    """The view of one run (never raises on a record that does not replay: it falls back to the snapshots)."""
    initial = record.steps[0].ledger if record.steps and record.steps[0].ledger is not None else None
    if initial is None and record.initial_events:
        initial = _after(Ledger(), list(record.initial_events), None)
    steps: list[StepView] = []
    for i, step in enumerate(record.steps):
        nxt = record.steps[i + 1].ledger if i + 1 < len(record.steps) else None
        fallback = nxt if nxt is not None or record.final_events else record.final_ledger
        steps.append(_step_view(step, _after(step.ledger, list(step.events), fallback)))
    last = steps[-1].after if steps else initial
    final_after = record.final_ledger if record.final_ledger is not None else last
    # the needs grid: one column per committed state
    states: list[tuple[str, Ledger | None, int | None]] = [("init", initial, None)]
    states += [(str(s.record.step), s.after, s.target) for s in steps]
    if record.final_events and final_after is not None:
        states.append(("end", final_after, None))
    n_needs = max((len(st.needs) for _, st, _ in states if st is not None), default=0)
    grid: list[GridRow] = []
    for i in range(n_needs):
        latest = next((st.needs[i] for _, st, _ in reversed(states) if st is not None and i < len(st.needs)), None)
        cells = []
        for _, st, target in states:
            need = st.needs[i] if st is not None and i < len(st.needs) else None
            cells.append((need.status if need else "", (need.value or "") if need else "", target == i))
        grid.append(GridRow(index=i, description=latest.description if latest else "",
                            role=latest.role if latest else "", cells=cells))
    all_events = [e for s in record.steps for e in s.events] + list(record.final_events)
    finalizer = next((e for e in reversed(all_events) if isinstance(e, FinalizerChecked)), None)
    return RunView(record=record, initial=initial, steps=steps, final_after=final_after,
                   columns=[c for c, _, _ in states], grid=grid, finalizer=finalizer,
                   final_invalid=[e for e in record.final_events if isinstance(e, InvalidAction)])


def summary_row(record: RunRecord) -> dict[str, Any]:
    """The fields of a run that the index lists and filters on."""
    return {"task_id": record.task_id, "sample": record.sample, "question": record.question,
            "level": record.level, "category": record.category, "outcome": record.outcome,
            "correct": correct_label(record), "steps": len(record.steps),
            "tool_calls": sum(record.totals.tool_calls.values()), "answer": record.answer or "",
            "gold": record.gold_answer or "", "mode": record.mode}


if __name__ == "__main__":
    problems: list[str] = []
    runs = read_jsonl(Path(sys.argv[1]), problems)
    if runs:
        v = build(runs[0])
        for s in v.steps:
            print(f"step {s.record.step}: {s.decision}" + (f"  [rejected: {s.rejected}]" if s.rejected else ""))
        print("grid columns:", v.columns)
    print("\n".join(problems), file=sys.stderr)
