"""Small exact statistics shared by the per-state (rl.evaluate) and in-loop (eval.stats) paired comparisons.

    >>> exact_sign_p(9, 1) == exact_sign_p(1, 9)
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence


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
