"""Resume a recorded run at any step: rebuild its exact runtime state at step t, then continue it with a decision.

The state at step t of a ledger-mode record (`protocol.records.RunRecord`) is rebuilt from what the record holds:

- the ledger: the reducer over `initial_events` and the events of every step before t. The whole record is replayed
  first and every recorded snapshot compared with the replay (`verify_record`): a record whose events were edited is
  refused with `ResumeError` naming the step and the first field that differs;
- inside the ledger, so rebuilt with it: the step counter, tool-call counts, each need's attempts, the rejection
  streak (`last_rejected`), the budgets (steps, tool calls, attempts) and the task's context R0;
- the run's counters (`agent.ledger_loop.Run`): tool calls made, invalid actions, token usage (planner and other
  roles), cost (from each call's recorded cost), the planner's model;
- the environment: the tool context, built from the task and the services as `run_task` builds it.

`resume` then runs the loop of `run_task` from there (`agent.ledger_loop.continue_run`, one engine): at step t the
decision given (by default the parent's own planner output, `recorded_decision`), then whatever the backends decide
until a stop. With the parent's role outputs as the backends (`branch.branch.RecordedPolicy`) or a deterministic policy
(the scripted teacher), the rest of the record comes out as recorded (docs/rollout.md, "What exact means").

    omnidecision branch --trajectories runs/habits/trajectories.shard-0-of-1.jsonl --run-id synth-0003-s0-1a2b3c4d \
        --step 2 --recorded --policy recorded --dry-run
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.ledger_loop import Run, ToolRunner, config_digest, continue_run
from omnidecision.ledger import EventRejected, InvalidAction, Ledger, LedgerEvent, reduce
from omnidecision.protocol.actions import parse_planner_output, render_action
from omnidecision.protocol.chat import ChatBackend, ChatResponse, Usage
from omnidecision.protocol.records import RoleCall, RunRecord
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)


class ResumeError(ValueError):
    """A record that cannot be resumed where asked; the message names the run, the step and the field."""


def first_difference(recorded: Any, replayed: Any, path: str = "") -> str | None:
    """The path of the first field where two JSON-like values differ, or None when they are equal.

    >>> first_difference({"needs": [{"status": "filled"}]}, {"needs": [{"status": "partial"}]})
    'needs[0].status'
    >>> first_difference({"a": 1}, {"a": 1}) is None
    True
    """
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in [*recorded, *(k for k in replayed if k not in recorded)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in recorded or key not in replayed:
                return where
            found = first_difference(recorded[key], replayed[key], where)
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(replayed, list):
        for i, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        return None if len(recorded) == len(replayed) else f"{path}[{min(len(recorded), len(replayed))}]"
    return None if recorded == replayed else (path or "<root>")


def _apply(state: Ledger, events: list[LedgerEvent], where: str) -> Ledger:
    for k, event in enumerate(events):
        try:
            state = reduce(state, event)
        except EventRejected as exc:
            raise ResumeError(f"{where}: events[{k}] ({event.kind}) is rejected on replay: {exc.reason}") from exc
    return state


def _compare(recorded: Ledger, replayed: Ledger, where: str, field: str) -> None:
    if recorded.model_dump_json() == replayed.model_dump_json():
        return
    diff = first_difference(recorded.model_dump(mode="json"), replayed.model_dump(mode="json"))
    a, b = (_value_at(x.model_dump(mode="json"), diff) for x in (recorded, replayed))
    raise ResumeError(f"{where}: field {field}.{diff} differs from the replay of the recorded events (recorded "
                      f"{a}, replayed {b}): the record's events were edited or do not belong to it")


def _value_at(data: Any, path: str | None) -> str:
    """The value at a `first_difference` path, shortened for a one-line message."""
    import re

    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path or ""):
        try:
            data = data[int(part[1:-1])] if part.startswith("[") else data[part]
        except (KeyError, IndexError, TypeError):
            return "<absent>"
    text = json.dumps(data, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


_VERIFIED: OrderedDict[str, list[Ledger]] = OrderedDict()  # record JSON digest -> its replayed states (LRU)
_VERIFIED_MAX = 256


def replayed_states(record: RunRecord) -> list[Ledger]:
    """The states of `_replay_checked`, remembered for the last records asked about (a record is resumed at many
    steps, many times: replaying it once is enough). Treat the ledgers as read-only."""
    key = hashlib.sha256(record.model_dump_json().encode()).hexdigest()
    if key in _VERIFIED:
        _VERIFIED.move_to_end(key)
        return _VERIFIED[key]
    states = _replay_checked(record)
    _VERIFIED[key] = states
    if len(_VERIFIED) > _VERIFIED_MAX:
        _VERIFIED.popitem(last=False)
    return states


def _replay_checked(record: RunRecord) -> list[Ledger]:
    """The ledger at each step (`[i]`: what the planner saw at step i) and, last, at the end, rebuilt by the reducer
    from the record's events. Every recorded snapshot (`steps[i].ledger`, `final_ledger`) is compared with the replay
    on the way: the first that differs raises `ResumeError` naming the step and the field, as does an event the
    reducer rejects, or `steps[i].step != i` (a resume addresses steps by number)."""
    rid = f"run {record.run_id}"
    state = _apply(Ledger(), record.initial_events, f"{rid} initial_events")
    states = []
    for i, step in enumerate(record.steps):
        if step.step != i:
            raise ResumeError(f"{rid} step {i}: field steps[{i}].step is {step.step}, expected {i}")
        if step.ledger is not None:
            _compare(step.ledger, state, f"{rid} step {i}", f"steps[{i}].ledger")
        states.append(state)
        state = _apply(state, step.events, f"{rid} step {i}")
    state = _apply(state, record.final_events, f"{rid} final_events")
    if record.final_ledger is not None:
        _compare(record.final_ledger, state, f"{rid} final", "final_ledger")
    return [*states, state]


def verify_record(record: RunRecord) -> None:
    """Raise `ResumeError` (step and field named) unless replaying the record's events reproduces every snapshot."""
    replayed_states(record)


def ledger_at(record: RunRecord, step: int) -> Ledger:
    """The ledger the planner saw at `step`, rebuilt by the reducer (the whole record verified on the way)."""
    states = replayed_states(record)
    _check_step(record, step)
    return states[step]


def _check_step(record: RunRecord, step: int) -> None:
    if record.mode != "ledger":
        raise ResumeError(f"run {record.run_id}: field mode is {record.mode!r}: only ledger-mode runs resume")
    if not record.initial_events:
        raise ResumeError(f"run {record.run_id}: field initial_events is empty: the run never got a ledger")
    if not 0 <= step < len(record.steps):
        raise ResumeError(f"run {record.run_id}: step {step} is out of range (the run has steps 0.."
                          f"{len(record.steps) - 1})" if record.steps else
                          f"run {record.run_id}: step {step} is out of range (the run has no steps)")


def _calls_before(record: RunRecord, step: int) -> list[RoleCall]:
    """Every non-planner call made before `step`: decompose and the critic/finalizer calls of earlier steps."""
    return [*([record.decompose] if record.decompose else []), *(c for s in record.steps[:step] for c in s.calls)]


def _restore_counters(run: Run, record: RunRecord, step: int) -> None:
    """The run's counters as they stood when the planner was asked at `step`: what `Run.chat`, `Run.run_tool` and
    the loop's `invalid_event` had added up by then."""
    steps, calls = record.steps[:step], _calls_before(record, step)
    run.usage = sum((c.usage for c in calls), Usage()) + sum((s.usage for s in steps), Usage())
    run.planner_prompt_tokens = sum(s.usage.prompt_tokens for s in steps)
    costs = [c for c in [*(c.cost for c in calls), *(s.cost for s in steps)] if c is not None]
    run.cost = sum(costs) if costs else None
    if run.cost is None and record.totals.cost is not None and (steps or calls):
        logger.warning("run %s: its calls carry no cost (recorded before per-call costs were kept); the resumed "
                       "run's cost counts only the calls after step %d", record.run_id, step)
    events = [*record.initial_events, *(e for s in steps for e in s.events)]
    run.invalid = sum(isinstance(e, InvalidAction) for e in events)
    run.tool_calls = {}
    for s in steps:
        if s.observation is not None:
            tool = str(s.observation.get("tool", ""))
            run.tool_calls[tool] = run.tool_calls.get(tool, 0) + 1
    run.planner_model = record.planner_model if step > 0 else ""


@dataclass
class ResumePoint:
    """A recorded run restored at `step`: `run` holds the runtime state (ledger, counters, tool context), `record`
    the resumed run's record so far (the parent's steps before `step`, copied; `resume` appends the rest),
    `decision` the planner reply applied at `step` (None: the recorded one)."""

    parent: RunRecord
    step: int
    run: Run
    record: RunRecord
    decision: ChatResponse | None = None

    @property
    def ledger(self) -> Ledger:
        return self.run.state


class Wiring(TypedDict, total=False):
    """What a resumed run is wired to besides its policy (every key optional): the tool services of its environment,
    the runner of the calls no service answers, the resumed record's id and the id its backends see."""

    services: dict | None
    tool_runner: ToolRunner | None
    run_id: str | None
    draw_run_id: str | None


class RestoreOptions(Wiring, total=False):
    check_config: bool  # refuse an agent config whose digest differs from the record's (default True)


def restore(parent: RunRecord, step: int, task: Task, config: AgentConfig, backends: dict[str, ChatBackend],
            **options: Unpack[RestoreOptions]) -> ResumePoint:
    """Rebuild the runtime state of `parent` at `step` (see the module docstring). `task` is the parent's task,
    `config` its agent config (refused when its digest differs from the record's, unless `check_config` is False),
    `backends` the continuation policy (role -> backend), `services` the tool services of its environment.
    `run_id`: the resumed record's id (default: the parent's). `draw_run_id`: the run id the backends see in their
    request context (default: the parent's, so a policy that draws per run, as the scripted teacher does, draws as
    it did in the parent). Raises `ResumeError` naming the step and field."""
    services, tool_runner = options.get("services"), options.get("tool_runner")
    run_id, draw_run_id = options.get("run_id"), options.get("draw_run_id")
    check_config = options.get("check_config", True)
    rid = f"run {parent.run_id}"
    if task.id != parent.task_id:
        raise ResumeError(f"{rid}: field task_id is {parent.task_id!r} but the task given is {task.id!r}")
    _check_step(parent, step)
    if check_config and parent.config_digest and config_digest(config) != parent.config_digest:
        raise ResumeError(f"{rid}: field config_digest is {parent.config_digest} but the agent config given has "
                          f"{config_digest(config)}: resume with the config the run was collected with")
    state = ledger_at(parent, step)
    run = Run(task, config, backends, tool_runner, services, sample=parent.sample,
              run_id=draw_run_id or parent.run_id)
    run.state = state.model_copy(deep=True)  # the replayed states are shared (`replayed_states`)
    _restore_counters(run, parent, step)
    record = RunRecord(run_id=run_id or parent.run_id, task_id=task.id, sample=parent.sample, mode=parent.mode,
                       config_digest=parent.config_digest, question=task.question, level=task.level,
                       category=task.category, source=task.source, gold_answer=task.answer, outcome="error",
                       replay=bool(task.meta.get("replay") or (services or {}).get("replay")),
                       planner_model=run.planner_model,
                       initial_events=[e.model_copy(deep=True) for e in parent.initial_events],
                       decompose=parent.decompose.model_copy(deep=True) if parent.decompose else None,
                       steps=[s.model_copy(deep=True) for s in parent.steps[:step]])
    return ResumePoint(parent=parent, step=step, run=run, record=record)


def recorded_decision(parent: RunRecord, step: int) -> ChatResponse:
    """The parent's planner reply at `step`, as it was recorded (text, usage, latency, cost)."""
    _check_step(parent, step)
    s = parent.steps[step]
    return ChatResponse(text=s.raw_output, usage=s.usage, latency_s=s.latency_s, model=parent.planner_model,
                        cost=s.cost)


def decision_reply(parent: RunRecord, step: int, decision: dict[str, Any] | str | ChatResponse | None
                   ) -> ChatResponse:
    """The planner reply applied at `step`: the recorded one (None), a planner reply given as is (a ChatResponse: a
    sampled candidate, parsed by the loop as any planner output, malformed or not), else the caller's decision (an
    action, rendered canonically: `given_decision`)."""
    if isinstance(decision, ChatResponse):
        return decision
    return recorded_decision(parent, step) if decision is None else given_decision(decision)


def given_decision(decision: dict[str, Any] | str) -> ChatResponse:
    """A caller's decision (an action dict such as `{"action": "call", "need": 1}`, or its JSON text) as the
    planner's reply; a decision that does not parse as a planner action raises `ResumeError`. Its text is the
    action's canonical rendering (`protocol.actions.render_action`); no tokens are counted for it."""
    text = decision if isinstance(decision, str) else json.dumps(decision, ensure_ascii=False)
    action, err = parse_planner_output(text)
    if action is None:
        raise ResumeError(f"decision {text[:80]!r} is not a planner action: {err}")
    return ChatResponse(text=render_action(action), model="")


async def resume(point: ResumePoint, decision: ChatResponse | None = None) -> RunRecord:
    """Continue a restored run to its end: `decision` at the resume step (default: the point's, else the recorded
    one), then the point's backends. Returns the resumed record (never raises: a failure is outcome `error`, as in
    `run_task`)."""
    reply = decision if decision is not None else point.decision
    if reply is None:
        reply = recorded_decision(point.parent, point.step)
    return await continue_run(point.run, point.record, reply)


async def resume_run(parent: RunRecord, step: int, task: Task, config: AgentConfig,
                     backends: dict[str, ChatBackend], decision: ChatResponse | None = None,
                     **wiring: Unpack[Wiring]) -> RunRecord:
    """`restore` then `resume`, in one call."""
    return await resume(restore(parent, step, task, config, backends, **wiring), decision)
