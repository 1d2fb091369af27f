"""The bounded digest: the text the planner, critic and finalizer read instead of a growing history.

Layout "A+I+N" (measured to make a small planner learn far faster, see docs/findings.md): actionable
needs first, each line saying `status=actionable|blocked|…`; then the rest by priority. Lines are added
in priority order until the budget (characters, or tokens with a counter) is reached; what does not fit
is summarised in one "omitted" line. The planner's last rejected decision, if any, is a header line with the
loop's reason and how many times in a row it was rejected. Every number that changes with time has a fixed width
(the step padded to the width of the step budget, at least 2; a need's attempts to the width of `max_attempts`), so
the digest of a fixed ledger has the same length at every step up to the budget, whatever the attempts up to their
cap.

    >>> from omnidecision.ledger import Ledger, render_digest
    >>> print(render_digest(Ledger(question="Who?")).splitlines()[0])
    QUESTION: Who?
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from omnidecision.ledger.readiness import (
    actionable_need_indices,
    blocked_need_indices,
    can_advance,
    composed_query,
    exhausted_need_indices,
    finish_available,
    ready,
    tool_calls_made,
    unblocks,
)
from omnidecision.ledger.schema import SOURCE_TOOL, Ledger, Need


@dataclass(frozen=True)
class DigestBudget:
    """Size cap of the digest. With `count_tokens` set, `max_tokens` is the cap; else `max_chars`."""

    max_chars: int = 3000
    max_tokens: int | None = None
    count_tokens: Callable[[str], int] | None = None
    max_line_chars: int = 240
    max_question_chars: int = 600
    max_failed_calls: int = 4

    def measure(self, text: str) -> int:
        if self.count_tokens is not None and self.max_tokens is not None:
            return self.count_tokens(text)
        return len(text)

    @property
    def limit(self) -> int:
        if self.count_tokens is not None and self.max_tokens is not None:
            return self.max_tokens
        return self.max_chars


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: max(n - 1, 0)] + "…"


def _q(text: str | None, n: int) -> str:
    return json.dumps(_clip(text or "", n), ensure_ascii=False)


def _attempts(state: Ledger, need: Need) -> str:
    return f"attempts={need.attempts:0{len(str(state.max_attempts))}d}/{state.max_attempts}"


def _need_line(state: Ledger, need: Need, label: str, width: int) -> str:
    head = f"[{need.index}] status={label} role={need.role}"
    if label == "actionable":
        query = _q(composed_query(state, need.index), width)
        # what a planner needs beyond the listed tool: other sources, tools already tried, the needs it unblocks
        extra = ""
        if need.alt_sources:
            extra += f" alt=[{','.join(SOURCE_TOOL[s] for s in need.alt_sources)}]"
        if need.tried:
            extra += f" tried=[{','.join(need.tried)}]"
        if waiting := unblocks(state, need.index):
            extra += f" unblocks={waiting}"
        return (f"{head} tool={SOURCE_TOOL[need.preferred_source]}{extra} query={query}"
                f" {_attempts(state, need)} need={_q(need.description, width // 2)}")
    if label == "blocked":
        waits = [d for d in need.depends_on if state.needs[d].status != "filled"]
        return f"{head} waits_on={waits} need={_q(need.description, width // 2)}"
    if label in ("filled", "partial"):
        return f"{head} value={_q(need.value, width // 2)} by={need.filled_by or '-'} need={_q(need.description, 60)}"
    return f"{head} {_attempts(state, need)} need={_q(need.description, width // 2)}"


def _sections(state: Ledger, b: DigestBudget) -> list[list[str]]:
    w = b.max_line_chars
    actionable, blocked = actionable_need_indices(state), blocked_need_indices(state)
    exhausted = set(exhausted_need_indices(state))
    sw = max(2, len(str(state.step_budget)))  # the step's width: fixed for every step up to the budget
    header = [
        f"QUESTION: {_clip(state.question, b.max_question_chars)}",
        f"step={state.step:0{sw}d}/{state.step_budget:0{sw}d} ready={'yes' if ready(state) else 'no'} "
        f"can_advance={'yes' if can_advance(state) else 'no'} "
        f"finish_available={'yes' if finish_available(state) else 'no'}",
        *([f"tool_calls={tool_calls_made(state):0{len(str(state.max_tool_calls))}d}/{state.max_tool_calls}"]
          if state.max_tool_calls is not None else []),
        f"actionable_need_indices={actionable}",
        f"blocked_need_indices={blocked}",
    ]
    if state.last_rejected is not None:
        # the planner sees its own rejected decision and why, so the next decision can differ
        r = state.last_rejected
        header.append(f"rejected x{r.streak}: {_clip(r.decision, 120)} because {_clip(r.reason, 160)}")
    lines_act = [_need_line(state, state.needs[i], "actionable", w) for i in actionable]
    lines_blk = [_need_line(state, state.needs[i], "blocked", w) for i in blocked]
    rest = []
    for n in state.needs:
        if n.index in actionable or n.index in blocked:
            continue
        rest.append(_need_line(state, n, "exhausted" if n.index in exhausted else n.status, w))
    conflicts = [
        f"conflict#{c.id} on {'need ' + str(c.need) if c.need is not None else 'slot ' + str(c.slot)}: "
        + " vs ".join(f"{_q(v.value, 40)} ({v.source.label()})" for v in c.values)
        for c in state.conflicts
        if not c.resolved
    ]
    slots = [
        f"slot {s.name} ({s.kind}) value={_q(s.value, 60)} verified={'yes' if s.verified else 'no'}"
        + (f" expr={_q(s.expression, 80)}" if s.expression else "")
        for s in state.slots
    ]
    counts = ",".join(f"{k}={v}" for k, v in sorted(state.tool_call_counts.items())) or "none"
    misc = [f"tool_call_counts: {counts}"]
    if state.gap_diagnosis:
        misc.append(f"gap_diagnosis: {_clip(state.gap_diagnosis, w)}")
    failed = [
        f"failed: need {f.need} {f.tool} query={_q(f.query, 80)} error={_q(f.error, 60)}"
        for f in state.failed_calls[-b.max_failed_calls :]
    ]
    evidence = [f"evidence#{e.id} [{e.source.label()}] {_clip(e.claim, w)}" for e in reversed(state.evidence)]
    return [header, lines_act, lines_blk, conflicts, rest, slots, misc, failed, evidence]


def render_digest(state: Ledger, budget: DigestBudget | None = None) -> str:
    """Render `state` within `budget`; the result always measures at most `budget.limit`."""
    b = budget or DigestBudget()
    # Every line but the question is clipped to max_line_chars; the question has its own cap.
    flat = [line for section in _sections(state, b) for line in section]
    lines = flat[:1] + [_clip(line, b.max_line_chars) for line in flat[1:]]
    kept, omitted = _fit(lines, b, reserve="")
    if omitted:  # second pass, keeping room for the note that says how much was left out
        kept, omitted = _fit(lines, b, reserve="\n(+9999 lines omitted for size)")
        kept.append(f"(+{omitted} lines omitted for size)")
    text = "\n".join(kept)
    if b.measure(text) > b.limit:  # only when the header alone is over budget
        text = _truncate_to(text, b)
    return text


def _fit(lines: list[str], b: DigestBudget, reserve: str) -> tuple[list[str], int]:
    """Greedy: keep lines in priority order while the text (plus `reserve`) stays within budget."""
    kept: list[str] = []
    omitted = 0
    used = len(reserve)  # chars so far (exact for the char budget: one newline between lines)
    for line in lines:
        if b.count_tokens is None or b.max_tokens is None:
            fits = used + (1 if kept else 0) + len(line) <= b.limit
        else:
            fits = b.measure("\n".join([*kept, line]) + reserve) <= b.limit
        if fits:
            used += (1 if kept else 0) + len(line)
            kept.append(line)
        else:
            omitted += 1
    return kept, omitted


def _truncate_to(text: str, b: DigestBudget) -> str:
    lo, hi = 0, len(text)
    while lo < hi:  # longest prefix within budget (the measure is monotone in the prefix length)
        mid = (lo + hi + 1) // 2
        if b.measure(text[:mid]) <= b.limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
