"""Executed returns of candidate decisions: what executing a decision from a recorded ledger state leads to.

    python -m omnidecision.grounding.returns --runs runs/demo/collect-train --run-id RUN --step 2 \
        --decision '{"action": "finish"}' --policy teacher --n 2

For a state of a recorded run (an RL row names it: `run_id`, `step`) and a candidate decision, the decision is
applied at that step and the run continued to its end with a named continuation policy (`branch.branch`: one
engine, the same loop as collection), `n` times with seeds 0..n-1; each continuation is judged as its collection
judged its runs. The executed return is the mean judged outcome (1 correct, 0 not); `closure` is the mean share of
the blocking needs filled at the end.

Continuation policies: `teacher` (the scripted teacher the run was collected with, habits included), `recipe` (the
backends the run was collected with), or a YAML file of backends (e.g. the planner being evaluated, served or local,
with the teacher answering the critic and the finalizer). The rule planner (a teacher without habits or noise) is
never a reward source: `reference=True` admits it as a labelled reference only (the audit's `rule (reference)`).

Every execution is cached by (state, decision, policy, seed) in a SQLite file (`ReturnCache`); a cached value is
returned without executing again. Each execution records its cost: CPU seconds, tool calls and tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from omnidecision.branch.branch import Policy, branch_run, build_policy, policy_specs
from omnidecision.branch.parent import ParentRun, load_parent
from omnidecision.ledger import Ledger
from omnidecision.protocol.chat import BackendSpec, ChatResponse
from omnidecision.rollout.store import read_records, trajectory_files

logger = logging.getLogger(__name__)


class Execution(BaseModel):
    """One continuation of one candidate decision from one state."""

    state: str = Field(description="`run_id:step` of the recorded state")
    decision: str = Field(description="the candidate decision's text as applied")
    policy: str = Field(description="the continuation policy's name")
    seed: int = Field(description="the continuation's seed (0: the parent's own draws)")
    run_id: str = Field(description="the branch record's run id")
    outcome: str = Field(description="the branch's stop outcome")
    correct: bool | None = Field(description="the judge's verdict on the branch's answer (None: not judged)")
    closure: float = Field(description="share of the blocking needs filled in the branch's final ledger")
    cpu_s: float = Field(description="CPU seconds of this process the execution took")
    tool_calls: int = Field(description="tool calls the branch made after the decision")
    tool_calls_by_tool: dict[str, int] = Field(default_factory=dict, description="those calls by tool")
    tokens: int = Field(description="LLM tokens the branch used after the decision")

    @property
    def value(self) -> float:
        return 1.0 if self.correct else 0.0


def closure_at_end(ledger: Ledger | None) -> float:
    """Share of the blocking needs filled (1.0 when there are none)."""
    if ledger is None:
        return 0.0
    blocking = [n for n in ledger.needs if n.role == "blocking"]
    return 1.0 if not blocking else sum(n.status == "filled" for n in blocking) / len(blocking)


def is_rule_policy(specs: dict[str, BackendSpec]) -> bool:
    """A planner backend that is the scripted teacher without habits or noise decides as the rule planner does."""
    planner = specs.get("planner") or specs.get("default")
    if planner is None or planner.kind != "teacher":
        return False
    opts = planner.options or {}
    return float(opts.get("noise", 0.0)) == 0.0 and float(opts.get("habits", 0.0)) == 0.0


class ReturnCache:
    """(state, decision, policy, seed) -> Execution, in a SQLite file (safe across processes; one row per key)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        self._mem: dict[str, str] = {}
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with sqlite3.connect(self.path) as db:
                db.execute("CREATE TABLE IF NOT EXISTS executions (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    @staticmethod
    def key(state: str, decision: str, policy: str, seed: int) -> str:
        return hashlib.sha256(json.dumps([state, decision, policy, seed]).encode()).hexdigest()

    def get(self, key: str) -> Execution | None:
        text = self._mem.get(key)
        if text is None and self.path is not None:
            with sqlite3.connect(self.path) as db:
                row = db.execute("SELECT value FROM executions WHERE key = ?", (key,)).fetchone()
            text = row[0] if row else None
        return Execution.model_validate_json(text) if text else None

    def put(self, key: str, value: Execution) -> None:
        text = value.model_dump_json()
        self._mem[key] = text
        if self.path is not None:
            with sqlite3.connect(self.path) as db:
                db.execute("INSERT OR REPLACE INTO executions VALUES (?, ?)", (key, text))


@dataclass
class Executor:
    """Executes candidate decisions from recorded states with one continuation policy; counts what it did."""

    policy_name: str
    cache: ReturnCache = field(default_factory=lambda: ReturnCache(None))
    reference: bool = False  # admit the rule planner as a (labelled) continuation policy
    executions: int = 0
    cached: int = 0
    _policies: dict[str, Policy] = field(default_factory=dict)

    def policy_for(self, parent: ParentRun) -> Policy:
        key = parent.record.run_id
        if key not in self._policies:
            specs = parent.recipe.backends
            # checked on the backends the policy is built from: a `teacher` policy over a collection whose backends
            # are not all the teacher is the default teacher, which decides as the rule planner does
            if self.policy_name != "recorded" and is_rule_policy(policy_specs(self.policy_name, specs)) \
                    and not self.reference:
                raise ValueError(f"continuation policy {self.policy_name!r} decides as the rule planner: it is "
                                 "never a reward source (reference=True for a labelled reference)")
            self._policies[key] = build_policy(self.policy_name, parent.record, specs)
        return self._policies[key]

    async def execute(self, parent: ParentRun, step: int, decision: str, seed: int) -> Execution:
        policy = self.policy_for(parent)
        state = f"{parent.record.run_id}:{step}"
        key = ReturnCache.key(state, decision, policy.name, seed)
        hit = self.cache.get(key)
        if hit is not None:
            self.cached += 1
            return hit
        t0 = time.process_time()
        # the candidate's text as the planner's reply, parsed by the loop as any planner output (a malformed one
        # becomes the planner's invalid action, as in collection)
        branch = await branch_run(parent.record, step, parent.task, parent.recipe.agent, policy,
                                  decision=ChatResponse(text=decision, model=""), seed=seed, services=parent.services,
                                  tools="recorded")
        branch = await parent.judge(branch)
        cpu = time.process_time() - t0
        before = parent.record.steps[step].ledger if step < len(parent.record.steps) else None
        counts_before = dict(before.tool_call_counts) if before else {}
        by_tool = {t: n - counts_before.get(t, 0) for t, n in branch.totals.tool_calls.items()
                   if n - counts_before.get(t, 0) > 0}
        usage_before = sum(s.usage.prompt_tokens + s.usage.completion_tokens for s in parent.record.steps[:step]
                           if s.usage is not None)
        ex = Execution(state=state, decision=decision, policy=policy.name, seed=seed, run_id=branch.run_id,
                       outcome=branch.outcome, correct=branch.judge.correct if branch.judge else None,
                       closure=round(closure_at_end(branch.final_ledger), 4), cpu_s=round(cpu, 4),
                       tool_calls=sum(by_tool.values()), tool_calls_by_tool=by_tool,
                       tokens=max(0, branch.totals.prompt_tokens + branch.totals.completion_tokens - usage_before))
        self.cache.put(key, ex)
        self.executions += 1
        return ex

    async def executed_return(self, parent: ParentRun, step: int, decision: str, n: int = 1
                              ) -> tuple[float, float, list[Execution]]:
        """(mean judged outcome, mean closure at the end, the executions) over `n` continuations."""
        runs = [await self.execute(parent, step, decision, seed) for seed in range(n)]
        return (sum(r.value for r in runs) / n, sum(r.closure for r in runs) / n, runs)


def parent_index(runs: list[Path], bad: list[str] | None = None) -> dict[str, Path]:
    """run_id -> the trajectory file holding it, over collection folders or files. A line that is not a record is
    skipped, its reason (file:line: reason) appended to `bad` for the caller to show."""
    index: dict[str, Path] = {}
    for f in trajectory_files(runs):
        for _, rec in read_records(f, skip_bad=True, bad=bad):
            index.setdefault(rec.run_id, f)
    return index


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="The executed return of one decision at one recorded state.")
    ap.add_argument("--runs", type=Path, nargs="+", required=True, help="collection folders or trajectory files")
    ap.add_argument("--run-id", required=True, help="the recorded run")
    ap.add_argument("--step", type=int, required=True, help="the state: the planner step of that run")
    ap.add_argument("--decision", required=True, help="the candidate decision (planner output JSON)")
    ap.add_argument("--policy", default="teacher", help="continuation policy: teacher, recipe or a backends YAML")
    ap.add_argument("--n", type=int, default=1, help="continuations (seeds 0..n-1)")
    ap.add_argument("--cache", type=Path, default=None, help="SQLite cache of executions")
    args = ap.parse_args(argv)
    index = parent_index(args.runs)
    if args.run_id not in index:
        raise SystemExit(f"run {args.run_id!r} is in none of {[str(r) for r in args.runs]}")
    parent = load_parent(index[args.run_id], args.run_id)
    ex = Executor(args.policy, ReturnCache(args.cache))
    value, closure, runs = asyncio.run(ex.executed_return(parent, args.step, args.decision, args.n))
    print(json.dumps({"executed_return": value, "closure": closure,
                      "runs": [r.model_dump() for r in runs]}, indent=2))


if __name__ == "__main__":
    main()
