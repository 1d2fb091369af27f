"""The executed reward: a GRPO reward whose value for each candidate is its executed return (grounding/returns.py).

A GRPO recipe names it by import path (rewards never import the agent; the layer above reaches GRPO this way), with
its arguments under `reward_kwargs` (configs/grpo/tiny-cpu-exec.yaml):

    reward_funcs: [format, omnidecision.grounding.reward.get_executed_reward]
    reward_kwargs:
      omnidecision.grounding.reward.get_executed_reward: {dataset: "${dataset_name}", policy: teacher}

Each RL row names its recorded run and step (`run_id`, `step`); the candidate is applied there and the run continued
with the continuation policy (`teacher`: the collection's teacher with habits; never the rule planner), `n` times;
the reward is the mean judged outcome in [0, 1]. GRPO's advantage is then group-relative over the K candidates of the
same state, as for every reward. A row whose run is not in the collections is scored None (not applicable). The
collections are the ones the harvest read (`runs`, or the `sources` of the harvest's stats.json next to `dataset`).
Executions are cached (`cache`, default `executed_returns.sqlite` in the run's output folder) and their cost —
CPU seconds, executions, tool calls, tokens — is written to `executed_cost.json` there after every batch.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omnidecision.branch.parent import ParentRun, load_parent
from omnidecision.grounding.returns import Executor, ReturnCache, parent_index
from omnidecision.outputs import write_json_atomic
from omnidecision.rewards.decision import completion_text

logger = logging.getLogger(__name__)


def harvest_sources(dataset: str | Path) -> list[Path]:
    """The collections a harvest read: `sources` of the stats.json in the harvest folder (`dataset` is that folder
    or its rl/)."""
    path = Path(dataset)
    for folder in (path, path.parent):
        stats = folder / "stats.json"
        if stats.is_file():
            sources = json.loads(stats.read_text("utf-8")).get("sources") or []
            return [Path(s) for s in sources]
    raise ValueError(f"{dataset}: no harvest stats.json next to the RL dataset (give the reward `runs`)")


class ExecutedReward:
    """The reward function TRL calls: `(completions, run_id, step, **columns) -> list[float | None]`."""

    __name__ = "executed_reward"

    def __init__(self, runs: Sequence[str | Path], policy: str, n: int, cache: str | Path | None,
                 cost_file: str | Path | None) -> None:
        self.index = parent_index([Path(r) for r in runs])
        self.executor = Executor(policy, ReturnCache(cache))
        self.n = n
        self.cost_file = Path(cost_file) if cost_file else None
        self.parents: dict[str, ParentRun] = {}
        self.cost = {"candidates": 0, "executions": 0, "cached": 0, "cpu_s": 0.0, "tool_calls": 0, "tokens": 0,
                     "calls": 0}

    def _parent(self, run_id: str) -> ParentRun | None:
        if run_id not in self.index:
            return None
        if run_id not in self.parents:
            self.parents[run_id] = load_parent(self.index[run_id], run_id)
        return self.parents[run_id]

    async def _score(self, texts: list[str], run_ids: list[str], steps: list[int]) -> list[float | None]:
        async def one(text: str, run_id: str, step: int) -> float | None:
            parent = self._parent(run_id)
            if parent is None:
                return None
            value, _, runs = await self.executor.executed_return(parent, int(step), text, self.n)
            for r in runs:
                self.cost["cpu_s"] += r.cpu_s
                self.cost["tool_calls"] += r.tool_calls
                self.cost["tokens"] += r.tokens
            return value

        # a group often holds the same candidate several times: each distinct (state, decision) executes once
        keys = list(zip(texts, run_ids, [int(s) for s in steps], strict=True))
        distinct = list(dict.fromkeys(keys))
        values = dict(zip(distinct, await asyncio.gather(*(one(*k) for k in distinct)), strict=True))
        return [values[k] for k in keys]

    def __call__(self, completions: Sequence[object], run_id: Sequence[str] | None = None,
                 step: Sequence[int] | None = None, **_: Any) -> list[float | None]:
        if run_id is None or step is None:
            raise KeyError("the executed reward needs the RL rows' `run_id` and `step` columns (harvest's rl/)")
        before = self.executor.executions
        # a sync caller (TRL) in a thread without a running loop: one loop per batch
        values = asyncio.run(self._score([completion_text(c) for c in completions], list(run_id), list(step)))
        self.cost["calls"] += 1
        self.cost["candidates"] += len(values)
        self.cost["executions"], self.cost["cached"] = self.executor.executions, self.executor.cached
        if self.cost_file is not None:
            self.cost_file.parent.mkdir(parents=True, exist_ok=True)
            # rewritten every batch: atomically, so a kill mid-training leaves the last whole count
            write_json_atomic(self.cost_file, {**self.cost, "cpu_s": round(self.cost["cpu_s"], 3),
                                               "policy": self.executor.policy_name, "n": self.n}, indent=None)
        logger.debug("executed reward: %d new executions", self.executor.executions - before)
        return values


def get_executed_reward(runs: Sequence[str] | str | None = None, dataset: str | None = None, policy: str = "teacher",
                        n: int = 1, cache: str | None = None, output_dir: str | None = None) -> ExecutedReward:
    """The executed reward (module docstring). `runs`: the collections holding the rows' runs (default: the
    harvest's sources, read next to `dataset`); `output_dir`: where the cache and `executed_cost.json` go."""
    if n < 1:
        raise ValueError(f"executed reward: n must be >= 1, got {n}")
    if runs is None:
        if dataset is None:
            raise ValueError("executed reward: give `runs` (the collections) or `dataset` (the harvest's RL folder)")
        runs = [str(p) for p in harvest_sources(dataset)]
    elif isinstance(runs, str):
        runs = [runs]
    out = Path(output_dir) if output_dir else None
    return ExecutedReward(runs, policy, n, cache or (out / "executed_returns.sqlite" if out else None),
                          out / "executed_cost.json" if out else None)
