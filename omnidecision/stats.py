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

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
from pydantic import BaseModel

logger = logging.getLogger(__name__)


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
    Tasks present in one run only are left out (and counted in `unpaired`). The tasks are the only noise this
    interval sees: for replicated runs (several SFT starts, several RL seeds) use `hierarchical_contrast`.

    >>> r = paired_in_loop({"t1": True, "t2": False, "t3": False}, {"t1": True, "t2": True, "t3": True}, ("x", "y"))
    >>> r["a"], r["b"], r["n"], r["a_only"], r["b_only"], r["delta"]
    ('x', 'y', 3, 0, 2, 0.6667)
    """
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


# ---- the experiment: SFT start → RL replicate → task ------------------------------------------------------------
# One arm's outcomes: start → replicate → task id → value (0/1 outcome or a score). Within a start every arm is
# evaluated on the same tasks (paired by task); replicates are RL seeds (one replicate per start is fine, e.g. sft).
Outcomes = Mapping[str, Mapping[str, Mapping[str, float]]]


class Estimate(BaseModel):
    """A hierarchical estimate: the mean of the per-start means and its t interval at `level`.

    `levels` names the variance levels the interval counts (of "start", "replicate", "task"); `note` says in words
    what it could not count (e.g. the start level with one start). `n_replicates` is summed over starts,
    `n_tasks` too (the tasks shared by every replicate within a start)."""

    estimate: float
    low: float
    high: float
    half_width: float
    se: float
    df: float
    level: float
    n_starts: int
    n_replicates: int
    n_tasks: int
    method: str
    levels: list[str]
    note: str


class ReplicateDelta(BaseModel):
    start: str
    replicate: str
    delta: float


class ContrastEstimate(Estimate):
    """a − b with the same interval; `per_replicate` lists the replicate-level deltas as the method pairs them
    (`paired_replicates`: by replicate id), `n_replicates` counts them; `n_replicates_a` / `_b` count each arm's."""

    p_value: float
    per_replicate: list[ReplicateDelta]
    paired_replicates: bool
    n_replicates_a: int
    n_replicates_b: int


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t statistic `t` with `df` (real, > 0) degrees of freedom:
    I_x(df/2, 1/2) at x = df / (df + t²), the regularized incomplete beta function.

    >>> round(t_two_sided_p(12.7062, 1), 4), round(t_two_sided_p(2.2281, 10), 4), round(t_two_sided_p(0.0, 3), 4)
    (0.05, 0.05, 1.0)
    """
    if df <= 0:
        raise ValueError(f"t_two_sided_p: df must be > 0, got {df}")
    if not math.isfinite(t):
        return 0.0
    return _betainc(df / 2, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` (real, > 0) degrees of freedom (Newton on `t_two_sided_p` from the
    normal quantile, where the tail is convex: monotone convergence); df = inf gives the normal quantile.

    >>> [round(t_quantile(0.975, df), 3) for df in (1, 2, 10, 1e9)], round(t_quantile(0.025, 4), 3)
    ([12.706, 4.303, 2.228, 1.96], -2.776)
    """
    if not 0 < p < 1:
        raise ValueError(f"t_quantile: need 0 < p < 1, got {p}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    z = NormalDist().inv_cdf(p)
    if p == 0.5 or df > 1e7:
        return z
    alpha, t = 2 * (1 - p), z
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(200):
        gap = t_two_sided_p(t, df) - alpha
        step = gap / (2 * math.exp(log_c - (df + 1) / 2 * math.log1p(t * t / df)))  # d p / d t = -2 pdf(t)
        t += step
        if abs(step) < 1e-10 * max(1.0, t):
            break
    return t


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) by its continued fraction (modified Lentz; Numerical Recipes 6.4)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast only on this side
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(a * math.log(x) + b * math.log1p(-x) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return min(1.0, front * h / a)


def _satterthwaite(parts: list[tuple[float, float]]) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of variance terms, each (term, the variance of its
    estimate in units of mean squares: Σ (coefficient · mean square)² / df over the mean squares it is made of)."""
    total = sum(v for v, _ in parts)
    denom = sum(w for _, w in parts)
    return total * total / denom if denom > 0 else math.inf


def _replicate_term(x: np.ndarray) -> tuple[float, float] | None:
    """σ²_rep/R for one arm's replicate × task matrix within a start (with its Satterthwaite weight): the row
    means' variance over R, s²(rows)/R, estimates σ²_rep/R + σ²_res/(R·T); the two-way (replicate × task) ANOVA's
    residual mean square MSE estimates σ²_res; so s²(rows)/R − MSE/(R·T), truncated at 0. None with one
    replicate (the arm is fixed given its start: sft, teacher)."""
    r, t = x.shape
    if r < 2:
        return None
    rows, cols = x.mean(axis=1), x.mean(axis=0)
    resid = x - rows[:, None] - cols[None, :] + x.mean()
    between, res = float(rows.var(ddof=1)) / r, float((resid**2).sum()) / ((r - 1) * (t - 1)) / (r * t)
    if between <= res:
        return 0.0, 0.0
    return between - res, between**2 / (r - 1) + res**2 / ((r - 1) * (t - 1))


def _within(xs: list[np.ndarray], signs: list[float]) -> tuple[float, float, float]:
    """(Σ sign·mean, its within-start variance, Satterthwaite df) for replicate × task matrices on the same tasks.

    Crossed random effects (replicate, task, residual): Var = Σ σ²_rep/R + σ²_task/T + Σ σ²_res/(R·T). The
    per-task deltas' variance over T estimates σ²_task/T + Σ σ²_res/(R·T) (each task's delta averages its R
    residuals), so Var = that task term + each arm's replicate term (`_replicate_term`; the two-way
    cluster-robust variance of Cameron, Gelbach & Miller 2011 with its double-counted residual taken off)."""
    col = sum(s * x.mean(axis=0) for s, x in zip(signs, xs, strict=True))
    t = col.shape[0]
    task = float(col.var(ddof=1)) / t
    parts = [(task, task**2 / (t - 1))] + [p for p in map(_replicate_term, xs) if p is not None]
    var = sum(v for v, _ in parts)
    return float(sum(s * x.mean() for s, x in zip(signs, xs, strict=True))), var, _satterthwaite(parts)


def _matrix(arm: Mapping[str, Mapping[str, float]], reps: list[str], tasks: list[str], where: str) -> np.ndarray:
    x = np.array([[float(arm[r][t]) for t in tasks] for r in reps], dtype=float)
    if not np.isfinite(x).all():
        raise ValueError(f"{where}: outcomes must be finite numbers")
    return x


def _shared_tasks(arms: list[Mapping[str, Mapping[str, float]]], start: str, where: str) -> tuple[list[str], int]:
    if any(not arm for arm in arms):
        raise ValueError(f"{where}: start {start!r} has no replicate in one of the arms")
    task_sets = [set(tasks) for arm in arms for tasks in arm.values()]
    shared = sorted(set.intersection(*task_sets))
    if len(shared) < 2:
        raise ValueError(f"{where}: start {start!r}: {len(shared)} task(s) shared by every replicate (need 2)")
    return shared, len(set.union(*task_sets)) - len(shared)


def _interval(per_start: list[tuple[float, float, float]]) -> tuple[float, float, float, str, bool]:
    """Combine starts (equal weight): (estimate, variance, df, what was done, start level counted)."""
    n = len(per_start)
    ds = np.array([d for d, _, _ in per_start])
    within = sum(v for _, v, _ in per_start) / n**2
    df_within = _satterthwaite([(v / n**2, (v / n**2) ** 2 / df) for _, v, df in per_start])
    if n == 1:
        return float(ds[0]), within, df_within, "one start: the variance between SFT starts cannot be estimated " \
            "and is not counted", False
    between = float(ds.var(ddof=1)) / n
    if between >= within:
        return float(ds.mean()), between, n - 1, f"between-start spread of the {n} start deltas (t, {n - 1} df; " \
            "it contains the replicate and task noise)", True
    return float(ds.mean()), within, df_within, f"the {n} start deltas spread no more than their within-start " \
        "noise: start variance estimated at 0, within-start variance used", True


def _estimate(per_start: list[tuple[float, float, float]], level: float, extra_note: str) -> dict[str, Any]:
    est, var, df, note, start_counted = _interval(per_start)
    se = math.sqrt(var)
    half = t_quantile(0.5 + level / 2, df) * se if se > 0 else 0.0
    return {"estimate": est, "low": est - half, "high": est + half, "half_width": half, "se": se, "df": df,
            "level": level, "n_starts": len(per_start), "note": "; ".join(x for x in (note, extra_note) if x),
            "levels": (["start"] if start_counted else []), "_p": _p_value(est, se, df)}


def _bounded(out: dict[str, Any], matrices: list[np.ndarray], width: int) -> dict[str, Any]:
    """Intersect the interval with the values the estimate can take when every outcome lies in [0, 1] (a mean in
    [0, 1], a difference in [-1, 1]): with 2–3 starts a t interval can reach past them, which says nothing more.
    `half_width` stays the t half-width (what sizing reads); `note` says when the interval was cut."""
    if not all(m.size == 0 or (m.min() >= 0 and m.max() <= 1) for m in matrices):
        return out
    lo, hi = (0.0, 1.0) if width == 1 else (-1.0, 1.0)
    if out["low"] < lo or out["high"] > hi:
        out["low"], out["high"] = max(out["low"], lo), min(out["high"], hi)
        out["note"] = "; ".join(x for x in (out["note"], f"interval cut to [{lo:g}, {hi:g}]") if x)
    return out


def _p_value(est: float, se: float, df: float) -> float:
    if se == 0:
        return 1.0 if est == 0 else 0.0
    return t_two_sided_p(est / se, df)


METHOD = ("hierarchical t: mean of per-start means; within a start crossed replicate × task variance components "
          "(Satterthwaite df); between starts the spread of the start means (S - 1 df) when it exceeds that")


def hierarchical_mean(a: Outcomes, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> Estimate:
    """One arm's mean over starts (each start: mean over replicates of the mean over its tasks) with an interval
    that counts the variance between SFT starts, between RL replicates and between tasks; see
    `hierarchical_contrast` for the method. `n_boot` and `seed` are accepted for a signature shared with the
    bootstrap comparisons; the closed-form interval needs neither and is deterministic.

    >>> e = hierarchical_mean({"s0": {"r0": {"t1": 1, "t2": 0}, "r1": {"t1": 1, "t2": 1}}})
    >>> e.estimate, e.n_starts, e.n_replicates, e.n_tasks, e.levels
    (0.75, 1, 2, 2, ['replicate', 'task'])
    """
    if not a:
        raise ValueError("hierarchical_mean: no start")
    per_start, n_rep, n_tasks, dropped, multi, seen = [], 0, 0, 0, False, []
    for s in sorted(a):
        tasks, lost = _shared_tasks([a[s]], s, "hierarchical_mean")
        reps = sorted(a[s])
        seen.append(_matrix(a[s], reps, tasks, f"hierarchical_mean: start {s!r}"))
        per_start.append(_within([seen[-1]], [1.0]))
        n_rep, n_tasks, dropped = n_rep + len(reps), n_tasks + len(tasks), dropped + lost
        multi = multi or len(reps) > 1
    out = _bounded(_estimate(per_start, level, _notes(dropped, multi, len(per_start))), seen, 1)
    out["levels"] += (["replicate"] if multi else []) + ["task"]
    out.pop("_p")
    return Estimate(**out, n_replicates=n_rep, n_tasks=n_tasks, method=METHOD)


def _notes(dropped: int, multi: bool, n_starts: int) -> str:
    notes = [f"{dropped} task result(s) not shared by every replicate of a start left out"] if dropped else []
    if not multi:
        notes.append("one replicate per start: the variance between RL replicates " +
                     ("is part of the start level" if n_starts > 1 else "cannot be estimated and is not counted"))
    return "; ".join(notes)


def hierarchical_contrast(a: Outcomes, b: Outcomes, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95
                          ) -> ContrastEstimate:
    """The difference a − b (per start: a's replicate mean minus b's, over the tasks every replicate of both arms
    has; then the mean over starts), with a t interval that counts the variance between SFT starts, between RL
    replicates within a start and between tasks (paired by task within a start).

    Method, and why not a bootstrap: with 1–3 starts a bootstrap over starts has 1–10 distinct resamples and
    under-covers (its variance is (S−1)/S of the truth, with normal rather than t_{S−1} tails), and resampling
    replicates and then tasks counts the replicate × task residual twice. So, in closed form:
    - within a start, the replicate × task matrices are crossed random effects (replicate, task, residual):
      variance = the task term s²(per-task a − b)/T (which holds each arm's residual over R·T) + for each arm
      with R > 1 its replicate term s²(replicate means)/R − MSE/(R·T), truncated at 0 (MSE: the two-way ANOVA
      residual, which the replicate means hold too; `_within`, `_replicate_term`), with Satterthwaite df. An arm
      with one replicate (sft, teacher) is fixed given its start. When both arms have the same replicate ids (RL
      seeds run for both arms) they are paired by id: the same terms on the replicate × task matrix of a − b
      (the covariance of seed-paired runs is then counted).
    - between starts (S ≥ 2): the sample variance of the S start deltas / S estimates the variance of their mean
      with every level in it (a nested design's top-level mean square), with S − 1 df. It is used when it is at
      least the within-start variance; otherwise the start variance is estimated at 0 and the within-start
      variance (Satterthwaite df) is used: the interval is never narrower than the within-start noise.
    - with one start the start level cannot be estimated: `levels` lacks "start" and `note` says so.
    The p-value is the two-sided t test of 0 on the same standard error and df. `n_boot` and `seed` are accepted
    for a signature shared with the bootstrap comparisons; this interval needs neither and is deterministic.
    Measured coverage (tests/stats/test_hierarchical_coverage.py, docs/research/statistics.md):
    0.93–0.98 for 1–5 starts; conservative when the start × arm variance is small.

    >>> a = {"s0": {"r0": {"t1": 1, "t2": 1, "t3": 0}, "r1": {"t1": 1, "t2": 0, "t3": 1}}}
    >>> b = {"s0": {"sft": {"t1": 1, "t2": 0, "t3": 0}}}
    >>> c = hierarchical_contrast(a, b)
    >>> round(c.estimate, 4), c.levels, [round(r.delta, 4) for r in c.per_replicate], c.paired_replicates
    (0.3333, ['replicate', 'task'], [0.3333, 0.3333], False)
    """
    if set(a) != set(b) or not a:
        raise ValueError(f"hierarchical_contrast: the arms must have the same starts: {sorted(a)} vs {sorted(b)}")
    per_start, points, dropped, seen = [], [], 0, []
    paired_all, multi, n_a, n_b, n_tasks = True, False, 0, 0, 0
    for s in sorted(a):
        tasks, lost = _shared_tasks([a[s], b[s]], s, "hierarchical_contrast")
        ra, rb = sorted(a[s]), sorted(b[s])
        xa = _matrix(a[s], ra, tasks, f"hierarchical_contrast: a, start {s!r}")
        xb = _matrix(b[s], rb, tasks, f"hierarchical_contrast: b, start {s!r}")
        paired = ra == rb
        seen += [xa, xb]
        paired_all, multi = paired_all and paired, multi or len(ra) > 1 or len(rb) > 1
        per_start.append(_within([xa - xb], [1.0]) if paired else _within([xa, xb], [1.0, -1.0]))
        if paired:
            points += [(s, r, float(d)) for r, d in zip(ra, (xa - xb).mean(axis=1), strict=True)]
        elif len(ra) >= len(rb):
            points += [(s, r, float(d)) for r, d in zip(ra, xa.mean(axis=1) - xb.mean(), strict=True)]
        else:
            points += [(s, r, float(d)) for r, d in zip(rb, xa.mean() - xb.mean(axis=1), strict=True)]
        n_a, n_b, n_tasks, dropped = n_a + len(ra), n_b + len(rb), n_tasks + len(tasks), dropped + lost
    out = _bounded(_estimate(per_start, level, _notes(dropped, multi, len(per_start))), seen, 2)
    out["levels"] += (["replicate"] if multi else []) + ["task"]
    p = out.pop("_p")
    return ContrastEstimate(**out, p_value=p, n_replicates=len(points), n_tasks=n_tasks, method=METHOD,
                            per_replicate=[ReplicateDelta(start=s, replicate=r, delta=d) for s, r, d in points],
                            paired_replicates=paired_all, n_replicates_a=n_a, n_replicates_b=n_b)


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values (step-down; the family-wise error rate held at any level), same keys.

    >>> holm({"x": 0.01, "y": 0.04, "z": 0.03})
    {'x': 0.03, 'y': 0.06, 'z': 0.06}
    """
    order = sorted(pvalues, key=lambda k: pvalues[k])
    m, running, out = len(order), 0.0, {}
    for i, k in enumerate(order):
        p = pvalues[k]
        if not 0 <= p <= 1:
            raise ValueError(f"holm: p-value of {k!r} must lie in [0, 1], got {p}")
        running = max(running, min(1.0, (m - i) * p))
        out[k] = round(running, 12)
    return {k: out[k] for k in pvalues}


def excludable_effect(e: Estimate) -> float:
    """The size |Δ| beyond which effects are excluded at the interval's level: max(|low|, |high|). For an interval
    that covers 0 this is what the experiment can rule out (an effect at least this large in either direction).

    >>> excludable_effect(Estimate(estimate=0.01, low=-0.02, high=0.04, half_width=0.03, se=0.015, df=30,
    ...     level=0.95, n_starts=3, n_replicates=12, n_tasks=300, method="", levels=[], note=""))
    0.04
    """
    return max(abs(e.low), abs(e.high))


def min_detectable_effect(e: Estimate, *, power: float = 0.8) -> float:
    """The true effect this design would detect (interval excluding 0, two-sided at e.level) with probability
    `power`, at its observed standard error and df: (t_{1−α/2} + t_{power}) · se.

    >>> round(min_detectable_effect(Estimate(estimate=0.0, low=-0.0196, high=0.0196, half_width=0.0196, se=0.01,
    ...     df=1e9, level=0.95, n_starts=3, n_replicates=12, n_tasks=300, method="", levels=[], note="")), 4)
    0.028
    """
    if not 0 < power < 1:
        raise ValueError(f"min_detectable_effect: power must lie in (0, 1), got {power}")
    return (t_quantile(0.5 + e.level / 2, e.df) + t_quantile(power, e.df)) * e.se
