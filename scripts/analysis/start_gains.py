"""Per SFT start: the SFT planner's accuracy and each RL arm's mean gain over it, from a pooled experiment file;
and the planned contrasts read family-wise (Holm over their p-values, omnidecision.stats.holm).

    python scripts/analysis/start_gains.py docs/results/experiment-9starts.json

Exploratory (not a planned contrast). "RL gains most where SFT is weakest" has a built-in artefact: a start whose SFT
planner was unlucky on its test tasks shows a low accuracy and a high gain from the same task noise. So the
correlation is given twice: on all tasks, and split-half (the SFT level from the even-numbered test tasks, the gain
from the odd-numbered ones, and the other way round, averaged), where the two share no task.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import mean

import numpy as np

ARMS = ("grpo", "grpo_judge", "grpo_own", "rft", "rft_own")


def _acc(outcomes: dict[str, float], keep) -> float:
    return mean(v for t, v in outcomes.items() if keep(t))


def _all(task: str) -> bool:
    return True


def _level_and_gain(pooled: dict, arm: str, start: str, level_keep=_all, gain_keep=_all) -> tuple[float, float]:
    sft = pooled["outcomes"]["sft"][start]["r0"]
    reps = pooled["outcomes"][arm][start].values()
    gain = mean(_acc(r, gain_keep) for r in reps) - _acc(sft, gain_keep)
    return _acc(sft, level_keep), gain


def _r(xy: np.ndarray) -> float | None:
    """Pearson r of the two columns; None where one of them does not vary (r is undefined)."""
    if np.ptp(xy[:, 0]) == 0 or np.ptp(xy[:, 1]) == 0:
        return None
    return float(np.corrcoef(xy[:, 0], xy[:, 1])[0, 1])


def _fmt(r: float | None) -> str:
    return "n/a (no spread)" if r is None else f"{r:+.2f}"


def _even(task: str) -> bool:
    return int(task.rsplit("-", 1)[1]) % 2 == 0


def main(path: str) -> None:
    pooled = json.loads(Path(path).read_text("utf-8"))
    starts = [str(s) for s in pooled["seeds"]]
    full = {a: np.array([_level_and_gain(pooled, a, s) for s in starts]) for a in ARMS}  # (level, gain) per start
    print("| start | sft | oracle_sft | teacher | " + " | ".join(f"{a} − sft" for a in ARMS) + " |")
    print("|---|---|---|---|" + "---|" * len(ARMS))
    for i, s in enumerate(starts):
        acc = {n: pooled["per_seed_accuracy"][n][i] for n in ("sft", "oracle_sft", "teacher")}
        print(f"| {s} | {acc['sft']:.3f} | {acc['oracle_sft']:.3f} | {acc['teacher']:.3f} | "
              + " | ".join(f"{full[a][i, 1]:+.3f}" for a in ARMS) + " |")
    print()
    print("Pearson r between the start's SFT accuracy and the arm's mean gain (all tasks; split-half):")
    for a in ARMS:
        halves = []
        for level_keep, gain_keep in ((_even, lambda t: not _even(t)), (lambda t: not _even(t), _even)):
            xy = np.array([_level_and_gain(pooled, a, s, level_keep, gain_keep) for s in starts])
            halves.append(_r(xy))
        half = None if None in halves else mean(halves)
        print(f"- {a}: {_fmt(_r(full[a]))}; split-half {_fmt(half)}")
    planned = (pooled.get("contrasts") or {}).get("planned") or {}
    if planned:
        from omnidecision.stats import holm

        adjusted = holm({k: c["p_value"] for k, c in planned.items()})
        print()
        print("Planned contrasts, each at 95% (as declared) and family-wise (Holm over the planned p-values):")
        for k, c in planned.items():
            print(f"- {k}: {c['estimate']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}] p {c['p_value']:.3g}, "
                  f"Holm {adjusted[k]:.3g}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
