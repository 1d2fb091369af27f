"""Run every benchmark (each in its own process, so one failure does not hide the others) — `make bench`, ≈ 90
minutes on 2 cores. The documentation site's benchmark table is generated from the result files at every `make docs`.

    python -m bench.run_all [--only NAME ...]
    python -m bench.run_all --smoke     # every benchmark at its smoke size (bench/common.py): runs, measures nothing

Each benchmark measures a candidate against its baseline in the same run, repeated, and writes
bench/results/<name>.json in the one schema (bench/schema.py). Benchmarks:
- prompt_tokens: planner prompt size at step 15, ledger digest vs react history (Qwen tokenizer, same tasks);
- rewards: reward time as a share of a GRPO step, closure-rubric throughput;
- collect: collection runs/s at concurrency 16 vs 1 against a real vLLM server, efficiency vs the server's ceiling;
- sft_layouts: SFT tokens/s and held-out loss at equal tokens: grouped by length vs padded vs packing;
- sft_head: SFT steps/s with the LM head on the supervised positions only vs every position (CPU);
- serving: vLLM-served planner decisions/s vs transformers `generate` at concurrency 16;
- view: `omnidecision view` on 10,000 runs vs 1,000: site write time, index load in headless Chromium;
- grpo_signal: decision-level vs trajectory-level GRPO, held-out improvement per CPU-second (≈ 12 minutes);
- grpo_env: decision-level GRPO with the proxy reward and with executed returns vs TRL's environment GRPO (the
  ledger agent as a TRL environment), from a START that solves >= 30% of the dev tasks, in-loop accuracy gain per
  CPU-second (≈ 60 minutes on 2 shared cores).
Not here (long ablation, ≈ 27 minutes on a finished demo folder): `python -m bench.bench_grpo_recipe`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS: dict[str, list[str]] = {
    "prompt_tokens": ["-m", "bench.bench_prompt_tokens", "--tasks", "40"],
    "rewards": ["-m", "bench.bench_rewards", "--grpo-steps", "4"],
    "collect": ["-m", "bench.bench_collect", "--tasks", "32", "--levels", "1", "4", "16"],
    "sft_layouts": ["-m", "bench.bench_sft_layouts", "--tokens", "40000"],
    "sft_head": ["-m", "bench.bench_sft_head", "--steps", "60"],
    "serving": ["-m", "bench.bench_serving"],
    "view": ["-m", "bench.bench_view", "--runs", "10000", "--base-runs", "1000"],
    "grpo_signal": ["-m", "bench.bench_grpo_signal"],
    "grpo_env": ["-m", "bench.bench_grpo_env", "--train-tasks", "48", "--sft-steps", "1200", "--dev-tasks", "20",
                 "--dev-states", "64", "--budget-cpu-s", "90", "--seeds", "0", "1", "2"],
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), help="run only these")
    p.add_argument("--smoke", action="store_true", help="every benchmark at its smoke size (BENCH_SMOKE=1; results "
                   "under BENCH_SMOKE_OUT or bench/results/smoke/)")
    a = p.parse_args()
    env = {**os.environ, "BENCH_SMOKE": "1"} if a.smoke else None
    failed = []
    for name in a.only or BENCHMARKS:
        print(f"\n=== bench {name}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run([sys.executable, *BENCHMARKS[name]], cwd=ROOT, env=env).returncode
        print(f"=== bench {name}: exit {rc} in {time.perf_counter() - t0:.0f}s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
