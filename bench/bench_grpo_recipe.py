"""Measure (not assert) what each part of the GRPO recipe adds, on a finished `make demo` folder.

From the demo's SFT checkpoint (`models/sft`), on its harvest (`data`, holding rl/), with the demo's GRPO recipe
(configs/grpo/tiny-cpu.yaml, the `grpo` arm of omnidecision/pipeline/arms.py), for each seed: plain GRPO (every
training state, last weights) is the baseline; then difficulty-balanced states (omnidecision/rl/select.py); then
balanced states + tail weight averaging (omnidecision/rl/averaging.py; the demo's recipe). Each run scores its
start and its result greedily on every validation state; reported per run: the paired per-state delta with its
bootstrap 95% CI, and per variant: the mean delta over seeds, its gain over the baseline, and how many seeds had a CI
above zero.

    python -m bench.bench_grpo_recipe [--demo runs/demo] [--seeds 0 1 2] [--steps 150]
    python -m bench.bench_grpo_recipe --smoke     # ≈ 20 s: a stand-in demo folder, runs, measures nothing

≈ 2.5 minutes per run on 2 cores (9 runs with the defaults). Writes bench/results/grpo_recipe.json. At smoke size
(bench/common.py) the demo folder is a stand-in built here: a few synthetic tasks, the scripted teacher's harvest
and a planner after 2 SFT steps (bench/pipeline.py), laid out as the demo lays out its own; each GRPO run is one
step of the smoke generation size (bench.common.SMOKE_GRPO_ARGS) and runs in this process, with the options the
`omnidecision grpo` command gets (`omnidecision.rl.train.main`: a process start and torch import per run were most
of the smoke time). The command itself is run by the tests of the grpo stage (tests/rl/), not by this smoke size.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import ROOT, Run, grpo_smoke_args, parse_args, portable
from bench.schema import Arm, BenchResult, measure

VARIANTS: dict[str, list[str]] = {
    "plain": ["--select_states", "all", "--weight_average", "false"],
    "balanced": ["--select_states", "balanced", "--weight_average", "false"],
    "balanced+average": ["--select_states", "balanced", "--weight_average", "true"],
}


RECIPE = ROOT / "configs" / "grpo" / "tiny-cpu.yaml"  # the demo's `grpo` arm (omnidecision/pipeline/arms.py)


def demo_parts(demo: Path) -> tuple[Path, Path]:
    """(SFT planner, harvest folder) of a finished demo folder (omnidecision/pipeline/plan.py lays them out)."""
    model, data = demo / "models" / "sft", demo / "data"
    missing = [str(p) for p in (model / "config.json", data / "rl") if not p.exists()]
    if missing:
        raise SystemExit(f"{demo}: not a finished demo folder (missing {', '.join(missing)}); run `make demo` first")
    return model, data


def stand_in_demo(work: Path, tasks: int = 4, sft_steps: int = 2) -> Path:
    """A folder laid out as a finished demo (models/sft, data/{sft,rl}) at smoke size."""
    import shutil

    from bench.pipeline import sft_planner, synth_suite, teacher_harvest

    demo = work / "demo"
    data = teacher_harvest(synth_suite(tasks, 5, work / "synth"), demo, val_fraction=0.25)
    model = sft_planner(data, work / "sft-work", steps=sft_steps)
    shutil.copytree(model, demo / "models" / "sft")
    return demo


def run_one(demo: Path, variant: str, seed: int, steps: int, work: Path, eval_n: int = -1,
            extra: list[str] | None = None, in_process: bool = False) -> dict:
    """One GRPO run (`omnidecision grpo`, its own process; `in_process`: `omnidecision.rl.train.main` here, with
    the same options); `extra`: recipe options appended."""
    out = work / f"{variant}-{seed}"
    model, data = demo_parts(demo)
    args = ["--config", str(RECIPE), "--model_name_or_path", str(model), "--dataset_name", str(data),
            "--output_dir", str(out), "--seed", str(seed), "--max_steps", str(steps), "--eval_closure_n", str(eval_n),
            "--log_completions", "false", *VARIANTS[variant], *(extra or [])]
    if in_process:
        from omnidecision.rl import train as rl_train
        from omnidecision.rl.config import parse_args as grpo_args

        rl_train.main(*grpo_args(args))
    else:
        with (work / f"{variant}-{seed}.log").open("w") as log:
            subprocess.run([sys.executable, "-m", "omnidecision.cli", "grpo", *args], check=True, stdout=log,
                           stderr=subprocess.STDOUT)
    report = json.loads((out / "closure_eval.json").read_text())
    return {"variant": variant, "seed": seed, "start": report["start"]["closure"]["mean"],
            "trained": report["trained"]["closure"]["mean"], "paired": report["paired"],
            "components": report["trained"]["components"], "selection": report["selection"],
            "train_seconds": report["train_seconds"]}


def summarise(runs: list[dict], variants: list[str]) -> dict[str, dict]:
    """Per variant: the mean per-state delta over seeds, how many seeds had a CI above zero, and the gain over
    the plain baseline as a difference and as a ratio of the mean deltas."""
    summary = {}
    for variant in variants:
        rows = [r for r in runs if r["variant"] == variant]
        deltas = [r["paired"]["delta_mean"] for r in rows]
        summary[variant] = {"mean_delta": round(statistics.fmean(deltas), 4), "deltas": deltas,
                            "seeds_ci_above_zero": sum(r["paired"]["ci95_low"] > 0 for r in rows),
                            "seeds": len(rows)}
    base = summary.get("plain", {}).get("mean_delta")
    for row in summary.values():
        row["gain_over_plain"] = None if base is None else round(row["mean_delta"] - base, 4)
        row["ratio_over_plain"] = round(row["mean_delta"] / base, 3) if base else None
    return summary


def to_result(run: Run, runs: list[dict], seeds: list[int], variants: list[str], steps: int, demo: str,
              notes: list[str] | None = None) -> BenchResult:
    """The schema's record: one arm per variant, one repeat per seed; ratio = the recipe over plain GRPO on the mean
    per-state delta (ratio of the medians over seeds: a seed's plain delta can be <= 0)."""
    def per_seed(variant: str, key) -> list[float]:
        by_seed = {r["seed"]: r for r in runs if r["variant"] == variant}
        return [key(by_seed[s]) for s in seeds]

    arms = {v: Arm(label=f"GRPO, {v}", figures={
        "delta_mean": measure(per_seed(v, lambda r: r["paired"]["delta_mean"]), "closure reward (per state)"),
        "trained": measure(per_seed(v, lambda r: r["trained"]), "closure reward"),
        "ci95_low": measure(per_seed(v, lambda r: r["paired"]["ci95_low"]), "closure reward"),
        "train_seconds": measure(per_seed(v, lambda r: r["train_seconds"]), "s")}) for v in variants}
    return run.result(
        title=f"GRPO recipe ablation on the demo's SFT planner ({steps} steps): what each part adds over plain GRPO",
        arms=arms, candidate=variants[-1], baseline="plain", metric="delta_mean", ratio_method="ratio_of_medians",
        repeats=len(seeds),
        better="higher: the recipe raises the held-out per-state closure reward that many times as much as plain "
               "GRPO does",
        ratio_note="plain GRPO's median delta was not above 0", notes=notes,
        may_be_zero=("delta_mean", "trained", "ci95_low"),  # rewards and their changes; train_seconds cannot
        details={"demo": demo, "steps": steps, "seeds": seeds, "summary": summarise(runs, variants), "runs": runs})


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--demo", type=Path, default=Path("runs/demo"), help="a finished `omnidecision demo` folder")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--eval-n", type=int, default=-1, help="validation states each run scores (-1: every one)")
    a = parse_args(p, argv, smoke={"steps": 1, "variants": ["plain"], "eval_n": 2})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if "plain" not in a.variants:
        raise SystemExit("the baseline variant `plain` must be among --variants")
    if not a.smoke:
        demo_parts(a.demo)
    run = Run("grpo_recipe", a.smoke)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-grpo-") as tmp:
        if a.smoke:
            a.demo = stand_in_demo(Path(tmp))
        for seed in a.seeds:
            for variant in a.variants:
                runs.append(run_one(a.demo, variant, seed, a.steps, Path(tmp), a.eval_n,
                                    extra=grpo_smoke_args(a.smoke), in_process=a.smoke))
                r = runs[-1]
                logging.info("%-17s seed %d: %.4f -> %.4f, per-state delta %+.4f [%+.4f, %+.4f]", variant, seed,
                             r["start"], r["trained"], r["paired"]["delta_mean"], r["paired"]["ci95_low"],
                             r["paired"]["ci95_high"])
    demo = "stand-in (smoke)" if a.smoke else portable(str(a.demo))
    result = to_result(run, runs, a.seeds, a.variants, a.steps, demo)
    path = run.write(result)
    print(json.dumps(result.details["summary"], indent=2))
    print(f"{result.candidate} / plain (mean per-state delta): {result.ratio} → {path}")


if __name__ == "__main__":
    main()
