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
  for any other (`branch.recorded.RecordedTools`); `live` runs every call again;
- `seed` 0: the backends draw as in the parent (same run id and sample in their request context), so a deterministic
  policy reproduces the parent after the recorded decision; seed k > 0: another draw of the same policy.

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
from omnidecision.agent.loop import why_rejected
from omnidecision.agent.runtime import ToolRunner
from omnidecision.backends.factory import build_backends, load_backend_specs
from omnidecision.branch.recorded import RecordedPolicy, RecordedTools
from omnidecision.branch.resume import ResumeError, ResumePoint, decision_reply, restore, resume
from omnidecision.ledger import Ledger
from omnidecision.protocol.actions import CallAction, parse_planner_output
from omnidecision.protocol.chat import BackendSpec, ChatBackend, ChatResponse
from omnidecision.protocol.records import RunRecord
from omnidecision.tasks.schema import Task

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
    call the loop rejects (`agent.loop.why_rejected`). Such a decision can still be applied: the loop records it as
    the planner's invalid action, as it would the planner's own."""
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
