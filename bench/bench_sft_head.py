"""SFT steps with the LM head on the supervised positions only (`compact_lm_head`, omnidecision/modeling.py) vs TRL's
every-position head on the CPU, at EQUAL STEPS from one tiny planner on the same harvested rows.

Data: the synthetic suite → noisy scripted-teacher collection → harvest (`bench.pipeline`; rows with the
planner's system turn, ≈ 450 tokens of which ≈ 13 are supervised). Each arm trains the shipped SFT recipe
(configs/sft/tiny-cpu.yaml) for `--steps` steps at a constant lr; per repeat (a seed) the two arms run in a
rotating order. `ratio` = optimizer steps/s compact over every-position; the final training loss of both arms is
kept to show the two compute the same objective (equal up to float rounding, tests/sft/test_compact_head.py).

    python -m bench.bench_sft_head --steps 60 --seeds 0 1 2
    python -m bench.bench_sft_head --smoke     # smoke size: runs, measures nothing (bench/common.py)
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.common import ROOT, Run, parse_args, sft_smoke_args
from bench.pipeline import synth_suite, teacher_harvest
from bench.schema import Arm, measure

ARMS = {"compact": ("LM head on the supervised positions (compact_lm_head: true, the recipe)", "true"),
        "every": ("LM head on every position (TRL's CPU path, compact_lm_head: false)", "false")}


def train(model: Path, data: Path, out: Path, compact: str, steps: int, seed: int,
          extra: list[str] | None = None) -> dict[str, Any]:
    from omnidecision.sft.config import parse_args as sft_args
    from omnidecision.sft.train import main as sft_main

    args = sft_args(["--config", str(ROOT / "configs/sft/tiny-cpu.yaml"), "--model_name_or_path", str(model),
                       "--dataset_name", str(data / "sft"), "--output_dir", str(out), "--max_steps", str(steps),
                       "--eval_strategy", "no", "--save_strategy", "no", "--load_best_model_at_end", "false",
                       "--lr_scheduler_type", "constant", "--logging_steps", str(min(5, steps)),
                       "--seed", str(seed), "--compact_lm_head", compact, *(extra or [])])
    run = sft_main(*args)
    history = json.loads((out / "log_history.json").read_text())
    final = next(h for h in reversed(history) if "train_runtime" in h)
    losses = [h["loss"] for h in history if "loss" in h]
    return {"steps_per_s": run["global_step"] / final["train_runtime"], "loss": losses[-1]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--tasks", type=int, default=60)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one repeat per seed (>= 3)")
    a = parse_args(p, argv, smoke={"steps": 2, "tasks": 6})
    logging.basicConfig(level=logging.WARNING)
    run = Run("sft_head", a.smoke)
    from omnidecision.synthetic.tiny import build_tiny_planner, harvest_texts

    figs: dict[str, dict[str, list[float]]] = {k: {"sps": [], "loss": []} for k in ARMS}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = teacher_harvest(synth_suite(a.tasks, 5, work / "synth"), work / "harvest", val_fraction=0.15)
        model = build_tiny_planner(work / "tiny", texts=harvest_texts(data / "sft"), heads=2)
        names = list(ARMS)
        for r, seed in enumerate(a.seeds):
            for arm in names[r % 2:] + names[:r % 2]:  # rotate which arm goes first
                out = work / f"{arm}-{seed}"
                res = train(model, data, out, ARMS[arm][1], a.steps, seed, sft_smoke_args(a.smoke))
                figs[arm]["sps"].append(res["steps_per_s"])
                figs[arm]["loss"].append(res["loss"])
                print(f"seed {seed} {arm:>7}: {res['steps_per_s']:.2f} steps/s, loss {res['loss']:.4f}", flush=True)
                shutil.rmtree(out, ignore_errors=True)
    arms = {k: Arm(label=ARMS[k][0], figures={"steps_per_s": measure(figs[k]["sps"], "optimizer steps/s"),
                                              "final_train_loss": measure(figs[k]["loss"], "nats/assistant token")})
            for k in ARMS}
    result = run.result(
        title=f"SFT on the CPU: LM head on supervised positions vs every position ({a.steps} steps, batch 16)",
        arms=arms, candidate="compact", baseline="every", metric="steps_per_s", repeats=len(a.seeds),
        better="higher: the compact head trains that many times the steps per second at the same objective",
        notes=["same model, rows, recipe, seed and steps in both arms; only compact_lm_head differs"],
        details={"steps": a.steps, "tasks": a.tasks, "recipe": "configs/sft/tiny-cpu.yaml, constant lr"})
    path = run.write(result)
    print(f"compact / every-position steps/s: {result.ratio} (per repeat {result.ratio_repeats}) → {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
