"""`hierarchical_mean` / `hierarchical_contrast`, `holm`, the t quantiles and the effect sizes an interval excludes,
checked against values worked out by hand or from tables (not against the code's own formulas).

    pytest -q tests/stats/test_hierarchical.py
"""

from __future__ import annotations

import math
import statistics

import pytest

from omnidecision.stats import (
    Estimate,
    excludable_effect,
    hierarchical_contrast,
    hierarchical_mean,
    holm,
    min_detectable_effect,
    t_quantile,
    t_two_sided_p,
)


def _arm(starts: dict[str, dict[str, list[int]]]) -> dict[str, dict[str, dict[str, float]]]:
    return {s: {r: {f"t{i}": float(x) for i, x in enumerate(v)} for r, v in reps.items()}
            for s, reps in starts.items()}


# Student t 0.975 quantiles from the printed table (Fisher & Yates; any statistics textbook)
@pytest.mark.parametrize(("df", "q"), [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (9, 2.262), (10, 2.228),
                                       (30, 2.042), (120, 1.980)])
def test_t_quantile_matches_the_table(df: int, q: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(q, abs=6e-4)
    assert t_two_sided_p(q, df) == pytest.approx(0.05, abs=2e-4)


def test_t_quantile_other_levels_and_real_df() -> None:
    assert t_quantile(0.95, 4) == pytest.approx(2.132, abs=6e-4)  # table, one-sided 5%
    assert t_quantile(0.8, 10) == pytest.approx(0.879, abs=6e-4)
    assert t_quantile(0.975, 2) > t_quantile(0.975, 2.5) > t_quantile(0.975, 3)  # Satterthwaite df are real
    assert t_quantile(0.975, 1e12) == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_quantile(1.0, 3)


def test_one_start_one_replicate_is_the_paired_t_interval_over_tasks() -> None:
    # per-task deltas a - b: six +1, two -1, two 0 -> mean 0.4; sample sd by hand: sum (d - 0.4)^2 =
    # 6 * 0.36 + 2 * 1.96 + 2 * 0.16 = 6.4, / 9 -> 0.7111; se = sqrt(0.7111 / 10) = 0.26667; t_{.975, 9} = 2.262
    a = _arm({"s": {"r": [1, 1, 1, 1, 1, 1, 0, 0, 1, 0]}})
    b = _arm({"s": {"r": [0, 0, 0, 0, 0, 0, 1, 1, 1, 0]}})
    c = hierarchical_contrast(a, b)
    assert c.estimate == pytest.approx(0.4)
    assert c.se == pytest.approx(math.sqrt(6.4 / 9 / 10))
    assert c.df == pytest.approx(9)
    assert c.half_width == pytest.approx(2.2622 * c.se, rel=1e-4)
    # 0.4 + 0.603 > 1: a difference of two accuracies cannot exceed 1, so the interval stops there
    assert (c.low, c.high) == pytest.approx((0.4 - c.half_width, 1.0)) and "cut to [-1, 1]" in c.note
    assert c.levels == ["task"] and "one start" in c.note and "replicates" in c.note
    assert c.paired_replicates and [(r.start, r.replicate, r.delta) for r in c.per_replicate] == [("s", "r", 0.4)]


def test_two_starts_that_disagree_use_the_between_start_spread() -> None:
    # start 0: a - b = +0.5 on every task; start 1: -0.1 on every task (4 tasks, no task noise). Between starts:
    # mean 0.2, sd |0.5 - (-0.1)| / sqrt 2, se = sd / sqrt 2 = 0.3; t_{.975, 1} = 12.706 -> half-width 3.812
    a = _arm({"0": {"rl0": [1, 1, 0, 0], "rl1": [1, 1, 0, 0]}, "1": {"rl0": [0, 0, 1, 1], "rl1": [1, 0, 1, 0]}})
    b = {"0": {"sft": {"t0": 0.5, "t1": 0.5, "t2": -0.5, "t3": -0.5}},
         "1": {"sft": {"t0": 0.6, "t1": 0.1, "t2": 1.1, "t3": 0.6}}}
    c = hierarchical_contrast(a, b)
    per_start = [0.5, -0.1]
    assert c.estimate == pytest.approx(0.2)
    assert c.se == pytest.approx(statistics.stdev(per_start) / math.sqrt(2))
    assert c.df == 1 and c.half_width == pytest.approx(12.706 * 0.3, rel=1e-4)
    assert c.levels == ["start", "replicate", "task"]
    assert not c.paired_replicates and (c.n_replicates_a, c.n_replicates_b, c.n_replicates) == (4, 2, 4)
    # unpaired: each of a's replicates minus b's (single) replicate of that start
    assert [round(r.delta, 4) for r in c.per_replicate] == [0.5, 0.5, -0.1, -0.1]


def test_an_interval_past_what_accuracy_can_take_is_cut_to_it() -> None:
    # two starts far apart (0.25 and 1.0 on 0/1 outcomes): mean 0.625, se 0.375, t_{.975, 1} = 12.706 -> the t
    # interval is [-4.14, 5.39]; a mean of 0/1 outcomes lies in [0, 1], a difference of two in [-1, 1]
    a = _arm({"0": {"r0": [1, 0, 0, 0]}, "1": {"r0": [1, 1, 1, 1]}})
    m = hierarchical_mean(a)
    assert m.estimate == pytest.approx(0.625) and (m.low, m.high) == (0.0, 1.0)
    assert m.half_width == pytest.approx(12.706 * 0.375, rel=1e-4) and "cut to [0, 1]" in m.note
    zero = _arm({"0": {"r0": [0, 0, 0, 0]}, "1": {"r0": [0, 0, 0, 0]}})
    c = hierarchical_contrast(a, zero)
    assert (c.low, c.high) == (-1.0, 1.0) and "cut to [-1, 1]" in c.note
    # outcomes outside [0, 1] (b above is a score, not an accuracy) are not cut
    wide = {"0": {"sft": {"t0": 2.0, "t1": -2.0, "t2": 2.0, "t3": -2.0}},
            "1": {"sft": {"t0": 9.0, "t1": 9.0, "t2": 9.0, "t3": 9.0}}}
    assert hierarchical_mean(wide).high > 1 and "cut" not in hierarchical_mean(wide).note


def test_replicates_with_the_same_ids_are_paired() -> None:
    # the same RL seed in both arms moves both the same way (+0.5 / -0.5 shifts): paired, the per-replicate
    # deltas are both 0.25 and the replicate term vanishes; unpaired (other ids) it would not
    a = _arm({"s": {"rl0": [1, 1, 1, 1], "rl1": [1, 0, 0, 0]}})
    b = _arm({"s": {"rl0": [1, 1, 1, 0], "rl1": [0, 0, 0, 0]}})
    paired = hierarchical_contrast(a, b)
    assert paired.paired_replicates
    assert [r.delta for r in paired.per_replicate] == [0.25, 0.25]
    unpaired = hierarchical_contrast(a, {"s": {"x0": b["s"]["rl0"], "x1": b["s"]["rl1"]}})
    assert not unpaired.paired_replicates and unpaired.estimate == paired.estimate
    assert unpaired.se > paired.se  # the shared seed effect counted as noise twice when not paired


def test_within_start_variance_subtracts_the_double_counted_residual() -> None:
    # One arm, 2 replicates x 4 tasks, x = [[1, 1, 0, 1], [0, 1, 0, 0]]. By hand: row means 0.75, 0.25 -> s^2 =
    # 0.125, / R = 0.0625; column means 0.5, 1, 0, 0.5 -> s^2 = 1/6, / T = 0.041667; residuals x - row - col +
    # grand (0.5): [[0.25, -0.25, -0.25, 0.25], [-0.25, 0.25, 0.25, -0.25]] -> SS 0.5, MSE = 0.5 / 3, / (R T) =
    # 0.020833. Variance 0.0625 + 0.041667 - 0.020833 = 0.083333.
    e = hierarchical_mean(_arm({"s": {"r0": [1, 1, 0, 1], "r1": [0, 1, 0, 0]}}))
    assert e.estimate == 0.5 and e.se == pytest.approx(math.sqrt(0.083333), rel=1e-4)
    assert e.levels == ["replicate", "task"] and (e.n_starts, e.n_replicates, e.n_tasks) == (1, 2, 4)


def test_agreeing_starts_keep_the_within_start_variance() -> None:
    # two starts with the same data: between-start spread 0 < within noise -> the within-start variance is used
    start = {"r0": [1, 1, 0, 1, 0, 1], "r1": [0, 1, 0, 0, 1, 1]}
    one, two = hierarchical_mean(_arm({"0": start})), hierarchical_mean(_arm({"0": start, "1": start}))
    assert two.estimate == one.estimate and two.se == pytest.approx(one.se / math.sqrt(2))
    assert "start" in two.levels and "estimated at 0" in two.note


def test_unshared_tasks_are_left_out_and_counted() -> None:
    a = {"s": {"r": {"t0": 1.0, "t1": 0.0, "t2": 1.0}}}
    b = {"s": {"r": {"t0": 0.0, "t1": 0.0, "t9": 1.0}}}
    c = hierarchical_contrast(a, b)
    assert c.n_tasks == 2 and c.estimate == 0.5 and "2 task result(s)" in c.note


@pytest.mark.parametrize(("a", "b", "match"), [
    ({"0": {"r": {"t0": 1, "t1": 0}}}, {"1": {"r": {"t0": 1, "t1": 0}}}, "same starts"),
    ({"0": {"r": {"t0": 1, "t1": 0}}}, {"0": {"r": {"t0": 1, "t5": 0}}}, "start '0': 1 task"),
    ({"0": {"r": {"t0": 1, "t1": float("nan")}}}, {"0": {"r": {"t0": 1, "t1": 0}}}, "a, start '0'.*finite"),
    ({"0": {}}, {"0": {"r": {"t0": 1, "t1": 0}}}, "start '0'"),
])
def test_bad_input_names_the_problem(a, b, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        hierarchical_contrast(a, b)


def test_p_value_agrees_with_the_interval() -> None:
    a = _arm({"s": {"r0": [1] * 14 + [0] * 6, "r1": [1] * 12 + [0] * 8}})
    for shift in range(0, 12):
        b = _arm({"s": {"r0": [1] * (14 - shift) + [0] * (6 + shift)}})
        c = hierarchical_contrast(a, b)
        if c.se > 0:
            assert (c.p_value < 0.05) == (c.low > 0 or c.high < 0), (shift, c.p_value, c.low)


def test_holm_hand_values() -> None:
    # sorted 0.01, 0.02, 0.03, 0.5 -> 4 * 0.01, 3 * 0.02, max(prev, 2 * 0.03), max(prev, 1 * 0.5)
    assert holm({"a": 0.03, "b": 0.01, "c": 0.5, "d": 0.02}) == {"a": 0.06, "b": 0.04, "c": 0.5, "d": 0.06}
    assert holm({"a": 0.4, "b": 0.6}) == {"a": 0.8, "b": 0.8}  # monotone: never below an earlier step
    assert holm({}) == {}
    with pytest.raises(ValueError, match="'x'"):
        holm({"x": 1.5})


def _est(low: float, high: float, se: float, df: float) -> Estimate:
    return Estimate(estimate=(low + high) / 2, low=low, high=high, half_width=(high - low) / 2, se=se, df=df,
                    level=0.95, n_starts=3, n_replicates=12, n_tasks=900, method="", levels=[], note="")


def test_effect_sizes_an_interval_excludes() -> None:
    assert excludable_effect(_est(-0.05, 0.02, 0.018, 20)) == 0.05
    # normal: (1.96 + 0.8416) * se; with 2 df: (4.303 + 1.061) * se (t table: 0.8 quantile at 2 df = 1.061)
    assert min_detectable_effect(_est(-0.02, 0.02, 0.01, 1e9)) == pytest.approx(0.028016, abs=1e-5)
    assert min_detectable_effect(_est(-0.02, 0.02, 0.01, 2)) == pytest.approx(0.05364, abs=2e-4)
    assert min_detectable_effect(_est(-0.02, 0.02, 0.01, 1e9), power=0.5) == pytest.approx(0.0196, abs=1e-4)
