"""Small statistics for eval reports: the Wilson score interval and safe means.

    python -c "from omnidecision.eval.stats import wilson; print(wilson(7, 10))"

    >>> wilson(0, 0)
    (0.0, 1.0)
    >>> [round(x, 4) for x in wilson(7, 10)]
    [0.3968, 0.8922]
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from omnidecision.stats import bootstrap_mean_ci, exact_sign_p

Z95 = 1.959963984540054  # the two-sided 95% normal quantile


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k/n (default 95%). n = 0 gives the vacuous (0, 1).

    Unlike the normal ("Wald") interval it stays inside [0, 1] and is not degenerate at k = 0 or k = n.
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


def paired_in_loop(a: dict[str, bool], b: dict[str, bool], names: tuple[str, str] = ("a", "b"), *,
                   n_boot: int = 4000, seed: int = 0) -> dict[str, object]:
    """Paired comparison of two planners in the loop on the SAME tasks: task id → correct, for each planner.

    `delta` = accuracy(b) − accuracy(a) over the shared tasks, with a paired-bootstrap 95% CI (tasks resampled) and
    the exact McNemar p-value; `a_only` / `b_only` count the tasks only that planner solved. Tasks present in one
    run only are left out (and counted in `unpaired`).

    >>> r = paired_in_loop({"t1": True, "t2": False, "t3": False}, {"t1": True, "t2": True, "t3": True}, ("x", "y"))
    >>> r["a"], r["b"], r["n"], r["a_only"], r["b_only"], r["delta"]
    ('x', 'y', 3, 0, 2, 0.6667)
    """
    import numpy as np

    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError(f"paired_in_loop: {names[0]} and {names[1]} share no task")
    xa = np.array([bool(a[t]) for t in shared], dtype=float)
    xb = np.array([bool(b[t]) for t in shared], dtype=float)
    diff = xb - xa
    low, high = bootstrap_mean_ci(diff, n_boot, seed)
    a_only, b_only = int(((xa == 1) & (xb == 0)).sum()), int(((xa == 0) & (xb == 1)).sum())
    return {"a": names[0], "b": names[1], "n": len(shared), "a_only": a_only, "b_only": b_only,
            "delta": round(float(diff.mean()), 4),
            "ci95": [round(low, 4), round(high, 4)],
            "p_value": float(f"{mcnemar_exact(a_only, b_only):.4g}"), "test": "exact McNemar; paired bootstrap CI",
            "unpaired": len(set(a) ^ set(b))}
