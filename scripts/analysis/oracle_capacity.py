"""Why the rule-labelled planner (oracle_sft) misses families: retrain it on one start's data with other shapes/seeds.

Reuses a finished experiment start (its `data/sft` for the tokenizer, its `data-oracle/sft` rows, its test suite)
and, per variant `LAYERSxSEED`, builds the untrained tiny planner with that many decoder layers, trains it with the
start's SFT recipe and budget (SFT seed = SEED), exports it, evaluates it in-process on the start's test tasks and
relabels every state it visited with the rule planner, so each wrong decision gets a kind: the wrong tool where
nothing was tried yet (the `tool=` field alone decides), the wrong tool after an empty return (`tried=` shown),
the wrong need, the wrong action. Two variants run side by side, one thread each (the scheduler's environment).

    python scripts/analysis/oracle_capacity.py runs/exp-start2/seed-2 --out runs/oracle-capacity \
        --variants 3x2 2x3 --steps 2000 --results docs/results/oracle-capacity.json   # the measured run
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Queue
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from omnidecision.onpolicy.relabel import relabel_runs  # noqa: E402
from omnidecision.pipeline.scheduler import step_env  # noqa: E402


def cli(argv: list[str], log: Path, core: int) -> float:
    """One omnidecision command with one thread on one core; its output appended to `log`. Returns wall seconds."""
    t0 = time.monotonic()
    with log.open("a") as fh:
        fh.write(f"=== {' '.join(argv)}\n")
        fh.flush()
        subprocess.run(["taskset", "-c", str(core), sys.executable, "-m", "omnidecision.cli", *argv],
                       stdout=fh, stderr=subprocess.STDOUT, env=step_env(1), check=True, cwd=ROOT)
    return round(time.monotonic() - t0, 1)


def error_kinds(report_dir: Path) -> dict[str, Any]:
    """Every decision of the runs against the rule planner's at the same state, counted by kind and family."""
    _sft, rl, _stats = relabel_runs([str(report_dir)])
    kinds: Counter[str] = Counter()
    by_family: dict[str, Counter[str]] = {}
    for row in rl:
        fam = by_family.setdefault(row["category"], Counter())
        fam["states"] += 1
        label = json.loads(row["label"]) if row["label"] else None
        try:
            decision = json.loads(row["decision"]) if row["decision"] else None
        except json.JSONDecodeError:
            decision = None
        if label == decision:
            continue
        tried = "tried=" in row["prompt"][0]["content"]
        if decision is None or label is None:
            kind = "invalid"
        elif label["action"] != decision["action"]:
            kind = f"action {label['action']} -> {decision['action']}"
        elif label.get("need") != decision.get("need"):
            kind = "need"
        elif label.get("tool") != decision.get("tool"):
            kind = "tool, after an empty return" if tried else "tool, nothing tried"
        else:
            kind = "arguments"
        kinds[kind] += 1
        fam["wrong"] += 1
    return {"states": len(rl), "wrong": sum(kinds.values()), "kinds": dict(kinds.most_common()),
            "by_family": {k: dict(v) for k, v in sorted(by_family.items())}}


def variant(start: Path, out: Path, name: str, steps: int, core: int) -> dict[str, Any]:
    layers, seed = (int(x) for x in name.split("x"))
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    log = d / "log.txt"
    untrained, run, model, ev = d / "untrained", d / "oracle_sft-run", d / "oracle_sft", d / "eval"
    test_n = sum(1 for line in (start / "tasks-test/tasks.jsonl").open() if line.strip())
    times = {}
    if not (untrained / "config.json").exists():
        times["tiny-planner"] = cli(["tiny-planner", "--out", str(untrained), "--data", str(start / "data/sft"),
                                     "--heads", "4", "--layers", str(layers)], log, core)
    if not (model / "config.json").exists():
        times["sft"] = cli(["sft", "--config", str(ROOT / "configs/sft/tiny-cpu.yaml"), "--model_name_or_path",
                            str(untrained), "--dataset_name", str(start / "data-oracle/sft"), "--output_dir", str(run),
                            "--max_steps", str(steps), "--eval_steps", "250", "--save_steps", "250",
                            "--seed", str(seed)], log, core)
        times["export"] = cli(["export", str(run), "--out", str(model)], log, core)
    if not (ev / "report.json").exists():
        times["eval"] = cli(["eval", "--config", str(ROOT / "configs/eval/synthetic-tiny-local.yaml"), "--name",
                             f"oracle_sft.{name}", "--tasks.path", str(start / "tasks-test"), "--tasks.limit",
                             str(test_n), "--backends.planner.model", str(model), "--out", str(ev),
                             "--no-progress"], log, core)
    report = json.loads((ev / "report.json").read_text())
    sel = json.loads((run / "checkpoint_selection.json").read_text())
    state = json.loads(sorted(run.glob("checkpoint-*/trainer_state.json"),
                              key=lambda p: int(p.parent.name.split("-")[1]))[-1].read_text())
    return {"layers": layers, "sft_seed": seed, "steps": steps, "accuracy": report["accuracy"],
            "by_family": {k: round(v["accuracy"], 3) for k, v in report["by_category"].items()},
            "repeat_after_empty": report["decisions"]["repeat_after_empty"]["rate"],
            "chosen_step": sel["chosen_step"],
            "dev_loss": {h["step"]: round(h["eval_loss"], 4) for h in state["log_history"] if "eval_loss" in h},
            "errors": error_kinds(ev), "wall_s": times}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("start", type=Path, help="a finished experiment start, e.g. runs/exp-start2/seed-2")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--variants", nargs="+", required=True, help="LAYERSxSEED, e.g. 2x3 3x2")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--results", type=Path, help="also write the table here (e.g. docs/results/...)")
    args = ap.parse_args()
    start = args.start.resolve()
    cores: Queue[int] = Queue()
    for core in (0, 1):
        cores.put(core)

    def on_a_free_core(name: str) -> dict[str, Any]:
        core = cores.get()  # two variants side by side, each on a core of its own
        try:
            return variant(start, args.out.resolve(), name, args.steps, core)
        finally:
            cores.put(core)

    with ThreadPoolExecutor(2) as pool:
        futures = {v: pool.submit(on_a_free_core, v) for v in args.variants}
        rows = {v: f.result() for v, f in futures.items()}
    # the start's own oracle_sft (the experiment's, 2 layers, SFT seed = the start) as the reference row
    ref = start / "eval/oracle_sft/test"
    result = {"start": str(args.start), "command": " ".join(sys.argv),
              "reference": {"accuracy": json.loads((ref / "report.json").read_text())["accuracy"],
                            "errors": error_kinds(ref)} if (ref / "report.json").exists() else None,
              "variants": rows}
    text = json.dumps(result, indent=1)
    (args.out / "oracle-capacity.json").write_text(text)
    if args.results:
        args.results.write_text(text)
    for v, r in rows.items():
        print(v, r["accuracy"], r["errors"]["kinds"], r["by_family"])


if __name__ == "__main__":
    main()
