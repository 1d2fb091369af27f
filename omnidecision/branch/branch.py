"""Branch a recorded run at a step: restore its state there (`branch.resume`), apply a decision, continue with a
continuation policy, and return the branch as an ordinary `RunRecord` that names its parent.

- the branch's steps before t are the parent's (copied), so harvest, the eval report, the viewer and the replay
  check read it as any record; `parent_run_id`, `parent_step`, `branch_decision`, `branch_policy`, `branch_seed` say
  where it came from;
- its run id is distinct and deterministic: `<parent>~b<t>-<hash of (decision, policy, seed, tools)>` (`branch_id`);
- the policy (`build_policy`): `recorded` (the parent's role outputs while on its path, then the recipe's backends),
  `teacher` (the recipe's scripted teacher, else the default one), `recipe` (the backends the parent was collected
  with), or a YAML file of backends (`backends:` of a recipe, or role -> BackendSpec): any served planner, the local
  one, the teacher, built with `backends.factory`;
- tools (`tools=`): `recorded` answers a call the parent made with the parent's observation and runs the real tool
  for any other (`RecordedTools`, below); `live` runs every call again;
- `seed` 0: the backends draw as in the parent (same run id and sample in their request context), so a deterministic
  policy reproduces the parent after the recorded decision; seed k > 0: another draw of the same policy.

The `recorded` policy (`RecordedPolicy`) replays the parent run's role outputs. A recorded output answers a request
only while the resumed run is still on the parent's path, checked on the state the request carries, never by
counting calls:

- planner at step s: the request's ledger and messages are the parent's `steps[s].ledger` and `planner_messages`;
- critic at step s: the ledger after the parent's `ToolCalled` of step s, the same call and the same observation;
- finalizer at step s: the ledger after the parent's `FinishRequested` of step s; the draft at a stop: the ledger
  is the parent's `final_ledger`;
- decompose: the same question.

Off the path (another decision was applied, a tool answered differently) the request goes to the `fallback`
backends (role lookup as in `agent.ledger_loop.Run.backend`); without one it is a `BackendError` naming the role and
the step, and the run ends with outcome `error`. A parent that ended in a backend error at its last step ends the
same way on its path.

`RecordedTools` is the environment's counterpart: a tool runner that answers a call (tool + arguments, resolved as
the loop resolves them) with the observation the parent got for the same call (the n-th identical call gets the
n-th recorded observation), and runs the real tool for any other call. With it a resume reproduces observations that
the environment itself would not reproduce (a live web page that changed, the sandbox's per-run uid).

    omnidecision branch --trajectories runs/habits/trajectories.shard-0-of-1.jsonl --run-id RUN --step 2 \
        --decision '{"action": "finish"}' --policy teacher --out runs/branches.jsonl
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.ledger_loop import ROLE_FALLBACKS, ToolRunner, default_tool_runner, resolve_call, why_rejected
from omnidecision.backends.factory import build_backends, load_backend_specs
from omnidecision.branch.resume import ResumeError, ResumePoint, decision_reply, restore, resume
from omnidecision.ledger import EventRejected, FinishRequested, Ledger, ToolCalled, reduce
from omnidecision.protocol.actions import CallAction, parse_planner_output
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatBackend, ChatRequest, ChatResponse
from omnidecision.protocol.records import RoleCall, RunRecord
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import Observation, ToolContext

logger = logging.getLogger(__name__)

POLICY_NAMES: tuple[str, ...] = ("recorded", "teacher", "recipe")
ToolsMode = Literal["recorded", "live"]


@dataclass
class Policy:
    """A continuation policy: `name` is what the branch records (`branch_policy`) and hashes into its id;
    `backends` answer every role after the branch's decision."""

    name: str
    backends: dict[str, ChatBackend]


def _all_teacher(specs: dict[str, BackendSpec] | None) -> bool:
    return bool(specs) and all(s.kind == "teacher" for s in specs.values())  # type: ignore[union-attr]


def build_policy(policy: str, parent: RunRecord, recipe_backends: dict[str, BackendSpec] | None = None) -> Policy:
    """The continuation policy named `policy` (module docstring); `recipe_backends` are the backends the parent was
    collected with (its manifest's). A YAML path is read with `backends.factory.load_backend_specs`. Raises
    ValueError naming what is missing."""
    if policy == "recorded":
        fallback = build_backends(recipe_backends) if recipe_backends else None
        return Policy("recorded", {"default": RecordedPolicy(parent, fallback)})
    specs = policy_specs(policy, recipe_backends)
    if policy in ("teacher", "recipe"):
        return Policy(policy, build_backends(specs))
    return policy_from_specs(specs, Path(policy).name)


def policy_specs(policy: str, recipe_backends: dict[str, BackendSpec] | None = None) -> dict[str, BackendSpec]:
    """The backends a named continuation policy other than `recorded` is built from: `teacher` (the recipe's when
    every one is the scripted teacher, else a default teacher), `recipe`, or a backends YAML file.

    >>> policy_specs("teacher", {"planner": BackendSpec(kind="local", model="m")})["default"].kind
    'teacher'
    """
    if policy == "teacher":
        return recipe_backends if _all_teacher(recipe_backends) else {"default": BackendSpec(kind="teacher")}  # type: ignore[return-value]
    if policy == "recipe":
        if not recipe_backends:
            raise ValueError("policy recipe: no recipe backends (the trajectory folder has no manifest.json; "
                             "give --config)")
        return recipe_backends
    path = Path(policy)
    if not path.is_file():
        raise ValueError(f"policy {policy!r}: not one of {', '.join(POLICY_NAMES)} and no such backends file")
    return load_backend_specs(path)


def policy_from_specs(specs: dict[str, BackendSpec], label: str = "backends") -> Policy:
    """A policy of role -> `BackendSpec` (a served planner, the local one, the teacher), named `label#<hash of the
    specs>` so that two policies with different backends never share a branch id. Built anew on each call: a backend
    that counts its calls per run (the local one) then draws a branch as it would draw a fresh run."""
    digest = hashlib.sha256(json.dumps({k: v.model_dump(mode="json") for k, v in sorted(specs.items())},
                                       sort_keys=True).encode()).hexdigest()[:8]
    return Policy(f"{label}#{digest}", build_backends(specs))


def branch_id(parent_run_id: str, step: int, decision: str, policy: str, seed: int,
              tools: ToolsMode = "recorded") -> str:
    """The branch's run id: the parent's, the step, and a hash of (decision text, policy name, seed, tool mode), so
    one branch asked for twice has one id (the command skips it) and the same branch with live tools another.
    The default mode, recorded, is left out of the hash: the ids of recorded-tool branches already written stay
    theirs.

    >>> branch_id("t1-s0-abc", 2, '{"action":"finish"}', "teacher", 0)
    't1-s0-abc~b2-842c1793'
    >>> branch_id("t1-s0-abc", 2, '{"action":"finish"}', "teacher", 0, tools="live")
    't1-s0-abc~b2-aac74b46'
    """
    key = json.dumps([decision, policy, seed, *([tools] if tools != "recorded" else [])], ensure_ascii=False)
    return f"{parent_run_id}~b{step}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def draw_run_id(parent: RunRecord, seed: int) -> str:
    """The run id the backends see in their request context: the parent's at seed 0, a derived one otherwise."""
    return parent.run_id if seed == 0 else f"{parent.run_id}#seed{seed}"


def decision_problem(state: Ledger, task: Task, config: AgentConfig, reply: ChatResponse) -> str | None:
    """Why the loop would not execute this decision at `state` (None: it would): an output that does not parse, or a
    call the loop rejects (`agent.ledger_loop.why_rejected`). Such a decision can still be applied: the loop records
    it as the planner's invalid action, as it would the planner's own."""
    action, err = parse_planner_output(reply.text)
    if action is None:
        return f"the output does not parse as a planner action: {err}"
    if isinstance(action, CallAction):
        return why_rejected(state, task, action, config)
    return None


class BranchOptions(TypedDict, total=False):
    """How a branch is made (every key optional): the decision at the step (None: the recorded one), the draw
    (`seed`), the tool services, whether recorded calls get the parent's observations, the runner of the others."""

    decision: dict[str, Any] | str | ChatResponse | None
    seed: int
    services: dict | None
    tools: ToolsMode
    tool_runner: ToolRunner | None


def branch_point(parent: RunRecord, step: int, task: Task, config: AgentConfig, policy: Policy,
                 **options: Unpack[BranchOptions]) -> ResumePoint:
    """The branch of `parent` at `step`, restored and ready to run (`resume`): its decision there (`decision`,
    None: the recorded one), its record so far (the branch's id, the parent's steps before `step`, where it comes
    from), `policy`'s backends and the tools. `tool_runner` runs the calls the recorded tools do not answer
    (default: the tools registry). Raises `ResumeError` on a record or decision it cannot use."""
    decision, seed, services = options.get("decision"), options.get("seed", 0), options.get("services")
    tools, tool_runner = options.get("tools", "recorded"), options.get("tool_runner")
    if seed < 0:
        raise ResumeError(f"seed {seed} is negative")
    runner = RecordedTools(parent, tool_runner) if tools == "recorded" else tool_runner
    reply = decision_reply(parent, step, decision)
    point = restore(parent, step, task, config, policy.backends, services=services, tool_runner=runner,
                    run_id=branch_id(parent.run_id, step, reply.text, policy.name, seed, tools),
                    draw_run_id=draw_run_id(parent, seed))
    point.decision, record = reply, point.record
    record.parent_run_id, record.parent_step, record.branch_decision = parent.run_id, step, reply.text
    record.branch_policy, record.branch_seed = policy.name, seed
    return point


async def branch_run(parent: RunRecord, step: int, task: Task, config: AgentConfig, policy: Policy,
                     **options: Unpack[BranchOptions]) -> RunRecord:
    """Branch `parent` at `step` (`branch_point`) and continue with `policy` to the end. Not judged: the caller
    grades it as it grades any run. Raises `ResumeError` on a record or decision it cannot use."""
    return await resume(branch_point(parent, step, task, config, policy, **options))


# -- the recorded policy and tools: the parent's outputs and observations, replayed ------------------------
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
