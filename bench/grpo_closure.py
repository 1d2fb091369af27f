"""Measure (not assert): SFT a tiny planner on rule-generated data, then GRPO from it; report the held-out mean
closure reward of the SFT start and of the GRPO result (same run, same validation rows, greedy decoding).

    .venv/bin/python bench/grpo_closure.py [--work runs/bench-grpo] [--sft-steps 400] [--grpo-steps 60]

Writes bench/results/grpo_closure.json. Pipeline: random reachable ledgers → rule (teacher) actions
(omnidecision.testing.states) → tiny Qwen3 (omnidecision.testing.tiny) → `omnidecision.sft` (configs/sft/tiny-cpu.yaml)
→ `omnidecision.rl` (configs/grpo/tiny-cpu.yaml).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(work: Path, sft_steps: int, grpo_steps: int, eval_n: int, seed: int, sft_batch: int = 32,
        eval_mode: str = "greedy", reuse_sft: bool = False) -> dict:
    from omnidecision.rl.config import parse_args as grpo_args
    from omnidecision.rl.data import write_rl_dataset
    from omnidecision.rl.train import main as grpo_main
    from omnidecision.sft.config import parse_args as sft_args
    from omnidecision.sft.train import main as sft_main
    from omnidecision.testing.states import write_sft_dataset
    from omnidecision.testing.tiny import build_tiny_planner

    t0 = time.perf_counter()
    if not (reuse_sft and (work / "sft" / "config.json").exists()):
        # --- data: SFT rows (digest -> teacher action) and RL states, disjoint seeds
        write_sft_dataset(work / "sft-data", n_train=max(2000, sft_steps * sft_batch), n_validation=100, seed=seed)
        write_rl_dataset(work / "harvest", n_train=2000, n_validation=eval_n, seed=seed + 7)
        # --- tiny planner from scratch, SFT
        build_tiny_planner(work / "tiny", hidden=64, layers=2, seed=seed)
        sft_main(*sft_args(["--config", str(ROOT / "configs/sft/tiny-cpu.yaml"), "--model_name_or_path",
                            str(work / "tiny"), "--dataset_name", str(work / "sft-data"), "--output_dir",
                            str(work / "sft"), "--max_steps", str(sft_steps), "--eval_strategy", "no",
                            "--save_strategy", "no", "--logging_steps", "25", "--seed", str(seed),
                            "--per_device_train_batch_size", str(sft_batch), "--max_length", "512"]))
    t_sft = time.perf_counter() - t0
    # --- GRPO from the SFT checkpoint; closure_eval.json holds start vs trained
    report = grpo_main(*grpo_args([
        "--config", str(ROOT / "configs/grpo/tiny-cpu.yaml"), "--model_name_or_path", str(work / "sft"),
        "--dataset_dir", str(work / "harvest"), "--max_steps", str(grpo_steps), "--eval_closure_n", str(eval_n),
        "--save_strategy", "no", "--seed", str(seed), "--eval_closure_mode", eval_mode,
        "--output_dir", str(work / f"grpo-{eval_mode}")]))
    return {
        "sft_steps": sft_steps, "sft_batch": sft_batch, "grpo_steps": grpo_steps, "eval_states": eval_n,
        "decoding": eval_mode, "grpo_recipe": "configs/grpo/tiny-cpu.yaml",
        "sft_seconds": round(t_sft, 1), "grpo_seconds": report["train_seconds"],
        "start": {"closure": report["start"]["closure"], "components": report["start"]["components"],
                  "valid_rate": report["start"]["valid_rate"]},
        "trained": {"closure": report["trained"]["closure"], "components": report["trained"]["components"],
                    "valid_rate": report["trained"]["valid_rate"]},
        "delta_mean": report["delta_mean"],
        "examples_trained": report["trained"]["examples"],
    }


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs/bench-grpo")
    p.add_argument("--sft-steps", type=int, default=400)
    p.add_argument("--grpo-steps", type=int, default=60)
    p.add_argument("--eval-n", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sft-batch", type=int, default=32)
    p.add_argument("--eval-mode", choices=["greedy", "sampled"], default="greedy")
    p.add_argument("--reuse-sft", action="store_true", help="reuse WORK/sft (and its data) when it exists")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = run(Path(a.work), a.sft_steps, a.grpo_steps, a.eval_n, a.seed, a.sft_batch, a.eval_mode, a.reuse_sft)
    out = ROOT / f"bench/results/grpo_closure_{a.eval_mode}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("start", "trained", "delta_mean")}, indent=2))
