"""Every decision of an evaluated planner that differs from the rule planner's at the same ledger state, by kind.

    python scripts/analysis/wrong_decisions.py runs/arms/seed-0/eval/oracle_sft/test [more eval folders] [--list]

Kinds: `tool` (the right target, another tool than the one the call runs by default), `need` (another need, or a
slot, than the rule's), `call_for_finish` (a call where the rule finishes), `finish_for_call` (a finish where the rule
calls). A call that names no tool runs the loop's default (`protocol.actions.effective_tool`), as the rule's does.
Read from each folder's trajectories.jsonl (the ledger the planner saw at each step).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from omnidecision.ledger import Ledger
from omnidecision.protocol.actions import CallAction, effective_tool, parse_planner_output
from omnidecision.protocol.rule import rule_action


def kind(state: Ledger, action: Any) -> str | None:
    """How `action` differs from the rule decision in `state` (None: it does not)."""
    rule = rule_action(state)
    if not isinstance(action, CallAction):
        return None if not isinstance(rule, CallAction) else "finish_for_call"
    if not isinstance(rule, CallAction):
        return "call_for_finish"
    if (action.need, action.slot) != (rule.need, rule.slot):
        return "need"
    return None if effective_tool(state, action) == rule.tool else "tool"


def wrong(folder: Path) -> list[dict[str, Any]]:
    """One row per differing decision: family, task, step, kind, what the planner wrote, what the rule decides."""
    out = []
    for line in (folder / "trajectories.jsonl").read_text("utf-8").splitlines():
        rec = json.loads(line)
        for step in rec["steps"]:
            if step.get("ledger") is None or not step.get("action"):
                continue
            state = Ledger.model_validate(step["ledger"])
            action, _ = parse_planner_output(json.dumps(step["action"]))
            k = kind(state, action) if action is not None else None
            if k is not None:
                out.append({"family": rec.get("category"), "task": rec["task_id"], "step": step["step"], "kind": k,
                            "planner": step["action"], "rule": rule_action(state).model_dump(exclude_none=True)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path, help="`omnidecision eval` output folders")
    ap.add_argument("--list", action="store_true", help="print every differing decision too")
    args = ap.parse_args()
    for folder in args.folders:
        rows = wrong(folder)
        counts = Counter((r["kind"], r["family"]) for r in rows)
        print(f"{folder}: {len(rows)} decisions differ from the rule's")
        for (k, fam), n in sorted(counts.items()):
            print(f"  {k:16s} {fam}: {n}")
        if args.list:
            for r in rows:
                print("   ", json.dumps(r))


if __name__ == "__main__":
    main()
