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
