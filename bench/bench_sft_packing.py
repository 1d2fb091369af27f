"""SFT throughput with packing vs padded batches on harvested data, with the final losses.

Builds a small harvested dataset (synthetic suite → scripted-teacher collection → harvest), a tiny planner, then
runs the same SFT recipe twice — padded batches (the CPU recipe's default) and `packing=True` — for the same
number of steps, and reports supervised-token throughput (tokens/s from TRL's `num_tokens` over the training
runtime) and the final training loss of each. Prints the ratio packing/padding; writes
bench/results/sft_packing.json.

    .venv/bin/python -m bench.bench_sft_packing --steps 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from bench.common import write_result


def harvested(work: Path, n_tasks: int) -> Path:
    from omnidecision.agent.config import AgentConfig
    from omnidecision.backends.factory import build_backends
    from omnidecision.collect.harvest import HarvestOptions, run_harvest
    from omnidecision.collect.runner import collect_runs
    from omnidecision.protocol.chat import BackendSpec
    from omnidecision.tasks import synth

    synth.write_suite(n_tasks, 5, work / "synth")
    tasks = synth.load_suite(work / "synth")
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": 0.25})})
    asyncio.run(collect_runs(tasks, AgentConfig(digest_max_chars=1000), backends, work / "runs" / "trajectories.jsonl",
                             samples=2, concurrency=8, progress=False))
    run_harvest([str(work / "runs")], work / "data", HarvestOptions(advancing_only=True, dedup=True,
                                                                   digest_max_chars=1000))
    return work / "data"


def train(model: Path, data: Path, out: Path, steps: int, packing: bool) -> dict:
    from omnidecision.sft.config import parse_args
    from omnidecision.sft.train import main as sft_main

    args = ["--model_name_or_path", str(model), "--dataset_name", str(data / "sft"), "--output_dir", str(out),
            "--max_steps", str(steps), "--per_device_train_batch_size", "16", "--learning_rate", "3e-3",
            "--assistant_only_loss", "true", "--packing", str(packing).lower(), "--max_length", "1024",
            "--bf16", "false", "--use_cpu", "true", "--logging_steps", "5", "--save_strategy", "no",
            "--eval_strategy", "no", "--report_to", "none", "--seed", "0"]
    sft_main(*parse_args(args))
    history = json.loads((out / "log_history.json").read_text())
    final = next(h for h in reversed(history) if "train_runtime" in h)
    tokens = max(h.get("num_tokens", 0) for h in history)
    losses = [h["loss"] for h in history if "loss" in h]
    return {"packing": packing, "steps": steps, "train_runtime_s": round(final["train_runtime"], 2),
            "num_tokens": tokens, "tokens_per_s": round(tokens / final["train_runtime"], 1),
            "first_loss": losses[0] if losses else None, "final_loss": losses[-1] if losses else None}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--tasks", type=int, default=60)
    a = p.parse_args(argv)
    from omnidecision.synthetic.tiny import build_tiny_planner

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = harvested(work, a.tasks)
        model = build_tiny_planner(work / "tiny")
        padded = train(model, data, work / "padded", a.steps, packing=False)
        packed = train(model, data, work / "packed", a.steps, packing=True)
    result = {"benchmark": "SFT tokens/s, packing vs padded batches (tiny planner, harvested synthetic data)",
              "padded": padded, "packed": packed,
              "ratio_tokens_per_s_packed_over_padded": round(packed["tokens_per_s"] / padded["tokens_per_s"], 3)}
    out = write_result("sft_packing", result)
    print(f"padded {padded['tokens_per_s']} tok/s (final loss {padded['final_loss']}), packed "
          f"{packed['tokens_per_s']} tok/s (final loss {packed['final_loss']}) → packed/padded = "
          f"{result['ratio_tokens_per_s_packed_over_padded']}×")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
