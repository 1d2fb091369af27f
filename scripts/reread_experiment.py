"""The earlier protocol's two experiment runs read at the seed level (the README's "Read this first" table).

    python scripts/reread_experiment.py

Run A is docs/results/experiment-c39800e.json, run B docs/results/experiment-59ce1cb.json. A seed fixes the suites
and the teacher's data in both runs, so the unit is the seed: each seed's delta is the mean of its two runs, and the
95% interval is Student's t over the seeds (df = seeds − 1). Prints one Markdown row per contrast.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from omnidecision.stats import t_quantile

ROOT = Path(__file__).resolve().parent.parent
RUNS = ("docs/results/experiment-c39800e.json", "docs/results/experiment-59ce1cb.json")
CONTRASTS = (("grpo_judge", "sft"), ("grpo_judge", "rft"), ("grpo_judge", "grpo_shuffled"), ("grpo", "sft"),
             ("grpo_judge", "sft_plus"))


def rows() -> list[str]:
    runs = [json.loads((ROOT / f).read_text("utf-8")) for f in RUNS]
    out = []
    for a, b in CONTRASTS:
        per_run = [[x - y for x, y in zip(r["per_seed_accuracy"][a], r["per_seed_accuracy"][b], strict=True)]
                   for r in runs]
        per_seed = [statistics.fmean(pair) for pair in zip(*per_run, strict=True)]
        m, sd = statistics.fmean(per_seed), statistics.stdev(per_seed)
        h = t_quantile(0.975, len(per_seed) - 1) * sd / len(per_seed) ** 0.5
        cells = [" / ".join(f"{x:+.3f}" for x in run) for run in per_run]
        out.append(f"| {a} − {b} | {m:+.3f} | [{m - h:+.3f}, {m + h:+.3f}] | {cells[0]} | {cells[1]} |")
    return out


if __name__ == "__main__":
    print("\n".join(rows()))
