"""The `recorded` continuation policy and recorded tools: the parent run's role outputs and observations, replayed.

A recorded output answers a request only while the resumed run is still on the parent's path, checked on the state
the request carries, never by counting calls:

- planner at step s: the request's ledger and messages are the parent's `steps[s].ledger` and `planner_messages`;
- critic at step s: the ledger after the parent's `ToolCalled` of step s, the same call and the same observation;
- finalizer at step s: the ledger after the parent's `FinishRequested` of step s; the draft at a stop: the ledger
  is the parent's `final_ledger`;
- decompose: the same question.

Off the path (another decision was applied, a tool answered differently) the request goes to the `fallback`
backends (role lookup as in `agent.runtime.Run.backend`); without one it is a `BackendError` naming the role and the
step, and the run ends with outcome `error`. A parent that ended in a backend error at its last step ends the same
way on its path.

`RecordedTools` is the environment's counterpart: a tool runner that answers a call (tool + arguments, resolved as
the loop resolves them) with the observation the parent got for the same call (the n-th identical call gets the
n-th recorded observation), and runs the real tool for any other call. With it a resume reproduces observations that
the environment itself would not reproduce (a live web page that changed, the sandbox's per-run uid).

    python -c "from omnidecision.branch.recorded import recorded_backends; help(recorded_backends)"
"""

from __future__ import annotations

import json
import logging
from typing import Any

from omnidecision.agent.loop import resolve_call
from omnidecision.agent.runtime import ROLE_FALLBACKS, ToolRunner, default_tool_runner
from omnidecision.ledger import EventRejected, FinishRequested, Ledger, ToolCalled, reduce
from omnidecision.protocol.actions import CallAction
from omnidecision.protocol.chat import BackendError, ChatBackend, ChatRequest, ChatResponse
from omnidecision.protocol.records import RoleCall, RunRecord
from omnidecision.tools.base import Observation, ToolContext

logger = logging.getLogger(__name__)


def _key(ledger: Ledger | None) -> str | None:
    return ledger.model_dump_json() if ledger is not None else None


def _after(ledger: Ledger, event: Any) -> str | None:
    try:
        return reduce(ledger, event).model_dump_json()
    except EventRejected:
        return None


def _reply(call: RoleCall) -> ChatResponse:
    return ChatResponse(text=call.raw, usage=call.usage, latency_s=call.latency_s, model=call.model, cost=call.cost)


class RecordedPolicy:
    """Answers each role with the parent's recorded output while the run is on the parent's path (module
    docstring), else with `fallback`. `off_path` counts the requests that went to the fallback (or failed)."""

    def __init__(self, parent: RunRecord, fallback: dict[str, ChatBackend] | None = None) -> None:
        self.parent, self.fallback = parent, dict(fallback or {})
        self.off_path = 0
        # state (ledger JSON) -> the step whose recorded output answers a request made in that state; the critic's
        # and the in-step finalizer's states are those after the step's first event, worked out when first asked
        self._planner = {_key(s.ledger): s.step for s in parent.steps if s.ledger is not None}
        self._after_first: dict[int, str | None] = {}
        self._final = _key(parent.final_ledger)

    # -- the parent's outputs ---------------------------------------------------------------------------------
    def _stepped(self, ledger: Ledger, key: str, kind: type) -> int | None:
        """The parent's step s whose first event, of type `kind`, took its snapshot to `ledger` (a critic's or an
        in-step finalizer's request is made in that state), or None."""
        s = ledger.step - 1
        if not 0 <= s < len(self.parent.steps):
            return None
        step = self.parent.steps[s]
        if step.ledger is None or not step.events or not isinstance(step.events[0], kind):
            return None
        if s not in self._after_first:
            self._after_first[s] = _after(step.ledger, step.events[0])
        return s if self._after_first[s] == key else None

    def _step_call(self, step: int, role: str) -> RoleCall | None:
        return next((c for c in self.parent.steps[step].calls if c.role == role), None)

    def _died_here(self, step: int) -> BackendError | None:
        """The parent ended in an error at this, its last, step: the same error (its role output never came)."""
        p = self.parent
        if p.outcome == "error" and step == len(p.steps) - 1:
            return BackendError(p.error or "the parent run ended with outcome error here")
        return None

    def recorded(self, request: ChatRequest) -> ChatResponse | BackendError | None:
        """The parent's reply to this request (or the error it met), None when the request is off the path."""
        ctx, p = request.context, self.parent
        ledger: Ledger | None = ctx.get("ledger")
        key = _key(ledger)
        if request.role == "decompose":
            task = ctx.get("task")
            same = p.decompose is not None and task is not None and task.question == p.question
            return _reply(p.decompose) if same else None  # type: ignore[arg-type]
        if key is None:
            return None
        if request.role == "planner" and key in self._planner:
            s = self._planner[key]
            step = p.steps[s]
            if request.messages != step.planner_messages:
                return None
            if not step.raw_output and step.action is None and (err := self._died_here(s)) is not None:
                return err
            return ChatResponse(text=step.raw_output, usage=step.usage, latency_s=step.latency_s,
                                model=p.planner_model, cost=step.cost)
        if request.role == "critic" and (s := self._stepped(ledger, key, ToolCalled)) is not None:  # type: ignore[arg-type]
            step, event = p.steps[s], p.steps[s].events[0]
            action, obs = ctx.get("action"), ctx.get("observation")
            same_call = action is not None and (action.need, action.slot, action.tool, action.query) == (
                event.need, event.slot, event.tool, event.query)  # type: ignore[union-attr]
            same_obs = obs is not None and obs.model_dump(mode="json") == step.observation
            if not (same_call and same_obs):
                return None
            call = self._step_call(s, "critic")
            return _reply(call) if call is not None else self._died_here(s)
        if request.role == "finalizer":
            if key == self._final and p.final_calls:
                call = p.final_calls[0]
                if not call.raw and call.error and not call.model:  # the draft's backend failed in the parent
                    return BackendError(call.error)
                return _reply(call)
            if (s := self._stepped(ledger, key, FinishRequested)) is not None:  # type: ignore[arg-type]
                call = self._step_call(s, "finalizer")
                return _reply(call) if call is not None else self._died_here(s)
        return None

    # -- ChatBackend --------------------------------------------------------------------------------------------
    async def chat(self, request: ChatRequest) -> ChatResponse:
        reply = self.recorded(request)
        if isinstance(reply, BackendError):
            raise reply
        if reply is not None:
            return reply
        self.off_path += 1
        for name in (request.role, *ROLE_FALLBACKS.get(request.role, ("default",))):
            if name in self.fallback:
                return await self.fallback[name].chat(request)
        ledger = request.context.get("ledger")
        where = f" at step {ledger.step}" if ledger is not None else ""
        raise BackendError(f"recorded policy: no recorded {request.role} output{where} (the run left run "
                           f"{self.parent.run_id}'s path) and no fallback backend")


def recorded_backends(parent: RunRecord, fallback: dict[str, ChatBackend] | None = None) -> dict[str, ChatBackend]:
    """The `recorded` policy as a run's backends: one `RecordedPolicy` for every role."""
    return {"default": RecordedPolicy(parent, fallback)}


def _call_key(tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)


class RecordedTools:
    """A tool runner: the parent's observation for a call it made (same tool and arguments), else `fallback`'s
    (default: the tools registry). `replayed` and `executed` count the two kinds of calls."""

    def __init__(self, parent: RunRecord, fallback: ToolRunner | None = None) -> None:
        self.fallback = fallback or default_tool_runner()
        self.replayed = self.executed = 0
        self._seen: dict[str, int] = {}
        self._recorded: dict[str, list[dict[str, Any]]] = {}
        for s in parent.steps:
            if s.observation is None or s.ledger is None or s.action is None:
                continue
            try:
                tool, _, arguments = resolve_call(s.ledger, CallAction.model_validate(s.action))
            except (ValueError, KeyError, IndexError, TypeError) as exc:  # a call the loop could not have resolved
                logger.debug("run %s step %d: no recorded call key: %s", parent.run_id, s.step, exc)
                continue
            self._recorded.setdefault(_call_key(tool, arguments), []).append(s.observation)

    async def __call__(self, tool: str, arguments: dict, ctx: ToolContext) -> Observation:
        key = _call_key(tool, arguments)
        seen = self._recorded.get(key)
        if not seen:
            self.executed += 1
            return await self.fallback(tool, arguments, ctx)
        n = self._seen.get(key, 0)
        self._seen[key] = n + 1
        self.replayed += 1
        return Observation.model_validate(seen[min(n, len(seen) - 1)])
