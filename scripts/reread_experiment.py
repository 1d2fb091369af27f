"""Seed-level reading of the two earlier experiment runs (A: docs/results/experiment.json, B: experiment-59ce1cb.json).
A seed fixes the suites and the teacher's data in both runs, so the unit is the seed: each seed's delta is the mean of
its two runs, and the 95% interval is Student's t over the 3 seeds (df 2)."""
import json, statistics
from omnidecision.stats import t_quantile
runs = [json.load(open(f)) for f in ("docs/results/experiment.json", "docs/results/experiment-59ce1cb.json")]
for a, b in (("grpo_judge", "sft"), ("grpo_judge", "rft"), ("grpo_judge", "grpo_shuffled"), ("grpo", "sft"), ("grpo_judge", "sft_plus")):
    per_run = [[x - y for x, y in zip(r["per_seed_accuracy"][a], r["per_seed_accuracy"][b])] for r in runs]
    d = [statistics.fmean(pair) for pair in zip(*per_run)]
    m, sd = statistics.fmean(d), statistics.stdev(d)
    h = t_quantile(0.975, len(d) - 1) * sd / len(d) ** 0.5
    print(f"| {a} − {b} | {m:+.3f} | [{m-h:+.3f}, {m+h:+.3f}] | " + " / ".join(f"{x:+.3f}" for x in per_run[0]) + " | " + " / ".join(f"{x:+.3f}" for x in per_run[1]) + " |")
