"""The ledger loop (Algorithm 1): decompose → repeat {planner → tool → critic → reducer} → finish → finalizer.

One module holds one ledger-mode run from its first role call to its record: the run's bookkeeping (`Run`: backend
lookup by role, LLM calls with usage/latency/cost accounting, tool calls that never raise, totals; the react and
memory baselines use it too), the messages of the decompose, critic and finalizer roles, each role call (`ask`),
the commit point and the loop itself. `agent.loop.run_task` starts a run in any mode; `continue_run` goes on from a
restored state (`omnidecision.branch`). Neither raises: a dead backend or any bug ends the run with outcome `error`
and the reason. docs/architecture.md says why these sit together.

The reducer is the only writer of the ledger: every role output is turned into typed events that go through
`commit` (an event the reducer rejects becomes the role's `InvalidAction`: `invalid_event`). Stop outcomes are
derived from the ledger only:

- accepted: the finalizer's check passed;
- insufficient: the ledger is not ready and nothing can advance (checked before each planner call, so the
  planner is not asked);
- forced: the finalizer check failed `revision_budget + 1` times; the best drafted value is returned;
- budget: `step_budget` planner steps spent, or the tool calls allowed made (the recipe's `max_tool_calls`, or
  the task's own budget, which the ledger carries and the digest shows);
- stuck: the planner made the same rejected decision `max_repeated_rejections` times in a row;
- error: a backend is dead (after its own retries), with the reason.

Forced, stuck, budget and insufficient are checked in one place, before each planner step (`_stop_rule`, in that
order); each role is one `ask` (the reply counted, parsed against its schema, kept as a `RoleCall`).

Decisions: a planner call aimed at a need that is not actionable (unknown, blocked, closed or out of attempts)
is NOT executed: it becomes an `InvalidAction` of the planner (a step is spent) carrying the decision and the
reason; the reducer keeps it as the ledger's `last_rejected` (with a streak count) and the digest shows it, so the
next decision can differ. A decompose output that fails
its schema (or that the reducer rejects) becomes an `InvalidAction` of `decompose` after a fallback ledger
with one blocking need (the question itself, searched on the web). A finish while the ledger is not ready but
can advance is answered by a failed `FinalizerChecked` naming the open needs (no finalizer call), which counts
toward the revision budget. On `budget`, `insufficient` and `forced` stops without an answer in the ledger the
finalizer drafts a best-effort answer that is recorded in `final_calls` (no ledger event); switch it off with
`AgentConfig.settings.draft_on_stop = False`. An `insufficient` stop abstains: its answer is
`ABSTAIN_ANSWER` ("insufficient evidence") and the draft goes to `record.draft_answer` (judged apart, so reports show
accuracy with and without drafted answers); `settings.abstain_on_insufficient = False` submits the draft instead.

Task context: the ledger starts with the task's R0 (assets, options, answer format, allowed tools), which the digest
shows. A call with a tool the task does not allow is rejected like a call on a closed need. A need with an `asset_id`
sends it to its perception tools (unless the planner names another asset). A call may aim at a slot
(`{"action": "call", "slot": name}`) whose needs are all filled: code_executor runs the slot's program
(`ledger.slot_program`) unless the planner writes the code, and the critic verifies the slot.

With `AgentConfig.constrain_decoding` the planner's request carries the state's action space as its JSON schema
(`agent.action_space`: exactly the calls this loop accepts, and finish), so a backend with structured outputs
cannot emit a decision the loop would reject; `planner_system_prompt: false` sends the digest without the system turn.

    omnidecision run --tasks tasks.jsonl --task-id t1 --teacher
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from omnidecision.agent.action_space import ledger_action_schema
from omnidecision.agent.config import AgentConfig, ToolScope
from omnidecision.ledger import (
    MAX_RAW_CHARS,
    SLOT_TOOL,
    AssetRef,
    ConflictRaised,
    ConflictResolved,
    ConflictValue,
    DigestBudget,
    EventRejected,
    EvidenceAdded,
    FinalizerChecked,
    FinishRequested,
    InitLedger,
    LedgerEvent,
    NeedSpec,
    NeedUpdated,
    SlotUpdated,
    SourceRef,
    TaskContext,
    ToolCalled,
    actionable_need_indices,
    actionable_slot_names,
    can_advance,
    composed_query,
    listed_tools,
    ready,
    reduce,
    render_digest,
    slot_program,
    tool_budget_spent,
    tool_calls_made,
    unmet_blocking,
    unresolved_conflicts,
)
from omnidecision.ledger.events import InvalidAction
from omnidecision.ledger.schema import PERCEPTION_TOOLS, Ledger
from omnidecision.protocol.actions import (
    CallAction,
    NeedVerdict,
    effective_tool,
    parse_role_output,
    render_action,
    role_schema,
)
from omnidecision.protocol.chat import BackendError, ChatBackend, ChatRequest, ChatResponse, Usage
from omnidecision.protocol.prompts import load_prompt, render_planner_messages
from omnidecision.protocol.records import ABSTAIN_ANSWER, Outcome, RoleCall, RunRecord, StepRecord, Totals
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import Observation, ToolContext
from omnidecision.tools.registry import arguments_for, build_tool_context, run_tool

logger = logging.getLogger(__name__)


# -- the run: what the ledger loop shares with the baselines -----------------------------------------------
ToolRunner = Callable[[str, dict, ToolContext], Awaitable[Observation]]

# Where a role falls back to when `backends` has no entry for it.
ROLE_FALLBACKS: dict[str, tuple[str, ...]] = {
    "planner": ("default",),
    "decompose": ("default", "planner"),
    "critic": ("default", "planner"),
    "finalizer": ("default", "planner"),
    "summarizer": ("default", "planner"),
}


def config_digest(config: AgentConfig) -> str:
    return hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:12]


def default_tool_runner() -> ToolRunner:
    """The tools registry's `run_tool`."""
    return run_tool


class Run:
    """Mutable bookkeeping of one run: the ledger state (the ledger loop's; the baselines leave it empty), usage,
    cost, tool calls, invalid actions, timing."""

    def __init__(self, task: Task, config: AgentConfig, backends: dict[str, ChatBackend],
                 tool_runner: ToolRunner | None, services: dict | None, *, sample: int = 0,
                 run_id: str = "") -> None:
        self.task, self.config, self.backends = task, config, backends
        self.sample, self.run_id = sample, run_id
        self.tool_runner = tool_runner or default_tool_runner()
        # the registry's own per-tool timeout follows the agent's (a perception call may need minutes)
        self.ctx = build_tool_context(task, services, config.tool_settings())
        self.state = Ledger()
        self.usage = Usage()
        self.planner_prompt_tokens = 0
        self.cost: float | None = None
        self.invalid = 0
        self.tool_calls: dict[str, int] = {}
        self.planner_model = ""
        self.t0 = time.perf_counter()

    # -- models ---------------------------------------------------------------------------------------------
    def backend(self, role: str) -> ChatBackend:
        for name in (role, *ROLE_FALLBACKS.get(role, ("default",))):
            if name in self.backends:
                return self.backends[name]
        raise BackendError(f"no backend configured for role {role!r} (have: {sorted(self.backends)})")

    async def chat(self, role: str, messages: list[dict[str, Any]], context: dict[str, Any],
                   schema_role: str | None = None, schema: dict[str, Any] | None = None) -> ChatResponse:
        """One LLM call; raises BackendError (the run stops with outcome `error`). `schema` replaces the role's
        JSON schema (the planner's per-state action space)."""
        schema = schema if schema is not None else role_schema(schema_role or role)
        # Offline backends draw their noise per (run, sample): without these keys every sample would be identical.
        context = {"sample": self.sample, "run_id": self.run_id, **context}
        request = ChatRequest(role=role if role != "react" else "planner", messages=messages, json_schema=schema,
                              schema_name=f"{schema_role or role}_output", context=context)
        t = time.perf_counter()
        try:
            resp = await self.backend(role).chat(request)
        except BackendError:
            raise
        except Exception as exc:  # a backend bug must not crash the batch: it is a dead backend for this run
            raise BackendError(f"{role} backend failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(resp, ChatResponse):
            raise BackendError(f"{role} backend returned {type(resp).__name__}, not a ChatResponse")
        if not resp.latency_s:
            resp.latency_s = time.perf_counter() - t
        self.account(role, resp)
        return resp

    def account(self, role: str, resp: ChatResponse) -> None:
        """Add a reply's usage and cost to the run's totals (`chat` does it for every call; `ask` for a reply it
        was given)."""
        self.usage = self.usage + resp.usage
        if resp.cost is not None:
            self.cost = (self.cost or 0.0) + resp.cost
        if role in ("planner", "react"):
            self.planner_prompt_tokens += resp.usage.prompt_tokens
            self.planner_model = self.planner_model or resp.model

    @staticmethod
    def role_call(role: str, resp: ChatResponse | None, error: str | None = None) -> RoleCall:
        if resp is None:
            return RoleCall(role=role, error=error)
        return RoleCall(role=role, raw=resp.text, usage=resp.usage, latency_s=resp.latency_s, error=error,
                        model=resp.model, cost=resp.cost)

    # -- tools ----------------------------------------------------------------------------------------------
    async def run_tool(self, tool: str, arguments: dict) -> Observation:
        """Run one tool; errors, timeouts and bad return values become a failed observation."""
        self.tool_calls[tool] = self.tool_calls.get(tool, 0) + 1
        try:
            obs = await asyncio.wait_for(self.tool_runner(tool, arguments, self.ctx), self.config.tool_timeout_s)
        except asyncio.TimeoutError:
            return Observation(tool=tool, ok=False, error=f"timeout after {self.config.tool_timeout_s:g}s",
                               limit_hit="timeout")
        except Exception as exc:
            logger.warning("tool %s raised %s: %s", tool, type(exc).__name__, exc)
            return Observation(tool=tool, ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
        if not isinstance(obs, Observation):
            return Observation(tool=tool, ok=False, error=f"tool returned {type(obs).__name__}, not an Observation")
        return obs

    def totals(self) -> Totals:
        calls = dict(self.state.tool_call_counts) if self.state.initialized else dict(self.tool_calls)
        return Totals(tool_calls=calls, prompt_tokens=self.usage.prompt_tokens,
                      completion_tokens=self.usage.completion_tokens,
                      planner_prompt_tokens=self.planner_prompt_tokens, cost=self.cost,
                      wall_s=round(time.perf_counter() - self.t0, 4), invalid_actions=self.invalid)


# -- the ledger roles' messages (the planner's: `protocol.prompts.render_planner_messages`) ----------------
MAX_OBSERVATION_CHARS = 2000


def task_line(task: Task | None) -> str:
    """The task's answer type, options, assets and allowed tools, a line each (the decompose and finalizer messages,
    and the baselines')."""
    if task is None:
        return ""
    parts = [f"answer_type: {task.answer_type}"]
    if task.options:
        parts.append("options: " + " | ".join(task.options))
    if task.assets:
        parts.append("assets: " + ", ".join(f"{a.id} ({a.type})" for a in task.assets))
    if task.tools is not None:
        parts.append("tools: " + (", ".join(task.tools) or "none"))
    return "\n".join(parts)


def decompose_messages(question: str, task: Task | None = None) -> list[dict[str, str]]:
    user = f"QUESTION: {question}\n{task_line(task)}".rstrip()
    return [{"role": "system", "content": load_prompt("decompose")}, {"role": "user", "content": user}]


def observation_text(obs: Observation, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """A bounded text view of an observation (status, source, text, structured fields)."""
    head = f"tool={obs.tool} ok={'yes' if obs.ok else 'no'}"
    if obs.source is not None:
        head += f" source={obs.source.label()}"
    if obs.error:
        head += f" error={obs.error}"
    if obs.limit_hit:
        head += f" limit_hit={obs.limit_hit}"
    body = obs.text
    if obs.fields:
        body += "\nfields: " + json.dumps(obs.fields, ensure_ascii=False, default=str)
    body = body if len(body) <= limit else body[: limit - 1] + "…"
    return f"{head}\n{body}".rstrip()


def critic_messages(ledger: Ledger, action: CallAction, obs: Observation,
                    budget: DigestBudget | None = None) -> list[dict[str, str]]:
    target = f"need={action.need}" if action.slot is None else f"slot={action.slot}"
    user = (f"{render_digest(ledger, budget)}\n\nCALL: {target} tool={action.tool} "
            f"query={json.dumps(action.query or '', ensure_ascii=False)}\nOBSERVATION:\n{observation_text(obs)}")
    return [{"role": "system", "content": load_prompt("critic")}, {"role": "user", "content": user}]


def finalizer_messages(ledger: Ledger, task: Task | None = None,
                       budget: DigestBudget | None = None) -> list[dict[str, str]]:
    user = f"{render_digest(ledger, budget)}\n{task_line(task)}".rstrip()
    return [{"role": "system", "content": load_prompt("finalizer")}, {"role": "user", "content": user}]


# -- the entry ---------------------------------------------------------------------------------------------
async def continue_run(run: Run, record: RunRecord, decision: ChatResponse | None = None) -> RunRecord:
    """Continue a ledger-mode run from the state `run` holds (restored at a recorded step by
    `omnidecision.branch.resume`) to its end, appending to `record`. `decision`, when given, stands in for the
    planner's reply at the first step (its usage and cost are counted as the planner's); every later decision
    comes from `run.backends`. The same loop as `run_task`; never raises."""
    try:
        await ledger_loop(run, record, decision)
    except Exception as exc:  # never crash a batch: the reason goes into the record
        end_with_error(record, run, exc)
    return record


def end_with_error(record: RunRecord, run: Run | None, exc: Exception) -> None:
    """End the run with outcome `error`: a dead backend (after its retries) names its reason, anything else its
    exception."""
    if run is None:  # the run could not be set up: nothing was counted
        record.outcome = "error"
    else:
        close(run, record, "error")
    if isinstance(exc, BackendError):
        record.error = exc.reason
        logger.warning("run %s: backend error: %s", record.run_id, exc.reason)
    else:
        record.error = f"{type(exc).__name__}: {exc}"
        logger.error("run %s crashed:\n%s", record.run_id, traceback.format_exc())


# -- role calls, the commit point, the end -----------------------------------------------------------------
@dataclass
class Reply:
    """One role's answer (`ask`): the reply, its output parsed against the role's schema (None: malformed, `error`
    says why)."""

    role: str
    response: ChatResponse
    output: Any | None
    error: str | None

    @property
    def text(self) -> str:
        return self.response.text

    @property
    def call(self) -> RoleCall:
        """What the record keeps of it."""
        return Run.role_call(self.role, self.response, self.error)


async def ask(run: Run, role: str, messages: list[dict[str, Any]], context: dict[str, Any], *,
              schema: dict[str, Any] | None = None, given: ChatResponse | None = None) -> Reply:
    """One role call: the backend's reply to `messages` (`Run.chat`), or `given`, a reply that stands in for it (a
    resumed run's decision, counted as the role's own), parsed against the role's schema. Raises BackendError."""
    if given is None:
        resp = await run.chat(role, messages, context, schema=schema)
    else:
        resp = given
        run.account(role, resp)
    output, error = parse_role_output(role, resp.text)
    return Reply(role, resp, output, error)


def commit(run: Run, events: list[LedgerEvent], event: LedgerEvent, role: str) -> bool:
    """Reduce `event` into the run's state and append it to `events`; a rejected event is recorded as an
    `InvalidAction` of `role` with the reducer's reason. Returns whether the event itself applied."""
    try:
        run.state = reduce(run.state, event)
    except EventRejected as exc:
        logger.debug("rejected %s", exc)
        invalid_event(run, events, role, exc.reason, event.model_dump_json())
        return False
    events.append(event)
    return True


def invalid_event(run: Run, events: list[LedgerEvent], role: str, error: str, raw: str,
                  decision: str | None = None) -> None:
    """Count an invalid output of `role` and record it as an `InvalidAction` (the reducer keeps a rejected
    decision as the ledger's `last_rejected`)."""
    run.invalid += 1
    event = InvalidAction(role=role, error=error[:MAX_RAW_CHARS], raw=raw[:MAX_RAW_CHARS], decision=decision)
    try:
        run.state = reduce(run.state, event)
    except EventRejected:  # only before init; the invalid action is still counted in the totals
        return
    events.append(event)


def close(run: Run, record: RunRecord, outcome: Outcome) -> None:
    """End the run with `outcome`: its final ledger, the answer (the one given, else the ledger's), its totals and
    the planner's model go into `record`."""
    record.outcome = outcome
    if run.state.initialized:
        record.final_ledger = run.state
        record.answer = record.answer or run.state.answer
    record.totals = run.totals()
    record.planner_model = run.planner_model


# -- decompose ---------------------------------------------------------------------------------------------
def task_context(task: Task) -> TaskContext:
    """R0 of a task: its assets (id, type, duration when known), options, answer format and allowed tools."""
    return TaskContext(assets=[AssetRef(id=a.id, type=a.type, duration=a.duration) for a in task.assets],
                       options=list(task.options) if task.options else None, answer_format=task.answer_type,
                       tools=list(task.tools) if task.tools is not None else None)


async def _decompose(run: Run, record: RunRecord) -> None:
    task, events = run.task, record.initial_events
    budgets = {"step_budget": run.config.step_budget, "max_attempts": run.config.max_attempts,
               "context": task_context(task), "max_tool_calls": task.max_tool_calls}
    reply = await ask(run, "decompose", decompose_messages(task.question, task), {"task": task})
    record.decompose = reply.call
    out, err = reply.output, reply.error
    if out is not None:
        # slots start empty and unverified whatever the decomposer wrote: only evidence verifies a slot
        slots = [s.model_copy(update={"value": None, "verified": False, "source": None, "attempts": 0})
                 for s in out.slots]
        known = {a.id for a in task.assets}
        # an asset the task does not have is dropped (the tool then picks its default asset), not a failed init
        needs = [n if n.asset_id is None or n.asset_id in known else n.model_copy(update={"asset_id": None})
                 for n in out.needs]
        init = InitLedger(question=task.question, needs=needs, slots=slots, **budgets)
        try:
            run.state = reduce(run.state, init)
        except EventRejected as exc:  # recorded as an invalid decompose after the fallback init below
            err = f"decomposition rejected by the reducer: {exc.reason}"
        else:
            events.append(init)
            return
    fallback = InitLedger(question=task.question, needs=[NeedSpec(description="the answer to the question",
                                                                  query_focus=task.question)], **budgets)
    commit(run, events, fallback, "decompose")
    invalid_event(run, events, "decompose", err or "invalid decomposition", reply.text)


# -- the loop ----------------------------------------------------------------------------------------------
async def ledger_loop(run: Run, record: RunRecord, decision: ChatResponse | None = None) -> None:
    """Decompose (unless `run` starts from a restored ledger), then steps until a stop rule holds (`_stop_rule`)
    or the finalizer accepts. `decision`: the planner's reply at the first step, given instead of asked for (a
    resumed run, `continue_run`)."""
    config = run.config
    budget = DigestBudget(max_chars=config.digest_max_chars)
    if not run.state.initialized:
        await _decompose(run, record)
    while (outcome := _stop_rule(run)) is None:
        state = run.state
        step = StepRecord(step=state.step, ledger=state, planner_messages=render_planner_messages(
            state, budget, system_prompt=config.planner_system_prompt))
        record.steps.append(step)
        schema = (ledger_action_schema(state, run.task, config.max_tool_calls, config.constrain_tools)
                  if config.constrain_decoding and decision is None else None)
        reply = await ask(run, "planner", step.planner_messages, {"task": run.task, "ledger": state},
                              schema=schema, given=decision)
        decision, resp = None, reply.response
        step.raw_output, step.usage, step.latency_s, step.cost = resp.text, resp.usage, resp.latency_s, resp.cost
        action = reply.output
        if action is None:
            step.invalid = reply.error
            invalid_event(run, step.events, "planner", reply.error or "invalid action", resp.text)
            continue
        step.action = action.model_dump(exclude_none=True)
        if isinstance(action, CallAction):
            await _call(run, step, action, budget)
        elif await _finish(run, record, step, budget):
            return
    await _finish_without_accept(run, record, outcome, budget)


def _stop_rule(run: Run) -> Outcome | None:
    """The stop outcome the ledger calls for before the next planner step (None: go on), the first that holds of:
    forced (the finalizer failed more than the revision budget), stuck (the same rejected decision
    `max_repeated_rejections` times in a row), budget (the step budget, or a spent tool budget, the recipe's cap or
    the task's own, unless the ledger is ready: the planner can then still finish), insufficient (not ready and
    nothing can advance: the planner is not asked)."""
    state, config = run.state, run.config
    limit, rejected = config.max_repeated_rejections, state.last_rejected
    if state.finalizer_failures > config.revision_budget:
        return "forced"
    if limit is not None and rejected is not None and rejected.streak >= limit:
        return "stuck"
    if state.step >= config.step_budget or (tool_budget_spent(state, config.max_tool_calls) and not ready(state)):
        return "budget"
    if not ready(state) and not can_advance(state):
        return "insufficient"
    return None


def gap_diagnosis(state: Ledger) -> str:
    """Why the ledger is not ready, naming the open needs, unverified slots and open conflicts."""
    parts = []
    if unmet_blocking(state):
        parts.append(f"blocking needs not filled: {unmet_blocking(state)}")
    unverified = [s.name for s in state.slots if not s.verified]
    if unverified:
        parts.append(f"slots not verified: {unverified}")
    if unresolved_conflicts(state):
        parts.append(f"open conflicts: {unresolved_conflicts(state)}")
    parts.append(f"actionable needs: {actionable_need_indices(state)}")
    return "not ready: " + "; ".join(parts)


async def _finish(run: Run, record: RunRecord, step: StepRecord, budget: DigestBudget) -> bool:
    """The planner chose finish: the finalizer checks a ready ledger (an unready one fails the check, naming its
    gaps, with no finalizer call). Returns True when the check passed and the run stopped, accepted."""
    commit(run, step.events, FinishRequested(), "planner")
    state = run.state
    if not ready(state):
        commit(run, step.events, FinalizerChecked(passed=False, diagnosis=gap_diagnosis(state)), "finalizer")
        return False
    reply = await _ask_finalizer(run, budget)
    out = reply.output
    step.calls.append(reply.call)
    if out is None:
        invalid_event(run, step.events, "finalizer", reply.error or "invalid finalizer output", reply.text)
        check = FinalizerChecked(passed=False, diagnosis=f"finalizer output invalid: {reply.error}")
    elif out.check == "pass" and out.answer.strip():
        check = FinalizerChecked(passed=True, answer=out.answer.strip())
    else:
        check = FinalizerChecked(passed=False, answer=out.answer.strip() or None,
                                 diagnosis=out.diagnosis or "the finalizer's check failed")
    if commit(run, step.events, check, "finalizer") and check.passed:
        record.answer = check.answer
        close(run, record, "accepted")
        return True
    return False


async def _ask_finalizer(run: Run, budget: DigestBudget) -> Reply:
    """The finalizer's answer and check on the ledger as it stands (at a finish, or a draft at a stop)."""
    return await ask(run, "finalizer", finalizer_messages(run.state, run.task, budget),
                         {"task": run.task, "ledger": run.state})


async def _finish_without_accept(run: Run, record: RunRecord, outcome: Outcome, budget: DigestBudget) -> None:
    """Stop with `outcome`; the answer is the ledger's best value, else a best-effort draft. An `insufficient` stop
    abstains (answer `ABSTAIN_ANSWER`) and keeps that value as `record.draft_answer` instead; a `stuck` one names
    the decision repeated in `record.stop_reason`."""
    if outcome == "stuck":
        r = run.state.last_rejected
        record.stop_reason = (f"the planner repeated a rejected decision {r.streak} times in a row: "  # type: ignore[union-attr]
                              f"{r.decision} ({r.reason})")  # type: ignore[union-attr]
    answer = run.state.answer
    if answer is None and run.config.settings.draft_on_stop:
        try:
            reply = await _ask_finalizer(run, budget)
            record.final_calls.append(reply.call)
            if reply.output is not None and reply.output.answer.strip():
                answer = reply.output.answer.strip()
        except BackendError as exc:  # the stop outcome stands; the draft is best effort
            record.final_calls.append(RoleCall(role="finalizer", error=exc.reason))
    if outcome == "insufficient" and run.config.settings.abstain_on_insufficient:
        # the seed's distinction: an insufficient ledger abstains; the draft is kept, judged apart
        record.draft_answer, answer = answer, ABSTAIN_ANSWER
    record.answer = answer
    close(run, record, outcome)


# -- one tool call -----------------------------------------------------------------------------------------
def _rejection(state: Ledger, task: Task, action: CallAction, scope: ToolScope = "allowed") -> str | None:
    """Why the loop must not execute this call (None: it may). `scope` "listed": a tool outside the need's listed
    sources (a slot: other than code_executor) is rejected too (`AgentConfig.constrain_tools`)."""
    allowed = task.tools
    if action.slot is not None:
        slot = state.slot(action.slot)
        if slot is None or action.slot not in actionable_slot_names(state):
            why = ("unknown slot" if slot is None else f"slot {action.slot} is not actionable (verified="
                   f"{'yes' if slot.verified else 'no'}, needs {slot.needs} must be filled)")
            return f"{why}; actionable slots: {actionable_slot_names(state)}"
        tool = effective_tool(state, action)
        if scope == "listed" and tool != SLOT_TOOL:
            return f"tool {tool} does not compute a slot (slot {action.slot}: {SLOT_TOOL})"
    else:
        need = state.need(action.need)  # type: ignore[arg-type]
        if need is None or action.need not in actionable_need_indices(state):
            why = "unknown need" if need is None else f"need {action.need} is not actionable (status={need.status})"
            return f"{why}; actionable: {actionable_need_indices(state)}"
        tool = effective_tool(state, action)
        listed = listed_tools(need)
        if scope == "listed" and tool not in listed:
            return f"tool {tool} is not a listed source of need {action.need} (listed: {', '.join(listed)})"
    if allowed is not None and tool not in allowed:
        return f"tool {tool} is not allowed for this task (tools: {', '.join(allowed) or 'none'})"
    return None


def resolve_call(state: Ledger, action: CallAction) -> tuple[str, str, dict]:
    """The call's tool, query and arguments, with the defaults filled in: the need's tool and composed query (and
    its asset for a perception tool), or for a slot code_executor and the slot's program."""
    if action.slot is not None:
        tool = effective_tool(state, action)
        query = action.query if action.query is not None else slot_program(state, action.slot)
        return tool, query, arguments_for(tool, query, action.arguments)
    need = state.needs[action.need]  # type: ignore[index]
    tool = effective_tool(state, action)
    query = action.query if action.query is not None else composed_query(state, action.need)  # type: ignore[arg-type]
    arguments = arguments_for(tool, query, action.arguments)
    if need.asset_id is not None and tool in PERCEPTION_TOOLS and not arguments.get("asset_id"):
        arguments["asset_id"] = need.asset_id
    return tool, query, arguments


def why_rejected(state: Ledger, task: Task, action: CallAction, config: AgentConfig) -> str | None:
    """Why the loop would not execute this call at `state` (None: it would): the tool budget is spent, or
    `_rejection`'s reasons. A rejected call is still a decision: it becomes the planner's `InvalidAction`."""
    if tool_budget_spent(state, config.max_tool_calls):
        return f"the tool budget is spent ({tool_calls_made(state)} calls)"
    return _rejection(state, task, action, config.constrain_tools)


async def _call(run: Run, step: StepRecord, action: CallAction, budget: DigestBudget) -> None:
    state = run.state
    why = why_rejected(state, run.task, action, run.config)
    if why is not None:
        step.invalid = why
        invalid_event(run, step.events, "planner", step.invalid, step.raw_output, decision=render_action(action))
        return
    tool, query, arguments = resolve_call(state, action)
    resolved = action.model_copy(update={"tool": tool, "query": query})
    obs = await run.run_tool(tool, arguments)
    step.observation = obs.model_dump(mode="json")
    commit(run, step.events, ToolCalled(need=action.need, slot=action.slot, tool=tool, query=query, ok=obs.ok,
                                       error=obs.error), "planner")
    state = run.state
    reply = await ask(run, "critic", critic_messages(state, resolved, obs, budget),
                          {"task": run.task, "ledger": state, "action": resolved, "observation": obs})
    out = reply.output
    step.calls.append(reply.call)
    if out is None:
        invalid_event(run, step.events, "critic", reply.error or "invalid critic output", reply.text)
        return
    step.verdict = out.model_dump(mode="json")
    source = obs.source or SourceRef(tool=tool)
    for claim in out.evidence:
        commit(run, step.events, EvidenceAdded(claim=claim.claim, source=source, supports=claim.supports), "critic")
    for verdict in out.verdicts:
        for event in verdict_events(run.state, verdict, source):
            commit(run, step.events, event, "critic")
    for sv in out.slots:
        commit(run, step.events, SlotUpdated(slot=sv.slot, value=sv.value, verified=sv.verified, source=tool),
                   "critic")


def _value_source(state: Ledger, index: int) -> SourceRef:
    """The source of a need's current value: the latest evidence atom supporting it, else the filling tool."""
    for atom in reversed(state.evidence):
        if index in atom.supports:
            return atom.source
    need = state.need(index)
    return SourceRef(tool=(need.filled_by if need is not None else None) or "unknown")


def _differs(a: str, b: str) -> bool:
    """Two values differ beyond case and spacing."""
    return " ".join(a.split()).casefold() != " ".join(b.split()).casefold()


def verdict_events(state: Ledger, v: NeedVerdict, source: SourceRef) -> list[LedgerEvent]:
    """The ledger events of one critic verdict, given the current state.

    - supports a need with an open conflict → `ConflictResolved` picking the supported value;
    - conflicts with a need holding a different value, or "supports" a different value than the one a filled
      need holds → `ConflictRaised` keeping both values with sources (a later observation never silently
      overwrites a settled value);
    - otherwise → `NeedUpdated` (a "supports" with a value and no status files the need as filled).
    """
    need = state.need(v.need)
    revisions = {"revised_query_focus": v.revised_query_focus, "revised_role": v.revised_need_role,
                 "add_depends_on": v.add_depends_on}
    if need is None:  # let the reducer reject it with its reason
        return [NeedUpdated(need=v.need, verdict=v.verdict, status=v.status, value=v.value, **revisions)]
    open_conflict = next((c for c in state.conflicts if c.need == v.need and not c.resolved), None)
    events: list[LedgerEvent] = []
    if v.verdict == "supports" and open_conflict is not None and (v.value or need.value):
        events.append(ConflictResolved(conflict=open_conflict.id, value=v.value or need.value, source=source))
        if v.revised_query_focus or v.revised_need_role or v.add_depends_on:
            events.append(NeedUpdated(need=v.need, verdict="supports", **revisions))
        return events
    contradicts = (v.verdict == "conflicts" or (v.verdict == "supports" and need.status == "filled"))
    if (contradicts and v.value is not None and need.value is not None and open_conflict is None
            and _differs(v.value, need.value)):
        values = [ConflictValue(value=need.value, source=_value_source(state, v.need)),
                  ConflictValue(value=v.value, source=source)]
        events.append(ConflictRaised(need=v.need, values=values))
        if v.revised_query_focus or v.revised_need_role or v.add_depends_on:
            events.append(NeedUpdated(need=v.need, verdict=v.verdict, **revisions))
        return events
    status = v.status
    if status is None and v.verdict == "supports" and v.value is not None:
        status = "filled"
    value = v.value if v.verdict != "conflicts" or need.value is None else None  # never overwrite a disputed value
    filled_by = source.tool if status in ("filled", "partial") and value is not None else None
    return [NeedUpdated(need=v.need, verdict=v.verdict, status=status, value=value, filled_by=filled_by,
                        **revisions)]
