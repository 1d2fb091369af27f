"""Greedy decisions of a planner on the source_switch states of a harvest, split by the tool the rule calls.

`python -m omnidecision.sft.heldout --states` gives the share per state kind; this splits source_switch's
`first_of_several` and `switch` states further by the rule's tool, which shows whether the planner reads the
need's line or names one tool whatever the line says (docs/research/source-switch.md, "The switch as a copy"):

    python scripts/analysis/switch_states.py runs/experiment/seed-2/models/oracle_sft \
        runs/experiment/seed-2/data-oracle/rl
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import pyarrow.parquet as pq

from omnidecision.ledger import Ledger
from omnidecision.protocol.actions import CallAction, render_action
from omnidecision.protocol.rule import rule_action
from omnidecision.sft.heldout import generate, state_kind


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path)
    p.add_argument("rl", type=Path, help="a harvest's rl/ folder (`harvest --label rule`)")
    p.add_argument("--split", default="train")
    p.add_argument("--family", default="source_switch")
    a = p.parse_args()
    rows = [r for f in sorted(a.rl.glob(f"{a.split}-*.parquet")) for r in pq.read_table(f).to_pylist()
            if r["category"] == a.family]
    states = [(r, Ledger.model_validate_json(r["ledger"])) for r in rows]
    states = [(r, s) for r, s in states if state_kind(s) in ("first_of_several", "switch")]
    outputs = generate(a.model, [r["prompt"] for r, _ in states])
    counts: collections.Counter[str] = collections.Counter()
    for (_, s), out in zip(states, outputs, strict=True):
        want = rule_action(s)
        assert isinstance(want, CallAction)
        counts[f"{state_kind(s)} rule={want.tool} right={out.strip() == render_action(want)}"] += 1
    print(json.dumps(dict(sorted(counts.items())), indent=1))


if __name__ == "__main__":
    main()
