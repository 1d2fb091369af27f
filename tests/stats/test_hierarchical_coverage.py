"""Coverage by simulation: with a known effect and known variance between SFT starts, between RL replicates and
between tasks, the 95% `hierarchical_contrast` interval covers the true difference about 95% of the time, and the
task-only interval of today's pooling (`paired_in_loop`'s bootstrap over pooled start:task units, as
`demo.pool` does) covers it far less often on the same data; `hierarchical_mean` covers an arm's true mean
when its level varies between starts. Seeded: the same numbers on every run (docs/research/statistics.md, "Hierarchical
intervals", lists them).

    pytest -q tests/stats/test_hierarchical_coverage.py
    python tests/stats/test_hierarchical_coverage.py [--grid]  # prints the measured coverages

The model (probabilities, no link function, so the truth is exact): for start s, arm x, replicate r and task t,
P(correct) = base + start_s + effect·[x = a] + (start × arm)_{s,x} + replicate_{s,x,r} + task_{s,t} ± taskarm_{s,t},
with normal start, start × arm and replicate effects, task effects ±u (both arms) and ±v (a up, b down), all of
mean 0, so E[a − b] = effect and E[b] = base; the probabilities stay inside (0, 1) (asserted). Outcomes are
Bernoulli per (replicate, task).

Tolerance: with N simulations the Monte-Carlo SE of a coverage near 0.95 is sqrt(0.95 · 0.05 / N) = 0.0089 at
N = 600. The interval must cover in [0.925, 0.98]: at most 2.8 SE below 0.95 (under-coverage is the failure that
matters: claims the data do not carry), and up to 3.4 SE above, because the method is conservative by design with
few starts (Satterthwaite df; the start level switches to S − 1 df whenever the start deltas spread more than
their within-start noise; measured 0.96–0.98 over a grid of designs with small start × arm variance, see
docs/research/statistics.md). The task-only interval must cover at most 0.88 (more than 7 SE below 0.95) and at least
0.08 less than the hierarchical one. Measured (`python tests/stats/test_hierarchical_coverage.py`): 3 starts 0.972
hierarchical vs 0.783 task-only (the mean 0.950); 1 start 0.962 vs 0.852.
"""

from __future__ import annotations

import numpy as np
import pytest

from omnidecision.stats import hierarchical_contrast, hierarchical_mean, paired_in_loop

BASE, EFFECT = 0.5, 0.05


def simulate(rng: np.random.Generator, *, starts: int, reps_a: int, reps_b: int, tasks: int, sd_start: float,
             sd_start_arm: float, sd_rep: float, u: float = 0.08, v: float = 0.02):
    """Two arms' Outcomes (start → replicate → task → 0/1). Arm b with one replicate is fixed given its start
    (as sft is): no replicate effect. Same replicate ids in both arms when they have as many (paired RL seeds)."""
    a: dict[str, dict[str, dict[str, float]]] = {}
    b: dict[str, dict[str, dict[str, float]]] = {}
    names = [f"t{i}" for i in range(tasks)]
    for s in range(starts):
        level = BASE + rng.normal(0, sd_start)
        task = rng.choice([-u, u], tasks)
        task_arm = rng.choice([-v, v], tasks)
        qa = level + EFFECT + rng.normal(0, sd_start_arm) + rng.normal(0, sd_rep, reps_a)
        qb = level + rng.normal(0, sd_start_arm) + (rng.normal(0, sd_rep, reps_b) if reps_b > 1 else 0.0)
        pa = qa[:, None] + task + task_arm
        pb = np.broadcast_to(qb, (reps_b,))[:, None] + task - task_arm
        assert ((pa > 0) & (pa < 1)).all() and ((pb > 0) & (pb < 1)).all(), "probabilities left (0, 1)"
        ya, yb = (rng.random(pa.shape) < pa).astype(float), (rng.random(pb.shape) < pb).astype(float)
        ids_a = [f"rl{r}" for r in range(reps_a)]
        ids_b = ids_a if reps_b == reps_a else [f"b{r}" for r in range(reps_b)]
        a[str(s)] = {r: dict(zip(names, row.tolist(), strict=True)) for r, row in zip(ids_a, ya, strict=True)}
        b[str(s)] = {r: dict(zip(names, row.tolist(), strict=True)) for r, row in zip(ids_b, yb, strict=True)}
    return a, b


def pooled_units(arm) -> dict[str, float]:
    """Today's pooling: one unit per start:task, the task's accuracy over the start's replicates."""
    return {f"{s}:{t}": float(np.mean([arm[s][r][t] for r in arm[s]]))
            for s in arm for t in next(iter(arm[s].values()))}


def coverage(n_sims: int, seed: int, **design) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    hits = {"contrast": 0, "contrast_task_only": 0, "mean": 0}
    for i in range(n_sims):
        a, b = simulate(rng, **design)
        c = hierarchical_contrast(a, b)
        hits["contrast"] += c.low <= EFFECT <= c.high
        ua, ub = pooled_units(a), pooled_units(b)
        low, high = paired_in_loop(ub, ua, n_boot=200, seed=i)["ci95"]  # its delta is the second minus the first
        hits["contrast_task_only"] += low <= EFFECT <= high
        m = hierarchical_mean(b)
        hits["mean"] += m.low <= BASE <= m.high
    return {k: v / n_sims for k, v in hits.items()}


DESIGNS = {
    # 3 SFT starts x 4 RL seeds of each arm on 60 tasks per start; start x arm sd 0.03, replicate sd 0.04
    "3 starts, 4 replicates each": dict(starts=3, reps_a=4, reps_b=4, tasks=60, sd_start=0.04, sd_start_arm=0.03,
                                        sd_rep=0.04),
    # one start (the demo's protocol): only replicate and task variance exist and are counted; b is sft-like
    # (1 replicate); 300 tasks as in the experiment, so the replicate variance is not drowned by the task noise
    "1 start, 4 replicates vs 1": dict(starts=1, reps_a=4, reps_b=1, tasks=300, sd_start=0.04, sd_start_arm=0.0,
                                       sd_rep=0.06),
}


# the multi-start design in `make test`; the one-start design (11 s on 2 cores) in `make long-test`
@pytest.mark.parametrize("name", [n if DESIGNS[n]["starts"] > 1 else pytest.param(n, marks=pytest.mark.long)
                                  for n in DESIGNS])
def test_hierarchical_interval_covers_and_the_task_only_one_does_not(name: str) -> None:
    cov = coverage(600, seed=2026, **DESIGNS[name])
    assert 0.925 <= cov["contrast"] <= 0.98, cov
    assert cov["contrast_task_only"] <= 0.88 and cov["contrast"] - cov["contrast_task_only"] >= 0.08, cov
    if DESIGNS[name]["starts"] > 1:  # with one start, b's mean is that start's, not BASE
        assert 0.925 <= cov["mean"] <= 0.98, cov


GRID = [dict(starts=st, reps_a=4, reps_b=4, tasks=60, sd_start=0.04, sd_start_arm=sxa, sd_rep=rep)
        for st in (1, 2, 3, 5) for sxa in ((0.0,) if st == 1 else (0.0, 0.015, 0.03, 0.05)) for rep in (0.0, 0.04)]


if __name__ == "__main__":  # the figures docs/research/statistics.md quotes; --grid: the wider table
    import sys

    for design_name, design in DESIGNS.items():
        print(design_name, {k: round(v, 3) for k, v in coverage(600, seed=2026, **design).items()})
    if "--grid" in sys.argv:
        print("| starts | start × arm sd | replicate sd | hierarchical | task-only |\n|---|---|---|---|---|")
        for design in GRID:
            cov = coverage(1000, seed=7, **design)
            print(f"| {design['starts']} | {design['sd_start_arm']} | {design['sd_rep']} | {cov['contrast']:.3f} | "
                  f"{cov['contrast_task_only']:.3f} |", flush=True)
