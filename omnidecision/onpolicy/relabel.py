"""Relabel the ledger states a planner visited with the decision a labeller makes for them (DAgger's relabelling).

Every state a run's planner saw (rebuilt by replaying the run's events, checked against the recorded snapshot,
exactly as the harvest does) becomes an SFT row (the planner messages of the state + the label) and an RL row
(with the label in its `label` column). The default labeller is the rule planner (`protocol.rule`), exact for
the synthetic suite; `LLMLabeller` asks any chat backend (e.g. a strong model behind an OpenAI-compatible endpoint)
and keeps its decision when it parses as a planner action. States are kept once (same planner prompt).

    python -m omnidecision.onpolicy.relabel runs/rounds/tiny-cpu/round-1/collect --out runs/relabelled
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omnidecision.collect.harvest import (
    HarvestOptions,
    _Counts,
    _manifest_digest_chars,
    harvest_run,
    load_runs,
    write_splits,
)
from omnidecision.ledger import DigestBudget, Ledger
from omnidecision.protocol import rows
from omnidecision.protocol.actions import parse_planner_output, render_action
from omnidecision.protocol.chat import ChatBackend, ChatRequest
from omnidecision.protocol.rule import rule_decision_text

logger = logging.getLogger(__name__)

Labeller = Callable[[Ledger, list[dict[str, str]]], "str | None"]


def rule_labeller(state: Ledger, prompt: list[dict[str, str]]) -> str | None:
    """The rule planner's decision (synthetic tasks: the decision the noise-free teacher makes)."""
    return rule_decision_text(state)


class LLMLabeller:
    """A chat backend as labeller: sends the state's planner prompt, keeps the reply if it parses as an action."""

    def __init__(self, backend: ChatBackend) -> None:
        self.backend = backend

    def __call__(self, state: Ledger, prompt: list[dict[str, str]]) -> str | None:
        reply = asyncio.run(self.backend.chat(ChatRequest(role="planner", messages=prompt)))
        action, _err = parse_planner_output(reply.text)
        return None if action is None else render_action(action)


def relabel_runs(paths: list[str], labeller: Labeller = rule_labeller, *, source: str = "onpolicy"
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(SFT rows, RL rows, stats) of every state the runs' planners visited, each labelled by `labeller`."""
    runs, bad = load_runs(paths, skip_bad=True)
    counts = _Counts()
    sft: list[dict[str, Any]] = []
    rl: list[dict[str, Any]] = []
    seen: set[str] = set()
    unlabelled = rejected_states = 0
    for path, lineno, rec in runs:
        budget = DigestBudget(max_chars=_manifest_digest_chars(path) or 3000)
        _, states = harvest_run(f"{path}:{lineno}", rec, HarvestOptions(), budget, counts)
        for row in states:
            key = row["prompt"][-1]["content"]
            if key in seen:
                continue
            seen.add(key)
            state = Ledger.model_validate_json(row["ledger"])
            label = labeller(state, row["prompt"])
            if label is None:
                unlabelled += 1
                continue
            rejected_states += state.last_rejected is not None
            row["label"] = label
            rl.append(row)
            sft.append(rows.sft_row(row["prompt"], label, task_id=row["task_id"], run_id=row["run_id"],
                                    step=row["step"], level=row["level"], category=row["category"], source=source))
    outcomes = Counter(rec.outcome for _, _, rec in runs)
    stats = {"runs": len(runs), "bad_lines": len(bad), "states": len(sft), "unlabelled": unlabelled,
             "states_after_a_rejection": rejected_states, "outcomes": dict(outcomes)}
    return sft, rl, stats


def write_rows(rows_: list[dict[str, Any]], kind: str, folder: Path, split: str = "train") -> int:
    """Write `rows_` as `folder/<split>-00000.parquet` with the harvest's schema; returns the row count."""
    return write_splits(rows_, kind, folder, {r["task_id"]: split for r in rows_}).get(split, 0)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO)
    sft_rows, rl_rows, info = relabel_runs(a.runs)
    write_rows(sft_rows, "sft", Path(a.out) / "sft")
    write_rows(rl_rows, "rl", Path(a.out) / "rl")
    print(json.dumps(info, indent=1))
