"""Closure checks: small pure functions of (decision, ledger state) -> score in [0, 1], registered by name.

Each check states a condition that follows from the ledger's semantics and the run so far; none asks what a
particular planner would do (this package never imports the rule planner: tests/architecture holds the rule). A
`Decision` is one planner completion, parsed once with the agent's own parser. Every check scores the decision
against the ledger the planner saw, WITHOUT executing it. Rules shared by the call checks (`_gate`):

- an unparseable decision scores 0 everywhere;
- a `finish` scores what the finish check scores (1 when finishing is sound, else 0), so a premature
  finish cannot collect the call checks for free and a sound finish is not outscored by a needless call;
- a call while finishing is sound (`finish_available`: ready, or no need can really advance) scores 0;
- a call on a need that is not actionable (filled, blocked, exhausted, unknown) scores 0;
- otherwise the check judges the call itself.

A check is one function decorated with `@register_check(name, weight)`, which puts it in the one reward registry
(`rewards/registry.py`); `CHECKS` and `DEFAULT_WEIGHTS` (the closure rubric's components) and each check's TRL
reward function are derived from it (docs/architecture.md, "How to add a reward check").

    >>> s = example_ledger()
    >>> [finish_check(Decision.parse(t), s) for t in ('{"action": "finish"}', '{"action": "call", "need": 0}')]
    [0.0, 1.0]

Run the doctests: `.venv/bin/pytest --doctest-modules omnidecision/rewards`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from omnidecision.ledger import (
    SLOT_TOOL,
    SOURCE_TOOL,
    Conflict,
    ConflictValue,
    Ledger,
    Need,
    SourceRef,
    actionable_need_indices,
    actionable_slot_names,
    calls_required,
    composed_query,
    finish_available,
    need_tools,
    tool_calls_left,
)
from omnidecision.ledger.readiness import STAND_IN_TOOLS
from omnidecision.protocol.actions import (
    PRIMARY_FIELD,
    CallAction,
    effective_tool,
    extract_json_object,
)
from omnidecision.rewards.decision import Decision, completion_text, ledgers_column, load_ledger  # noqa: F401
from omnidecision.rewards.registry import (  # noqa: F401  (re-exported: a check's module names its registry)
    CHECKS,
    DEFAULT_WEIGHTS,
    Check,
    get_check_reward,
    register_check,
    unregister_check,
)

_THINK = re.compile(r"<think>.*?</think>", flags=re.S)
_TOKEN = re.compile(r"\w+", flags=re.U)


def example_ledger(conflict: bool = False) -> Ledger:
    """The doctests' ledger: need 0 (blocking, audio, `alt` subtitle) came back empty from audio once; need 1 (web)
    waits on it; need 2 is supplementary; the task allows 3 tool calls and one is spent. With `conflict`, need 0
    holds two competing values, both from the subtitles."""
    needs = [Need(index=0, description="narrator name", query_focus="narrator name", preferred_source="audio",
                  alt_sources=["subtitle"], tried=["audio_scouting"], attempts=1),
             Need(index=1, description="birth year", query_focus="birth year of {#0}", depends_on=[0]),
             Need(index=2, description="background sound", query_focus="sound", preferred_source="audio",
                  role="supplementary")]
    conflicts = []
    if conflict:
        needs[0] = needs[0].model_copy(update={"tried": ["subtitle_grounding"], "status": "partial"})
        src = SourceRef(tool="subtitle_grounding")
        conflicts = [Conflict(id=0, need=0, values=[ConflictValue(value="Ada", source=src),
                                                    ConflictValue(value="Ida", source=src)])]
    return Ledger(question="In which year was the narrator of the clip born?", needs=needs, conflicts=conflicts,
                  max_tool_calls=3, tool_call_counts={"audio_scouting": 1}, initialized=True)


def tokens(text: str | None) -> list[str]:
    return _TOKEN.findall((text or "").lower())


def token_f1(a: str | None, b: str | None) -> float:
    """Bag-of-words F1 between two texts (lower-cased word tokens).

    >>> token_f1("birth year of Ada", "Ada birth year")
    0.857
    """
    ta, tb = tokens(a), tokens(b)
    if not ta or not tb:
        return 1.0 if not ta and not tb else 0.0
    common = 0
    pool = list(tb)
    for t in ta:
        if t in pool:
            pool.remove(t)
            common += 1
    if not common:
        return 0.0
    p, r = common / len(ta), common / len(tb)
    return round(2 * p * r / (p + r), 3)


def effective_query(state: Ledger, action: CallAction) -> str | None:
    """The query the call runs: `query`, else the tool's primary argument, else the composed query."""
    if action.query is not None:
        return action.query
    if action.arguments:
        tool = effective_tool(state, action) or ""
        value = action.arguments.get(PRIMARY_FIELD.get(tool, "query"))
        if value is not None:
            return str(value)
    if state.need(action.need) is None:
        return None
    return composed_query(state, action.need)


def _gate(decision: Decision, state: Ledger, actionable_only: bool = True) -> float | None:
    """The shared rules of the call checks: a final score, or None when the call itself must be judged."""
    if decision.action is None:
        return 0.0
    sound_finish = finish_available(state)
    if decision.is_finish:
        return 1.0 if sound_finish else 0.0
    if sound_finish:
        return 0.0
    action = decision.action
    if action.slot is not None:  # a slot call: right when the slot is actionable, no need is, and code computes it
        ok = (action.slot in actionable_slot_names(state) and not actionable_need_indices(state)
              and (action.tool or SLOT_TOOL) == SLOT_TOOL)
        return 1.0 if ok else 0.0
    if state.need(decision.action.need) is None:
        return 0.0
    if actionable_only and decision.action.need not in actionable_need_indices(state):
        return 0.0  # a call that cannot advance the ledger earns nothing for being well-formed
    return None


def _gated(actionable_only: bool = True) -> Callable[[Check], Check]:
    """A call check that judges the call alone: `_gate`'s final score first (no decision, a finish, a slot call, a
    need that is not there or, with `actionable_only`, not actionable), the check itself only where it gives none."""

    def wrap(judge: Check) -> Check:
        @functools.wraps(judge)
        def check(decision: Decision, state: Ledger) -> float:
            gated = _gate(decision, state, actionable_only=actionable_only)
            return gated if gated is not None else judge(decision, state)

        return check

    return wrap


# ---- the checks ------------------------------------------------------------------------------------------------


@register_check("format", weight=1.0)
def format_check(decision: Decision, state: Ledger) -> float:
    """1 for exactly one schema-valid JSON action and nothing else; 0.5 when valid JSON is wrapped in extra text
    (prose, a repeated action); 0 when nothing parses (empty output, unknown tool, bad schema).

    >>> format_check(Decision.parse('{"action": "finish"}'), Ledger())
    1.0
    >>> format_check(Decision.parse('{"action": "finish"} {"action": "finish"}'), Ledger())
    0.5
    >>> format_check(Decision.parse('{"action": "call", "need": 0, "tool": "telepathy"}'), Ledger())
    0.0
    """
    if decision.action is None:
        return 0.0
    body = _THINK.sub("", decision.text).strip()
    blob = extract_json_object(body)
    return 1.0 if blob is not None and blob == body else 0.5


@register_check("finish", weight=2.0)
def finish_check(decision: Decision, state: Ledger) -> float:
    """Stop or continue: finish only when the ledger is ready or nothing can advance; call otherwise. So no finish or
    abstention while a blocking need can still advance within the budget.

    >>> s = example_ledger()
    >>> [finish_check(Decision.parse(t), s) for t in ('{"action": "finish"}', '{"action": "call", "need": 0}')]
    [0.0, 1.0]
    """
    if decision.action is None:
        return 0.0
    return 1.0 if decision.is_finish == finish_available(state) else 0.0


@register_check("target", weight=1.5)
@_gated(actionable_only=False)
def target_check(decision: Decision, state: Ledger) -> float:
    """The call targets an actionable need (open, dependencies filled, attempts left): 1; an actionable
    supplementary need while an actionable blocking one waits (readiness depends on the blocking ones): 0.5; a
    filled, blocked, exhausted or unknown need: 0.

    >>> s = example_ledger()
    >>> [target_check(Decision.parse('{"action": "call", "need": %d}' % i), s) for i in (0, 2, 1)]
    [1.0, 0.5, 0.0]
    """
    actionable = actionable_need_indices(state)
    index = decision.action.need  # type: ignore[union-attr]
    if index not in actionable:
        return 0.0
    blocking = [i for i in actionable if state.needs[i].role == "blocking"]
    return 0.5 if blocking and state.needs[index].role != "blocking" else 1.0


@register_check("tool", weight=1.0)
@_gated()
def tool_check(decision: Decision, state: Ledger) -> float:
    """The tool can serve the need: it is the tool of one of the need's listed sources (preferred source or
    `alt_sources`; page_reader stands in for web_search; an omitted tool is the one the loop runs, the first of
    the line's `sources=`), and it does not repeat a source that already came back without the value while a
    listed source is still untried (after an empty source, the need's other listed source): 1. Otherwise 0.

    >>> s = example_ledger()  # need 0: audio came back empty, subtitles untried
    >>> [tool_check(Decision.parse('{"action": "call", "need": 0, "tool": "%s"}' % t), s)
    ...  for t in ("subtitle_grounding", "audio_scouting", "web_search")]
    [1.0, 0.0, 0.0]
    >>> tool_check(Decision.parse('{"action": "call", "need": 0}'), s)  # no tool: the untried subtitles run
    1.0
    """
    action = decision.action
    need = state.needs[action.need]  # type: ignore[union-attr]
    tool = effective_tool(state, action)  # type: ignore[arg-type]
    listed = need_tools(need)
    fits = [t for t in listed if tool == t or tool in STAND_IN_TOOLS.get(t, ())]
    if not fits:
        return 0.0
    untried = [t for t in listed if t not in need.tried]
    repeat = all(t in need.tried for t in fits)
    return 0.0 if repeat and untried else 1.0


@register_check("budget", weight=1.0)
@_gated()
def budget_check(decision: Decision, state: Ledger) -> float:
    """The remaining tool budget still covers the blocking needs after this call: a call on a supplementary need
    that leaves fewer calls than the open blocking needs (and computation slots) require scores 0; 1 otherwise
    (and always without a budget).

    >>> s = example_ledger()  # 2 calls left, 2 blocking needs open
    >>> [budget_check(Decision.parse('{"action": "call", "need": %d}' % i), s) for i in (0, 2)]
    [1.0, 0.0]
    """
    left = tool_calls_left(state)
    need = state.needs[decision.action.need]  # type: ignore[union-attr]
    if left is None or need.role == "blocking":
        return 1.0
    return 1.0 if left - 1 >= calls_required(state) else 0.0


@register_check("conflict", weight=1.0)
@_gated()
def conflict_check(decision: Decision, state: Ledger) -> float:
    """A call on a need with an open conflict goes to an independent source: a tool none of the competing values
    came from (asking the same kind of source again settles nothing): 1; a source already in the dispute: 0. A need
    without an open conflict: 1.

    >>> s = example_ledger(conflict=True)  # both values came from the subtitles
    >>> [conflict_check(Decision.parse('{"action": "call", "need": 0, "tool": "%s"}' % t), s)
    ...  for t in ("audio_scouting", "subtitle_grounding")]
    [1.0, 0.0]
    """
    action = decision.action
    disputed = [c for c in state.conflicts if c.need == action.need and not c.resolved]  # type: ignore[union-attr]
    if not disputed:
        return 1.0
    tool = effective_tool(state, action)  # type: ignore[arg-type]
    used = {v.source.tool for c in disputed for v in c.values}
    return 0.0 if tool in used else 1.0


@register_check("query", weight=1.0)
@_gated()
def query_check(decision: Decision, state: Ledger) -> float:
    """The query is built from the need's `query_focus` and filled anchor values, not the question verbatim.

    Score = token F1 with the composed query, times the share of anchor values the query contains (an anchor
    whose need is not filled yet counts as missing);
    0 when the query overlaps the question more than the composed query (the question pasted as query).
    An omitted query scores 1: the tool layer composes it.

    >>> s = example_ledger()
    >>> call = '{"action": "call", "need": 0, "tool": "subtitle_grounding", "query": "%s"}'
    >>> [query_check(Decision.parse(call % q), s) for q in ("narrator name", s.question)]
    [1.0, 0.0]
    """
    action: CallAction = decision.action  # type: ignore[assignment]
    query = effective_query(state, action)
    composed = composed_query(state, action.need)
    if not tokens(query):
        return 0.0
    f_composed, f_question = token_f1(query, composed), token_f1(query, state.question)
    if f_question > f_composed:
        return 0.0
    need = state.needs[action.need]
    # anchors: the upstream needs the focus refers to; one without a value yet cannot be in any sound query
    anchors = [d.value for d in state.needs if "{#%d}" % d.index in need.query_focus]
    qtok = set(tokens(query))
    coverage = sum(bool(a) and set(tokens(a)) <= qtok for a in anchors) / len(anchors) if anchors else 1.0
    return round(f_composed * coverage, 3)


@register_check("no_repeat", weight=1.0)
@_gated()
def no_repeat_check(decision: Decision, state: Ledger) -> float:
    """0 when the call repeats one that already failed for the same need (same tool, same query), else 1.

    >>> from omnidecision.ledger import FailedCall
    >>> s = example_ledger().model_copy(update={"failed_calls": [FailedCall(need=0, tool="audio_scouting")]})
    >>> [no_repeat_check(Decision.parse(t), s) for t in ('{"action": "call", "need": 0, "tool": "audio_scouting"}',
    ...  '{"action": "call", "need": 0, "tool": "audio_scouting", "query": "who narrates"}',
    ...  '{"action": "call", "need": 0}')]  # no tool: the loop calls the untried subtitles
    [0.0, 1.0, 1.0]
    """
    action: CallAction = decision.action  # type: ignore[assignment]
    tool, query = effective_tool(state, action), _norm(effective_query(state, action))
    for failed in state.failed_calls:
        if failed.need != action.need or failed.tool != tool:
            continue
        failed_query = _norm(failed.query if failed.query is not None else composed_query(state, failed.need))
        if failed_query == query:
            return 0.0
    return 1.0


@register_check("modality", weight=0.5)
@_gated()
def modality_check(decision: Decision, state: Ledger) -> float:
    """Prefer the least-used modality among the needs worth calling now (actionable blocking needs, else all
    actionable ones): 1 when the targeted need's modality has the lowest call count among theirs, 0.5 otherwise;
    0 when the tool does not fit the need (an unused tool on the wrong need is a wrong call, not a new modality:
    rewarding it would pull the policy away from the need's source).

    >>> s = example_ledger()
    >>> [modality_check(Decision.parse('{"action": "call", "need": 0, "tool": "%s"}' % t), s)
    ...  for t in ("subtitle_grounding", "audio_scouting")]
    [1.0, 0.0]
    """
    action: CallAction = decision.action  # type: ignore[assignment]
    if tool_check(decision, state) < 1.0:
        return 0.0
    actionable = actionable_need_indices(state)
    pool = [i for i in actionable if state.needs[i].role == "blocking"] or actionable
    if action.need not in pool:
        return 0.5
    counts = state.tool_call_counts
    least = min(counts.get(SOURCE_TOOL[state.needs[i].preferred_source], 0) for i in pool)
    return 1.0 if counts.get(SOURCE_TOOL[state.needs[action.need].preferred_source], 0) <= least else 0.5


def _norm(text: str | None) -> str:
    return " ".join(tokens(text))
