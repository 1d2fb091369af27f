"""The bounded digest: the text the planner, critic and finalizer read instead of a growing history.

The header starts with the task's immutable context R0 (when the ledger has one): the assets (id, type, duration),
the options, the answer format and, when the task restricts them, the tools it allows. R0 lines have their own caps
(options up to `max_question_chars`, assets up to `max_line_chars`), so R0 never grows the digest past its budget.
Layout "A+I+N" (measured to make a small planner learn far faster, see docs/research/tiny-planner.md): actionable needs
first (then the slots a call can verify), each line saying `status=actionable|blocked|…`; then the rest by priority.
Lines are added in priority order until the budget (characters, or tokens with a counter) is reached; what does not
fit is summarised in one "omitted" line. A header or actionable line that does not fit whole is cut to the room left
(when at least `MIN_CLIPPED_LINE` characters fit) rather than dropped for a shorter line of lower priority.
The planner's last rejected decision, if any, is a header line with the loop's reason and how many times in a row
it was rejected. Every number that changes with time has a fixed width
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
    SLOT_TOOL,
    actionable_need_indices,
    actionable_slot_names,
    blocked_need_indices,
    can_advance,
    composed_query,
    exhausted_need_indices,
    finish_available,
    ready,
    sources_to_try,
    tool_calls_made,
    unblocks,
)
from omnidecision.ledger.schema import Ledger, Need, Slot, TaskContext


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
    head = f"[{need.index}] status={label} role={need.role}" + (f" asset={need.asset_id}" if need.asset_id else "")
    if label == "actionable":
        query = _q(composed_query(state, need.index), width)
        # the listed sources still to try (all of them once each was tried: `sources_to_try`) and how many tools were
        # tried, right after the index: the tiny planner copies the tool from a short fixed offset of the line it
        # names, and picks among tool names on that line by the need's wording rather than by their position. With
        # `tool=`/`alt=`/`tried=[names]` (or every source, untried first) a switch after an empty return put two tool
        # names on the line and no rule-labelled planner learnt it (docs/research/source-switch.md, "The switch as a
        # copy"); the tried tools' names are in `tool_call_counts` and the evidence.
        extra = f" sources=[{','.join(sources_to_try(need))}]"
        if need.tried:
            extra += f" tried={len(set(need.tried))}"
        if waiting := unblocks(state, need.index):
            extra += f" unblocks={waiting}"
        rest = head.removeprefix(f"[{need.index}]")
        return (f"[{need.index}]{extra}{rest} query={query}"
                f" {_attempts(state, need)} need={_q(need.description, width // 2)}")
    if label == "blocked":
        waits = [d for d in need.depends_on if state.needs[d].status != "filled"]
        return f"{head} waits_on={waits} need={_q(need.description, width // 2)}"
    if label in ("filled", "partial"):
        return f"{head} value={_q(need.value, width // 2)} by={need.filled_by or '-'} need={_q(need.description, 60)}"
    return f"{head} {_attempts(state, need)} need={_q(need.description, width // 2)}"


def _duration(seconds: float | None) -> str:
    return "" if seconds is None else f" {seconds:.1f}s"


def context_lines(context: TaskContext | None, b: DigestBudget) -> list[str]:
    """R0, each line within its own cap: assets, options, answer format, allowed tools (when restricted)."""
    if context is None:
        return []
    lines = []
    if context.assets:
        assets = "; ".join(f"{a.id} ({a.type}{_duration(a.duration)})" for a in context.assets)
        lines.append(_clip(f"ASSETS: {assets}", b.max_line_chars))
    if context.options:
        lines.append(_clip("OPTIONS: " + " | ".join(context.options), b.max_question_chars))
    if context.answer_format:
        lines.append(_clip(f"ANSWER_FORMAT: {context.answer_format}", b.max_line_chars))
    if context.tools is not None:
        lines.append(_clip("TOOLS: " + (", ".join(context.tools) or "none"), b.max_line_chars))
    return lines


def _slot_line(state: Ledger, s: Slot, actionable: bool) -> str:
    head = f"slot {s.name} ({s.kind})"
    if actionable:  # a call aimed at the slot computes it from its (filled) needs
        head += f" status=actionable tool={SLOT_TOOL} needs={s.needs} "
        head += f"attempts={s.attempts:0{len(str(state.max_attempts))}d}/{state.max_attempts}"
    return (head + f" value={_q(s.value, 60)} verified={'yes' if s.verified else 'no'}"
            + (f" expr={_q(s.expression, 80)}" if s.expression else ""))


def _sections(state: Ledger, b: DigestBudget) -> tuple[list[str], list[list[str]]]:
    """(the header, each line already within its cap; the other sections in priority order)."""
    w = b.max_line_chars
    actionable, blocked = actionable_need_indices(state), blocked_need_indices(state)
    slots_open = actionable_slot_names(state)
    exhausted = set(exhausted_need_indices(state))
    sw = max(2, len(str(state.step_budget)))  # the step's width: fixed for every step up to the budget
    control = [
        f"step={state.step:0{sw}d}/{state.step_budget:0{sw}d} ready={'yes' if ready(state) else 'no'} "
        f"can_advance={'yes' if can_advance(state) else 'no'} "
        f"finish_available={'yes' if finish_available(state) else 'no'}",
        *([f"tool_calls={tool_calls_made(state):0{len(str(state.max_tool_calls))}d}/{state.max_tool_calls}"]
          if state.max_tool_calls is not None else []),
        f"actionable_need_indices={actionable}",
        f"blocked_need_indices={blocked}",
    ]
    if slots_open:
        control.append(f"actionable_slot_names={slots_open}")
    if state.last_rejected is not None:
        # the planner sees its own rejected decision and why, so the next decision can differ
        r = state.last_rejected
        control.append(f"rejected x{r.streak}: {_clip(r.decision, 120)} because {_clip(r.reason, 160)}")
    header = [f"QUESTION: {_clip(state.question, b.max_question_chars)}", *context_lines(state.context, b),
              *(_clip(line, w) for line in control)]
    lines_act = [_need_line(state, state.needs[i], "actionable", w) for i in actionable]
    lines_act += [_slot_line(state, s, True) for s in state.slots if s.name in slots_open]
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
    slots = [_slot_line(state, s, False) for s in state.slots if s.name not in slots_open]
    counts = ",".join(f"{k}={v}" for k, v in sorted(state.tool_call_counts.items())) or "none"
    misc = [f"tool_call_counts: {counts}"]
    if state.gap_diagnosis:
        misc.append(f"gap_diagnosis: {_clip(state.gap_diagnosis, w)}")
    failed = [
        f"failed: {'need ' + str(f.need) if f.need is not None else 'slot ' + str(f.slot)} {f.tool} "
        f"query={_q(f.query, 80)} error={_q(f.error, 60)}"
        for f in state.failed_calls[-b.max_failed_calls :]
    ]
    evidence = [f"evidence#{e.id} [{e.source.label()}] {_clip(e.claim, w)}" for e in reversed(state.evidence)]
    return header, [lines_act, lines_blk, conflicts, rest, slots, misc, failed, evidence]


def render_digest(state: Ledger, budget: DigestBudget | None = None) -> str:
    """Render `state` within `budget`; the result always measures at most `budget.limit`."""
    b = budget or DigestBudget()
    # Header lines come clipped to their own caps (the question and the options have larger ones); every other
    # line is clipped to max_line_chars.
    header, sections = _sections(state, b)
    lines = header + [_clip(line, b.max_line_chars) for section in sections for line in section]
    first = len(header) + len(sections[0])  # the header and the actionable lines: clipped rather than dropped
    kept, omitted = _fit(lines, b, reserve="", clip_first=first)
    if omitted:  # second pass, keeping room for the note that says how much was left out
        kept, omitted = _fit(lines, b, reserve="\n(+9999 lines omitted for size)", clip_first=first)
        kept.append(f"(+{omitted} lines omitted for size)")
    text = "\n".join(kept)
    if b.measure(text) > b.limit:  # only when the header alone is over budget
        text = _truncate_to(text, b)
    return text


# An actionable line cut to the room left keeps at least its head: index, status, role, asset and the tool fields.
MIN_CLIPPED_LINE = 80


def _fits(kept: list[str], line: str, used: int, reserve: str, b: DigestBudget) -> bool:
    if b.count_tokens is None or b.max_tokens is None:
        return used + (1 if kept else 0) + len(line) <= b.limit
    return b.measure("\n".join([*kept, line]) + reserve) <= b.limit


def _fit(lines: list[str], b: DigestBudget, reserve: str, clip_first: int = 0) -> tuple[list[str], int]:
    """Greedy: keep lines in priority order while the text (plus `reserve`) stays within budget. One of the first
    `clip_first` lines (the header and the actionable needs) that does not fit whole is cut to the room left when
    at least `MIN_CLIPPED_LINE` characters of it fit: a planner must see the line of every need it may call (the
    fields it acts on come first on the line), and a greedy fit would otherwise keep a later, shorter line of
    lower priority (a blocked need, a slot) in its place."""
    kept: list[str] = []
    omitted = 0
    used = len(reserve)  # chars so far (exact for the char budget: one newline between lines)
    for k, line in enumerate(lines):
        if not _fits(kept, line, used, reserve, b) and k < clip_first:
            lo, hi = 0, len(line) - 1  # the longest clipped prefix ("…" at its end) that fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if _fits(kept, line[: mid - 1] + "…", used, reserve, b):
                    lo = mid
                else:
                    hi = mid - 1
            if lo >= MIN_CLIPPED_LINE:
                line = line[: lo - 1] + "…"
        if _fits(kept, line, used, reserve, b):
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
