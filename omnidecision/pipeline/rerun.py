"""Does a rerun reproduce? Compare two runs of the same experiment start: weights, per-replicate accuracies, tasks.

    python -m omnidecision.pipeline.rerun runs/exp-start2/experiment.json runs/exp-start2-rerun/experiment.json \
        --start 2 --models runs/exp-start2/seed-2/models runs/exp-start2-rerun/seed-2/models \
        --out docs/results/rerun-start2.json

Issue 36 item 1: the same start, code and kind of machine must write the same per-replicate accuracies. The report
lists, per planner unit (`grpo_judge.r1`, ...), whether the exported weights are byte-identical (sha256 of the
safetensors), both accuracies, and how many test tasks' outcomes differ; `identical` is true only if all agree.
Either result file may be a pooled one: only the start asked for is read.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any


def weights(models: Path) -> dict[str, str]:
    """planner folder → sha256 of its safetensors (every exported planner and the judge; training folders skipped)."""
    got = {}
    for folder in sorted(p for p in models.iterdir() if p.is_dir() and not p.name.endswith("-run")):
        files = sorted(folder.glob("*.safetensors"))
        if files:
            got[folder.name] = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    return got


def _start_part(result: dict[str, Any], start: str, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(per-replicate accuracy, per-task outcomes) of one start, each keyed arm → replicate."""
    acc = {arm: by[start] for arm, by in result["per_replicate_accuracy"].items() if start in by}
    if not acc:
        raise SystemExit(f"{path}: start {start} is not in per_replicate_accuracy (starts {result.get('seeds')})")
    outcomes = {arm: by.get(start, {}) for arm, by in result.get("outcomes", {}).items()}
    return acc, outcomes


def compare(a: dict[str, Any], b: dict[str, Any], start: str, *, paths: tuple[Path, Path] = (Path("A"), Path("B")),
            models: tuple[Path, Path] | None = None) -> dict[str, Any]:
    """Unit by unit: weights equal, accuracies (a, b), test tasks whose outcome differs; `identical` over all."""
    acc_a, out_a = _start_part(a, start, paths[0])
    acc_b, out_b = _start_part(b, start, paths[1])
    w_a, w_b = (weights(models[0]), weights(models[1])) if models else ({}, {})
    units: dict[str, dict[str, Any]] = {}
    for arm in sorted(set(acc_a) | set(acc_b)):
        for rep in sorted(set(acc_a.get(arm, {})) | set(acc_b.get(arm, {}))):
            name = f"{arm}.{rep}"
            key = name if name in w_a or name in w_b else arm  # sft, oracle_sft: trained once, exported bare
            ta, tb = out_a.get(arm, {}).get(rep, {}), out_b.get(arm, {}).get(rep, {})
            row: dict[str, Any] = {"accuracy": [acc_a.get(arm, {}).get(rep), acc_b.get(arm, {}).get(rep)],
                                   "tasks_differ": sum(ta.get(t) != tb.get(t) for t in set(ta) | set(tb))}
            if key in w_a or key in w_b:
                row["weights_equal"] = w_a.get(key) is not None and w_a.get(key) == w_b.get(key)
            row["equal"] = (row["accuracy"][0] == row["accuracy"][1] and row["tasks_differ"] == 0
                            and row.get("weights_equal", True))
            units[name] = row
    # what no arm is named for (the judge, the untrained planner): weights only
    for key in sorted((set(w_a) | set(w_b)) - {u.rsplit(".", 1)[0] for u in units} - set(units)):
        units[key] = {"weights_equal": w_a.get(key) is not None and w_a.get(key) == w_b.get(key)}
        units[key]["equal"] = units[key]["weights_equal"]
    differ = [n for n, r in units.items() if not r["equal"]]
    spread = [abs(r["accuracy"][0] - r["accuracy"][1]) for r in units.values()
              if "accuracy" in r and None not in r["accuracy"]]
    return {"start": start, "files": [str(p) for p in paths], "units": units, "identical": not differ,
            "differ": differ, "max_abs_accuracy_difference": max(spread, default=None),
            "cpus": [_cpu(a, start), _cpu(b, start)]}


def _cpu(result: dict[str, Any], start: str) -> Any:
    seeds = [str(s) for s in result.get("seeds", [])]
    prov = result.get("provenance") or []
    return prov[seeds.index(start)].get("cpu") if start in seeds and len(prov) == len(seeds) else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--start", required=True, help="the start both files hold, e.g. 2")
    ap.add_argument("--models", nargs=2, type=Path, help="the two runs' models folders (weights compared)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    a, b = (json.loads(p.read_text()) for p in (args.a, args.b))
    report = compare(a, b, args.start, paths=(args.a, args.b), models=tuple(args.models) if args.models else None)
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(f"{len(report['units'])} units, identical: {report['identical']}"
          + (f"; differ: {', '.join(report['differ'])}" if report["differ"] else ""))
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
