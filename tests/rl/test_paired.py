"""The paired comparison of two planners on the same held-out states: hand-checked cases, the sign test against
its exact binomial definition, and the bootstrap interval's behaviour."""

from __future__ import annotations

import math
import random

import pytest

from omnidecision.rl.evaluate import paired_comparison, sign_test, spread

TEN_TWO = 2 * sum(math.comb(12, i) for i in range(3)) / 2**12  # P(<= 2 of 12) on either side


@pytest.mark.parametrize(("wins", "losses", "expected"), [
    (0, 0, 1.0), (1, 0, 1.0), (5, 0, 2 / 32), (0, 5, 2 / 32), (6, 6, 1.0), (10, 2, TEN_TWO),
])
def test_sign_test_is_the_exact_two_sided_binomial(wins, losses, expected):
    assert sign_test(wins, losses) == pytest.approx(min(1.0, expected))


def test_paired_counts_and_delta():
    before = [1.0, 0.375, 0.375, 1.0, 0.5]
    after = [1.0, 1.0, 0.375, 0.375, 1.0]
    r = paired_comparison(before, after)
    assert (r["wins"], r["losses"], r["ties"], r["n"]) == (2, 1, 2, 5)
    assert r["delta_mean"] == pytest.approx((0.625 - 0.625 + 0.5) / 5, abs=1e-4)
    assert r["ci95_low"] <= r["delta_mean"] <= r["ci95_high"]


def test_identical_planners_have_a_zero_width_interval_and_no_evidence():
    scores = [random.Random(1).random() for _ in range(50)]
    r = paired_comparison(scores, list(scores))
    assert r["delta_mean"] == r["ci95_low"] == r["ci95_high"] == 0.0
    assert r["ties"] == 50 and r["sign_test_p"] == 1.0


def test_pairing_is_sharper_than_comparing_means():
    """A small uniform gain on widely spread states: the independent 95% intervals overlap, the paired one
    excludes zero; a real mismatch in length is an error, not a silent truncation."""
    rng = random.Random(0)
    before = [rng.random() for _ in range(200)]
    after = [min(1.0, b + (0.05 if i % 4 else 0.0)) for i, b in enumerate(before)]
    a, b = spread(before), spread(after)
    assert a["ci95_high"] > b["ci95_low"]  # unpaired: not separable
    r = paired_comparison(before, after)
    assert r["ci95_low"] > 0 and r["sign_test_p"] < 1e-6
    with pytest.raises(ValueError, match="not the same states"):
        paired_comparison(before, after[:-1])


def test_sign_test_on_many_states_does_not_overflow():
    assert sign_test(2600, 2400) == pytest.approx(0.00480, rel=0.05)  # z ≈ 2.83
    assert sign_test(3000, 3000) == 1.0
