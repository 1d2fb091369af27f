"""The reward audit: every reward proxy against what executing the candidates leads to, on your own states.

    omnidecision audit rewards --data runs/demo/data/rl --runs runs/demo/collect-dev \
        --planner runs/demo/models/sft --judge runs/demo/models/judge --out runs/demo/audit

For a sample of ledger states (rows of a harvest's RL dataset, each naming its recorded run and step) and K candidate
decisions per state — sampled from a planner (`--planner`, at `--temperature`) or drawn from the state's action
space (every call on an actionable need with one of its listed tools, and finish) — the audit scores each candidate
with every proxy (each closure check, the combined closure reward, the learned judge, the GRPO recipe's summed
reward) and executes it from its state with a continuation policy (grounding/returns.py). grounding/metrics.py
compares them: AUROC, within-group rank correlation (what GRPO's advantage reads), top-1 agreement, calibration;
overall, per family and per kind of group. The report is `OUT/audit.json`, `OUT/audit.md` and `OUT/audit.png`.

Candidates the planner writes identically are executed once (the cache); a state whose run is in none of `--runs`
is skipped and counted; a line of `--runs` that is not a record is skipped, its reason (file:line: reason) in the
report's `skipped_lines` and on the command's stderr. The rule planner is never a continuation policy here
(returns.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnidecision.branch.parent import ParentRun, load_parent
from omnidecision.grounding.metrics import Candidate, audit_metrics
from omnidecision.grounding.report import write_report
from omnidecision.grounding.returns import Executor, ReturnCache, parent_index
from omnidecision.ledger import Ledger, actionable_need_indices, listed_tools
from omnidecision.modeling import generate_decisions, load_planner
from omnidecision.protocol.actions import CallAction, FinishAction, parse_planner_output
from omnidecision.provenance import cpu_model, git_revision
from omnidecision.rewards import CHECKS, get_check_reward, get_reward
from omnidecision.rl.rft import score_groups

logger = logging.getLogger(__name__)

ProxyFunc = Callable[..., list[float | None]]


@dataclass
class AuditSettings:
    """What one audit samples, executes and scores."""

    states: int = 40
    k: int = 4
    continuations: int = 1
    policy: str = "teacher"
    split: str = "validation"
    temperature: float = 1.0
    max_new_tokens: int = 48
    seed: int = 0
    extra_proxies: dict[str, ProxyFunc] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditInputs:
    """What one audit reads: a harvest's RL states (`data`), the runs they were recorded in, and optionally the
    planner that samples the candidates, the learned judge and the GRPO recipe audited as proxies, and the price
    table of the executions' tool calls."""

    data: Path
    runs: tuple[Path, ...]
    planner: Path | None = None
    judge: Path | None = None
    recipe: Path | None = None
    prices: Path | None = None

    def paths(self) -> list[Path | None]:
        """Every input path (an output must never be, hold or lie inside one)."""
        return [self.data, *self.runs, self.planner, self.judge, self.recipe, self.prices]


def load_rows(data: Path, split: str) -> list[dict[str, Any]]:
    """The RL rows of one split of a harvest's RL dataset (`harvest`'s `OUT/rl`, parquet files per split)."""
    from datasets import load_dataset

    files = sorted(data.glob(f"{split}-*.parquet"))
    if not files:
        raise ValueError(f"{data}: no {split} split (expected {split}-*.parquet, as `omnidecision harvest` writes)")
    return list(load_dataset("parquet", data_files={split: [str(f) for f in files]}, split=split))


def action_label(text: str) -> str:
    """`finish`, `call:<need>:<tool>` or `invalid`: what a candidate decides, for grouping by what differs."""
    action, _ = parse_planner_output(text)
    if isinstance(action, FinishAction):
        return "finish"
    if isinstance(action, CallAction):
        return f"call:{action.need if action.need is not None else action.slot}:{action.tool or '-'}"
    return "invalid"


def action_space(state: Ledger) -> list[str]:
    """Every call on an actionable need with one of its listed tools, and finish (as planner outputs)."""
    calls = [json.dumps({"action": "call", "need": i, "tool": t})
             for i in actionable_need_indices(state) for t in listed_tools(state.needs[i])]
    return [*calls, json.dumps({"action": "finish"})]


def sample_candidates(rows: Sequence[dict[str, Any]], k: int, planner: Path | None, s: AuditSettings
                      ) -> list[list[str]]:
    """K candidates per row: the planner's samples, else K draws (without replacement while they last) from the
    state's action space."""
    if planner is not None:
        import torch

        model, tokenizer = load_planner(planner)
        torch.manual_seed(s.seed)
        return generate_decisions(model, tokenizer, [r["prompt"] for r in rows], do_sample=True,
                                  num_return_sequences=k, temperature=s.temperature, max_new_tokens=s.max_new_tokens)
    rng = random.Random(s.seed)
    out = []
    for r in rows:
        space = action_space(Ledger.model_validate_json(r["ledger"]))
        draws = rng.sample(space, min(k, len(space)))
        out.append(draws + [rng.choice(space) for _ in range(k - len(draws))])
    return out


def proxy_scores(rows: Sequence[dict[str, Any]], groups: list[list[str]], judge: Path | None, recipe: Path | None,
                 extra: dict[str, ProxyFunc]) -> dict[str, list[list[float | None]]]:
    """proxy name -> per row, per candidate: each closure check, `closure` (the weighted rubric), `judge` (the learned
    judge), `recipe` (the GRPO recipe's rewards summed with its weights, as TRL sums them), and `extra`."""
    k = len(groups[0])
    flat = [c for g in groups for c in g]
    columns = {key: [r[key] for r in rows for _ in range(k)] for key in rows[0] if key not in ("prompt", "completion")}
    columns["prompts"] = [r["prompt"] for r in rows for _ in range(k)]
    funcs: dict[str, ProxyFunc] = {name: get_check_reward(name) for name in CHECKS}
    funcs["closure"] = get_reward("closure")
    if judge is not None:
        funcs["judge"] = get_reward("learned_judge", path=str(judge))
    funcs.update(extra)
    out: dict[str, list[list[float | None]]] = {}
    for name, func in funcs.items():
        values = func(flat, **columns)
        out[name] = [values[i * k:(i + 1) * k] for i in range(len(rows))]
    if recipe is not None:
        out["recipe"] = recipe_scores(recipe, rows, groups, judge)
    return out


def recipe_scores(recipe: Path, rows: Sequence[dict[str, Any]], groups: list[list[str]], judge: Path | None
                  ) -> list[list[float | None]]:
    """The GRPO recipe's combined reward (its reward_funcs and weights; the judge at `judge` when it names one)."""
    from omnidecision.rl.config import parse_args  # heavy: the GRPO recipe's dataclasses load trl

    overrides = ["--judge_path", str(judge)] if judge is not None else []
    k = str(len(groups[0]))  # one group per batch: only the recipe's rewards and weights matter here
    script, training, _ = parse_args(["--config", str(recipe), "--num_generations", k, "--generation_batch_size", k,
                                      "--per_device_train_batch_size", k, *overrides])
    with tempfile.TemporaryDirectory() as tmp:
        return score_groups(script, training, list(rows), groups, tmp)  # type: ignore[return-value]


def _price(cost: dict[str, Any], prices: Path | None) -> dict[str, Any]:
    """Tool calls at the price table's per-call prices (kinds); tokens stay unpriced for the offline teacher."""
    if prices is None:
        return {**cost, "usd": None, "price_note": "no price table given"}
    from omnidecision.eval.prices import load_prices  # grounding loads eval only inside functions (import rules)

    table = load_prices(prices)
    usd = 0.0
    for tool, n in cost["tool_calls_by_tool"].items():
        found = table.price_for(tool, "")
        usd += n * ((found[0].per_call or 0.0) if found else 0.0)
    return {**cost, "usd": round(usd, 6), "price_note": f"tool calls priced with {prices}; tokens of the offline "
                                                        "continuation policy are not billed"}


def audited_states(data: Path, runs: list[Path], split: str, skipped_lines: list[str] | None = None
                   ) -> tuple[dict[str, Path], list[dict[str, Any]], list[dict[str, Any]]]:
    """(run id -> its file, every state of `split`, the states whose run is in `runs`): what the audit samples from,
    and what `audit rewards --dry-run` checks; a ValueError names what is missing."""
    index = parent_index(runs, skipped_lines)
    rows_all = load_rows(data, split)
    known = [r for r in rows_all if r["run_id"] in index]
    if not known:
        raise ValueError(f"none of the {len(rows_all)} {split} states of {data} comes from a run in "
                         f"{[str(r) for r in runs]}: give the collection folders the harvest read")
    return index, rows_all, known


def run_audit(inputs: AuditInputs, out: Path, *, cache: Path | None = None, settings: AuditSettings | None = None,
              skipped_lines: list[str] | None = None) -> dict[str, Any]:
    """Sample states and candidates, score them with every proxy, execute them, write the report; returns it.
    `cache`: the executed returns' cache (default `out/returns.sqlite`). The reasons of the `--runs` lines skipped as
    malformed go to `skipped_lines` (given: filled before any refusal, so a caller can show them with it) and the
    report."""
    s = settings or AuditSettings()
    skipped_lines = [] if skipped_lines is None else skipped_lines
    index, rows_all, known = audited_states(inputs.data, list(inputs.runs), s.split, skipped_lines)
    rows = random.Random(s.seed).sample(known, min(s.states, len(known)))
    groups = sample_candidates(rows, s.k, inputs.planner, s)
    scores = proxy_scores(rows, groups, inputs.judge, inputs.recipe, s.extra_proxies)
    executor = Executor(s.policy, ReturnCache(cache or out / "returns.sqlite"))
    parents: dict[str, ParentRun] = {}
    cands: list[Candidate] = []
    t0 = time.process_time()
    all_runs = []
    for i, (row, group) in enumerate(zip(rows, groups, strict=True)):
        if row["run_id"] not in parents:
            parents[row["run_id"]] = load_parent(index[row["run_id"]], row["run_id"])
        parent = parents[row["run_id"]]
        for j, text in enumerate(group):
            value, closure, execs = asyncio.run(executor.executed_return(parent, int(row["step"]), text,
                                                                         s.continuations))
            all_runs += execs
            cands.append(Candidate(state=f"{row['run_id']}:{row['step']}", family=row.get("category") or "",
                                   decision=text, action=action_label(text), executed=value, closure=closure,
                                   proxies={name: v[i][j] for name, v in scores.items()}))
    by_tool: dict[str, int] = {}
    for e in all_runs:
        for tool, n in e.tool_calls_by_tool.items():
            by_tool[tool] = by_tool.get(tool, 0) + n
    cost = {"cpu_s": round(time.process_time() - t0, 3), "executions": executor.executions, "cached": executor.cached,
            "tool_calls": sum(e.tool_calls for e in all_runs), "tokens": sum(e.tokens for e in all_runs),
            "tool_calls_by_tool": by_tool}
    proxies = list(scores)
    report = {"git_revision": git_revision(), "cpu": cpu_model(),
              "data": str(inputs.data), "runs": [str(r) for r in inputs.runs], "split": s.split, "states": len(rows),
              "k": s.k, "continuations": s.continuations, "policy": s.policy,
              "candidates_from": str(inputs.planner or "action space"),
              "temperature": s.temperature, "seed": s.seed, "skipped_states": len(rows_all) - len(known),
              "skipped_lines": skipped_lines,
              "cost": _price(cost, inputs.prices), "metrics": audit_metrics(cands, proxies),
              "candidates": [c.model_dump() for c in cands]}
    write_report(report, out)
    return report
