"""The project's statistics, in one module: exact tests, accuracy intervals, paired comparisons and the
hierarchical (SFT start → RL replicate → task) intervals of the experiment's contrasts.

- exact tests: `exact_sign_p` (= exact McNemar on discordant pairs, `mcnemar_exact`), `auroc`;
- accuracy intervals for eval reports: `wilson`, `task_accuracy_ci` (clustered by task), `per_task`, `mean`, `rate`;
- one pair of planners on the same tasks: `paired_in_loop` (task bootstrap: the tasks are the only noise it sees);
- the experiment: `hierarchical_mean`, `hierarchical_contrast` (starts, replicates and tasks all counted), `holm`,
  `min_detectable_effect`, `excludable_effect`.

Several samples of one task are not independent draws (the same question, the same evidence): an interval over
all runs as if they were would be too narrow. `task_accuracy_ci` takes the task as the unit: the Wilson interval
at the mean of the per-task accuracies with n = the number of tasks (conservative: exact when a task's samples
always agree, wider than needed when they vary), next to a task-level bootstrap of the per-task mean accuracy.
With one sample per task the Wilson interval is the one over runs. `paired_in_loop` compares two planners on the
same unit: per-task mean accuracy (0/1 with one sample per task).

    python -c "from omnidecision.stats import wilson; print(wilson(7, 10))"

    >>> wilson(0, 0)
    (0.0, 1.0)
    >>> [round(x, 4) for x in wilson(7, 10)]
    [0.3968, 0.8922]
    >>> exact_sign_p(9, 1) == exact_sign_p(1, 9)
    True
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence


def exact_sign_p(wins: int, losses: int) -> float:
    """Two-sided exact sign test (= exact McNemar on discordant pairs): the chance of a split at least this
    lopsided if either side were equally likely to win a discordant pair. Ties are not passed in.

    >>> exact_sign_p(0, 0)
    1.0
    >>> round(exact_sign_p(9, 1), 4)
    0.0215
    """
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n  # exact ints: no overflow at n > 1023
    return min(1.0, 2.0 * tail)


def bootstrap_mean_ci(diff: Sequence[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap 95% CI of the mean of paired differences (units resampled with replacement)."""
    import numpy as np

    d = np.asarray(diff, dtype=float)
    boots = d[np.random.default_rng(seed).integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    return float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the chance that a random positive scores above a random negative (ties count
    half; the Mann-Whitney U statistic over the counts). None without both classes.

    >>> auroc([0.9, 0.8, 0.3, 0.1], [True, True, False, False]), auroc([0.5, 0.5], [True, False])
    (1.0, 0.5)
    """
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    import numpy as np

    order = np.argsort(np.asarray(list(pos) + list(neg), dtype=float), kind="mergesort")
    values = np.asarray(list(pos) + list(neg), dtype=float)[order]
    ranks = np.empty(len(values))
    i = 0
    while i < len(values):  # average ranks over ties
        j = i
        while j + 1 < len(values) and values[j + 1] == values[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    rank_of = np.empty(len(values))
    rank_of[order] = ranks
    u = rank_of[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2
    return round(float(u / (len(pos) * len(neg))), 4)

Z95 = 1.959963984540054  # the two-sided 95% normal quantile


def wilson(k: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k/n (default 95%). n = 0 gives the vacuous (0, 1).

    Unlike the normal ("Wald") interval it stays inside [0, 1] and is not degenerate at k = 0 or k = n. `k` may be
    fractional: the sum of per-task accuracies when the unit is the task (`task_accuracy_ci`).
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # the interval always contains p (rounding at k = 0 or k = n would otherwise leave it a hair outside)
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def per_task(outcomes: Iterable[tuple[str, bool | float]]) -> dict[str, float]:
    """task id → mean accuracy over its samples, from (task id, correct) pairs: the unit of the clustered CI and of
    the paired comparisons.

    >>> per_task([("t1", True), ("t1", False), ("t1", True), ("t2", False)])
    {'t1': 0.6666666666666666, 't2': 0.0}
    """
    runs: dict[str, list[float]] = defaultdict(list)
    for task_id, correct in outcomes:
        runs[task_id].append(float(correct))
    return {t: sum(v) / len(v) for t, v in runs.items()}


WILSON_RUNS = "Wilson over runs (one sample per task)"
WILSON_TASKS = "Wilson over tasks at the per-task mean accuracy (clustered by task: {m} samples per task)"


def task_accuracy_ci(outcomes: Iterable[tuple[str, bool | float]], *, n_boot: int = 2000, seed: int = 0
                     ) -> dict[str, object]:
    """The 95% CI of an accuracy clustered by task (see the module docstring): `ci95` (Wilson at the mean per-task
    accuracy, n = tasks), `ci_method` (in words), `n_tasks`, `samples_per_task` (the most any task has) and
    `ci95_task_bootstrap` (percentile bootstrap over tasks of the per-task mean accuracy; None with one task).

    >>> r = task_accuracy_ci([("a", 1), ("a", 1), ("b", 0), ("b", 0)])
    >>> r["ci95"] == list(wilson(1, 2)), r["n_tasks"], r["samples_per_task"]
    (True, 2, 2)
    """
    pairs = list(outcomes)
    units = per_task(pairs)
    counts: dict[str, int] = defaultdict(int)
    for task_id, _ in pairs:
        counts[task_id] += 1
    m = max(counts.values(), default=0)
    low, high = wilson(sum(units.values()), len(units))
    boot = None
    if len(units) > 1:
        b_low, b_high = bootstrap_mean_ci(list(units.values()), n_boot, seed)
        boot = [round(b_low, 6), round(b_high, 6)]
    return {"ci95": [low, high], "ci_method": WILSON_RUNS if m <= 1 else WILSON_TASKS.format(m=m),
            "n_tasks": len(units), "samples_per_task": m, "ci95_task_bootstrap": boot}


def mean(values: Iterable[float | int | None]) -> float | None:
    """Mean of the non-None values; None when there are none.

    >>> mean([1, None, 2])
    1.5
    >>> mean([]) is None
    True
    """
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def rate(k: int, n: int) -> float | None:
    """k/n, or None when n is 0 (a rate over nothing is not zero)."""
    return k / n if n else None


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two closed intervals overlap.

    >>> overlap((0.1, 0.4), (0.4, 0.9)), overlap((0.1, 0.3), (0.35, 0.9))
    (True, False)
    """
    return a[0] <= b[1] and b[0] <= a[1]


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: the binomial test of the discordant pairs (tasks only one planner solved).

    >>> mcnemar_exact(0, 0)
    1.0
    >>> round(mcnemar_exact(10, 1), 4)
    0.0117
    """
    return exact_sign_p(a_only, b_only)


def paired_in_loop(a: Mapping[str, bool | float], b: Mapping[str, bool | float], names: tuple[str, str] = ("a", "b"),
                   *, n_boot: int = 4000, seed: int = 0) -> dict[str, object]:
    """Paired comparison of two planners in the loop on the SAME tasks: task id → correct (one sample per task) or
    the task's mean accuracy over its samples (`per_task`; the unit of the report's clustered CI), for each planner.

    `delta` = accuracy(b) − accuracy(a) over the shared tasks (means of the per-task accuracies), with a
    paired-bootstrap 95% CI (tasks resampled) and the exact sign test over tasks: `a_only` / `b_only` count the
    tasks where that planner did better (with 0/1 values: the tasks only it solved, and the test is exact McNemar).
    Tasks present in one run only are left out (and counted in `unpaired`).

    >>> r = paired_in_loop({"t1": True, "t2": False, "t3": False}, {"t1": True, "t2": True, "t3": True}, ("x", "y"))
    >>> r["a"], r["b"], r["n"], r["a_only"], r["b_only"], r["delta"]
    ('x', 'y', 3, 0, 2, 0.6667)
    """
    import numpy as np

    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError(f"paired_in_loop: {names[0]} and {names[1]} share no task")
    xa = np.array([float(a[t]) for t in shared], dtype=float)
    xb = np.array([float(b[t]) for t in shared], dtype=float)
    for name, x in zip(names, (xa, xb), strict=True):
        if ((x < 0) | (x > 1)).any():
            raise ValueError(f"paired_in_loop: {name}: a task's accuracy must lie in [0, 1]")
    diff = xb - xa
    low, high = bootstrap_mean_ci(diff, n_boot, seed)
    a_only, b_only = int((xa > xb).sum()), int((xb > xa).sum())
    binary = bool(np.isin(np.concatenate([xa, xb]), (0.0, 1.0)).all())
    test = ("exact McNemar; paired bootstrap CI" if binary else
            "exact sign test over tasks on per-task mean accuracy; paired task bootstrap CI")
    return {"a": names[0], "b": names[1], "n": len(shared), "a_only": a_only, "b_only": b_only,
            "delta": round(float(diff.mean()), 4),
            "ci95": [round(low, 4), round(high, 4)],
            "p_value": float(f"{mcnemar_exact(a_only, b_only):.4g}"), "test": test, "unit": "task",
            "unpaired": len(set(a) ^ set(b))}
