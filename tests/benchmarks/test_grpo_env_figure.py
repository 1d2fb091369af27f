"""The P7 figure of bench_grpo_env from per-repeat arm records: defined only from a START that clears the threshold,
differences per repeat with t-intervals, ratios of medians null with a reason when the denominator never gains.

    pytest -q tests/benchmarks/test_grpo_env_figure.py
"""

from __future__ import annotations

import pytest

from bench.bench_grpo_env import PAIRS, figure, ratio_of_medians, t_interval


def _repeats(gains: dict[str, list[float]], cpu: float = 10.0) -> list[dict]:
    n = len(next(iter(gains.values())))
    return [{arm: {"accuracy_gain": g[i], "cpu_s": cpu} for arm, g in gains.items()} for i in range(n)]


def test_a_qualifying_start_gives_differences_with_intervals() -> None:
    reps = _repeats({"proxy": [0.1, 0.2, 0.3], "executed": [0.3, 0.2, 0.4], "environment": [0.0, 0.1, 0.0]})
    fig = figure(reps, start_accuracy=0.35, threshold=0.30, dev_tasks=20)
    assert fig["defined"] and fig["reason"] is None
    assert set(fig["differences"]) == {f"{x} - {y}" for x, y in PAIRS}
    d = fig["differences"]["executed - proxy"]
    assert d["per_repeat"] == pytest.approx([0.02, 0.0, 0.01])  # gains per CPU-s, 10 CPU-s each
    assert (d["mean"], *d["ci95"]) == pytest.approx(t_interval([0.02, 0.0, 0.01]))
    assert d["ci95"][0] < d["mean"] < d["ci95"][1]
    assert fig["ratios_of_medians"]["proxy / environment"]["value"] is None  # the environment's median gain is 0
    assert fig["ratios_of_medians"]["executed / proxy"]["value"] == pytest.approx(0.3 / 0.2)


def test_a_weak_start_leaves_the_figure_undefined_with_the_reason() -> None:
    reps = _repeats({"proxy": [0.1, 0.2, 0.3], "executed": [0.3, 0.2, 0.4], "environment": [0.0, 0.1, 0.0]})
    fig = figure(reps, start_accuracy=0.25, threshold=0.30, dev_tasks=20)
    assert not fig["defined"]
    assert "0.25" in fig["reason"] and "0.3" in fig["reason"] and "undefined" in fig["reason"]
    assert fig["differences"] is None and fig["ratios_of_medians"] is None and fig["accuracy_gain_per_cpu_s"] is None


def test_a_ratio_over_a_gain_not_above_zero_is_null_with_its_reason() -> None:
    reps = _repeats({"proxy": [0.1, 0.1, 0.1], "environment": [-0.1, 0.0, 0.0]})
    r = ratio_of_medians(reps, "proxy", "environment")
    assert r["value"] is None and "not above 0" in r["reason"]
    assert ratio_of_medians(reps, "environment", "proxy")["value"] == pytest.approx(0.0)
