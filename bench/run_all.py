"""Run every benchmark (each in its own process, so one failure does not hide the others) — `make bench`.

    .venv/bin/python -m bench.run_all [--only NAME ...]

Each benchmark prints its ratios against its own baseline measured in the same run and writes
bench/results/<name>.json. Benchmarks:
- prompt_tokens: planner prompt tokens per step, ledger digest vs react history (same runs, budgets);
- rewards: closure-reward throughput and reward time as a share of a GRPO step;
- collect: collection speed-up at concurrency 1/4/16 against a real vLLM server;
- sft_packing: SFT tokens/s with packing vs padding on harvested data, with the final losses;
- serving: vLLM-served planner decisions/s vs transformers `generate` at concurrency 16;
- view: `omnidecision view` on 10,000 runs: site write time, index load/filter/page time in headless Chromium.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS: dict[str, list[str]] = {
    "prompt_tokens": ["-m", "bench.bench_prompt_tokens", "--tasks", "60"],
    "rewards": ["-m", "bench.bench_rewards", "--grpo-steps", "4"],
    "collect": ["-m", "bench.bench_collect", "--tasks", "32", "--levels", "1", "4", "16"],
    "sft_packing": ["-m", "bench.bench_sft_packing", "--steps", "30"],
    "serving": ["-m", "bench.bench_serving"],
    "view": ["-m", "bench.bench_view", "--runs", "10000", "--base-runs", "1000"],
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), help="run only these")
    a = p.parse_args()
    failed = []
    for name in a.only or BENCHMARKS:
        print(f"\n=== bench {name}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run([sys.executable, *BENCHMARKS[name]], cwd=ROOT).returncode
        print(f"=== bench {name}: exit {rc} in {time.perf_counter() - t0:.0f}s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
