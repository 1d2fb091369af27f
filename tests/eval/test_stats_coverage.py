"""`paired_in_loop`'s statistics against their definitions, not against the code: the exact McNemar p-value against
binomial tails summed by hand; the paired-bootstrap 95% interval against the normal approximation of a known
difference vector (its half-width is 1.96 standard errors, a 90% interval's only 1.645); and its coverage in a
simulation whose true accuracy difference is known (a 95% interval covers it about 95% of the time).

    pytest -q tests/eval/test_stats_coverage.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from omnidecision.stats import mcnemar_exact, paired_in_loop


# Exact two-sided McNemar: p = min(1, 2 * P(X <= min(a_only, b_only))), X ~ Binomial(a_only + b_only, 1/2).
# Tails summed by hand from Pascal's triangle:
#   5/0:  n=5,  P(X<=0) = 1/32                                  -> p = 2/32
#   10/1: n=11, P(X<=1) = (1 + 11)/2048                         -> p = 24/2048 = 0.01171875
#   7/2:  n=9,  P(X<=2) = (1 + 9 + 36)/512                      -> p = 92/512 = 0.1796875
#   2/6:  n=8,  P(X<=2) = (1 + 8 + 28)/256                      -> p = 74/256 = 0.2890625
#   3/3:  n=6,  P(X<=3) = (1 + 6 + 15 + 20)/64 = 42/64          -> 84/64 > 1 -> p = 1
#   20/5: n=25, P(X<=5) = (1 + 25 + 300 + 2300 + 12650 + 53130)/2^25 = 68406/33554432 -> p = 0.00407732...
@pytest.mark.parametrize(("a_only", "b_only", "p"), [
    (0, 0, 1.0), (5, 0, 2 / 32), (0, 5, 2 / 32), (10, 1, 24 / 2048), (7, 2, 92 / 512), (2, 6, 74 / 256),
    (3, 3, 1.0), (20, 5, 2 * 68406 / 33554432),
])
def test_mcnemar_exact_hand_values(a_only: int, b_only: int, p: float) -> None:
    assert mcnemar_exact(a_only, b_only) == pytest.approx(p, rel=1e-12)


def _runs(pairs: list[tuple[int, int]]) -> tuple[dict[str, bool], dict[str, bool]]:
    return ({f"t{i}": bool(x) for i, (x, _) in enumerate(pairs)}, {f"t{i}": bool(y) for i, (_, y) in enumerate(pairs)})


def test_paired_in_loop_counts_and_p_value() -> None:
    # 7 tasks only b solves, 2 only a solves, 11 both, 5 neither: delta = (7 - 2) / 25 = 0.2, p = 92/512 (above)
    a, b = _runs([(0, 1)] * 7 + [(1, 0)] * 2 + [(1, 1)] * 11 + [(0, 0)] * 5)
    a["only-in-a"] = True
    r = paired_in_loop(a, b, ("base", "tuned"))
    assert (r["n"], r["a_only"], r["b_only"], r["unpaired"]) == (25, 2, 7, 1)
    assert r["delta"] == 0.2
    assert r["p_value"] == pytest.approx(0.1797, abs=1e-4)
    low, high = r["ci95"]
    assert low < 0.2 < high


def test_bootstrap_interval_is_a_95_percent_one() -> None:
    """400 tasks: 100 only b solves (+1), 40 only a solves (-1), 260 ties (0). Mean d = 60/400 = 0.15; population
    variance E[d^2] - mean^2 = 140/400 - 0.0225 = 0.3275; standard error sqrt(0.3275/400) = 0.028614. The bootstrap
    distribution of the mean is close to normal, so the 95% percentile interval is 0.15 +- 1.96 * 0.028614 =
    0.15 +- 0.05608 = [0.0939, 0.2061] (a 90% interval would be +- 0.04707)."""
    a, b = _runs([(0, 1)] * 100 + [(1, 0)] * 40 + [(0, 0)] * 130 + [(1, 1)] * 130)
    r = paired_in_loop(a, b, n_boot=20_000, seed=1)
    assert r["delta"] == 0.15
    low, high = r["ci95"]
    half = 1.959964 * math.sqrt(0.3275 / 400)
    assert low == pytest.approx(0.15 - half, abs=0.006)
    assert high == pytest.approx(0.15 + half, abs=0.006)
    assert (high - low) / (2 * half) == pytest.approx(1.0, abs=0.06)  # 90% would be 0.84


def test_bootstrap_interval_covers_the_true_difference_95_percent_of_the_time() -> None:
    """Simulation with a known truth: each task's (a, b) outcome drawn from P(both) = 0.45, P(a only) = 0.10,
    P(b only) = 0.20, P(neither) = 0.25, so the true difference is 0.65 - 0.55 = 0.10. Over 1000 seeded replications
    of 100 tasks (400 resamples each, ~1.5 s) the 95% interval must cover 0.10 in 93.5-96.5% of them (binomial sd
    ~0.7 points; measured 95.5%; a 90% interval covers ~91% here), missing on either side about equally (each tail
    at most 3.5%; measured 2.6% and 1.9%)."""
    rng = np.random.default_rng(12345)
    outcomes = np.array([(1, 1), (1, 0), (0, 1), (0, 0)])
    reps, n, truth = 1000, 100, 0.10
    below = above = 0
    for rep in range(reps):
        draw = outcomes[rng.choice(4, size=n, p=[0.45, 0.10, 0.20, 0.25])]
        a, b = _runs([tuple(x) for x in draw])
        low, high = paired_in_loop(a, b, n_boot=400, seed=rep)["ci95"]
        below += high < truth
        above += low > truth
    coverage = 1 - (below + above) / reps
    assert 0.935 <= coverage <= 0.965, (coverage, below, above)
    assert below <= 35 and above <= 35, (below, above)
