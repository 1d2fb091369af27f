"""Two evaluations of one planner on the same tasks, compared decision by decision (serving parity in the loop).

    python -m omnidecision.eval.agreement runs/demo/eval/sft.vllm/test runs/demo/eval/sft/test

Over the runs both hold (matched by task and sample): how many have the same planner output at every step, how
many steps were compared and agree, how many end with the same outcome and verdict, and for the first runs that
part, where. The pipeline evaluates its SFT planner both served by vLLM and in-process (backends/local.py) and
writes this into the summary (`serving_parity`). Exit status 1 when a run differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _runs(folder: Path) -> dict[tuple[str, int], dict[str, Any]]:
    out = {}
    with (folder / "trajectories.jsonl").open() as fh:
        for line in fh:
            r = json.loads(line)
            out[(r["task_id"], r["sample"])] = r
    return out


def decision_agreement(a: str | Path, b: str | Path, *, examples: int = 5) -> dict[str, Any]:
    """The agreement of eval folders `a` and `b` (each with trajectories.jsonl)."""
    ra, rb = _runs(Path(a)), _runs(Path(b))
    keys = sorted(set(ra) & set(rb))
    same = steps = same_steps = 0
    parted: list[dict[str, Any]] = []
    for k in keys:
        sa = [s["raw_output"] for s in ra[k]["steps"]]
        sb = [s["raw_output"] for s in rb[k]["steps"]]
        n = min(len(sa), len(sb))
        first = next((i for i in range(n) if sa[i] != sb[i]), None if len(sa) == len(sb) else n)
        steps += n
        same_steps += sum(x == y for x, y in zip(sa, sb, strict=False))
        if first is None:
            same += 1
        elif len(parted) < examples:
            parted.append({"task": k[0], "sample": k[1], "step": first,
                           "a": sa[first] if first < len(sa) else None, "b": sb[first] if first < len(sb) else None})
    outcomes = sum(ra[k]["outcome"] == rb[k]["outcome"] and ra[k]["judge"] == rb[k]["judge"] for k in keys)
    return {"runs": len(keys), "runs_identical": same, "steps": steps, "steps_identical": same_steps,
            "same_outcome": outcomes, "first_differences": parted}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m omnidecision.eval.agreement EVAL_A EVAL_B", file=sys.stderr)
        return 2
    r = decision_agreement(*args)
    print(f"{r['runs']} runs in both; identical decisions at every step: {r['runs_identical']}; steps compared "
          f"{r['steps']}, identical {r['steps_identical']}; same outcome and verdict: {r['same_outcome']}")
    for d in r["first_differences"]:
        print(f"  {d['task']} s{d['sample']} parts at step {d['step']}: {d['a']!r} vs {d['b']!r}")
    return 1 if r["runs_identical"] < r["runs"] else 0


if __name__ == "__main__":
    sys.exit(main())
