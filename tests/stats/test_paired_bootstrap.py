"""The paired comparison of two planners in the loop (`paired_in_loop`: paired bootstrap CI over tasks, exact
McNemar / sign test) checked against values worked out by hand: the delta's sign and size, the discordant counts,
the p-value, and the bootstrap interval against the binomial and normal answers it approximates.

    pytest -q tests/stats/test_paired_bootstrap.py
"""

from __future__ import annotations

import math

import pytest

from omnidecision.stats import bootstrap_mean_ci, exact_sign_p, mcnemar_exact, paired_in_loop


def test_hand_worked_pair():
    a = {"t1": True, "t2": False, "t3": False, "t4": True, "t5": True}  # t5: only a ran it
    b = {"t1": True, "t2": True, "t3": True, "t4": False}
    r = paired_in_loop(a, b, ("sft", "grpo"))
    assert (r["a"], r["b"], r["n"], r["unpaired"]) == ("sft", "grpo", 4, 1)
    assert (r["a_only"], r["b_only"]) == (1, 2)  # t4 only sft solved; t2, t3 only grpo
    assert r["delta"] == 0.25  # grpo 3/4 - sft 2/4: the second minus the first
    assert r["p_value"] == 1.0  # 2 * P(X <= 1), X ~ Bin(3, 1/2) = 2 * 4/8, capped at 1
    low, high = r["ci95"]
    assert low <= 0.25 <= high and low < 0 < high


@pytest.mark.parametrize(("a_value", "b_value", "delta"), [(0, 1, 1.0), (1, 0, -1.0)])
def test_delta_and_interval_point_to_the_better_planner(a_value, b_value, delta):
    a = {f"t{i}": a_value for i in range(10)}
    b = {f"t{i}": b_value for i in range(10)}
    r = paired_in_loop(a, b)
    assert r["delta"] == delta and r["ci95"] == [delta, delta]
    assert (r["a_only"], r["b_only"]) == ((10, 0) if delta < 0 else (0, 10))
    assert r["p_value"] == pytest.approx(2 / 1024, rel=1e-3)


def test_exact_sign_test_hand_values():
    assert exact_sign_p(9, 1) == pytest.approx(22 / 1024)  # 2 * (C(10,0) + C(10,1)) / 2^10
    assert exact_sign_p(1, 9) == exact_sign_p(9, 1)
    assert exact_sign_p(5, 5) == 1.0
    assert exact_sign_p(3, 0) == pytest.approx(2 / 8)
    assert mcnemar_exact(2, 7) == pytest.approx(2 * (1 + 9 + 36) / 512)


def test_bootstrap_interval_of_a_rare_difference_is_the_binomial_one():
    # one task in ten differs by 1: a resample's mean is Bin(10, 0.1) / 10, whose 2.5% and 97.5% quantiles are 0
    # (P(X=0) = 0.349) and 0.3 (P(X<=2) = 0.930 < 0.975 <= P(X<=3) = 0.987)
    low, high = bootstrap_mean_ci([0.0] * 9 + [1.0], n_boot=20000, seed=0)
    assert (low, high) == (0.0, pytest.approx(0.3))
    # every unit can be drawn: the same difference in any position gives the same interval
    assert bootstrap_mean_ci([1.0] + [0.0] * 9, n_boot=20000, seed=0) == (low, high)


def _binomial_quantile(n: int, q: float) -> int:
    """The smallest k with P(X <= k) >= q for X ~ Bin(n, 1/2), summed exactly."""
    total = 0
    for k in range(n + 1):
        total += math.comb(n, k)
        if total / 2**n >= q:
            return k
    return n


@pytest.mark.parametrize("seed", [0, 1])
def test_bootstrap_interval_of_many_tasks_is_the_binomial_one(seed):
    # 200 tasks, half differ by +1: a resample's mean is Bin(200, 1/2) / 200; its 2.5% and 97.5% quantiles (86 and
    # 114 successes: P(X<=85) = 0.020, P(X<=86) = 0.028, P(X<=113) = 0.972, P(X<=114) = 0.980) are the interval
    low, high = bootstrap_mean_ci([0.0, 1.0] * 100, n_boot=20000, seed=seed)
    assert (_binomial_quantile(200, 0.025), _binomial_quantile(200, 0.975)) == (86, 114)
    assert low == pytest.approx(86 / 200, abs=1e-9) and high == pytest.approx(114 / 200, abs=1e-9)
    assert bootstrap_mean_ci([0.25] * 7) == (0.25, 0.25)
