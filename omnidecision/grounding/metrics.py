"""How far a reward proxy is from the executed outcome, over groups of candidate decisions from the same ledger state.

    python -c "from omnidecision.grounding.metrics import proxy_metrics; help(proxy_metrics)"

One `Candidate` per (state, decision): its proxy scores (each closure check, the judge, the combined reward) and its
executed return (the mean judged outcome of its continuations: grounding/returns.py). For each proxy:

- **AUROC** over every candidate: how well the proxy separates decisions whose execution succeeds (return ≥ 0.5)
  from those that fail;
- **within-group rank correlation** (Spearman, mean over the groups where both the proxy and the return vary): what
  GRPO's group-relative advantage uses — a proxy can have a fine AUROC across states and still order the K
  candidates of one state wrongly; `flat` counts the groups where the return varies but the proxy gives every
  candidate the same score (GRPO then learns nothing there);
- **top-1 agreement** (groups where the return varies): the chance that the proxy's best candidate (ties broken at
  random) is among the executed best;
- **calibration**: the mean executed return per proxy bin of width 0.2, and its expected calibration error.

Each is also given per family (the task's category) and per kind of group (`group_kind`: what the group's valid
candidates differ in — finish against call, the need, or only the tool).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from omnidecision.stats import auroc

GroupKind = Literal["finish", "need", "tool", "same"]
BINS = 5


class Candidate(BaseModel):
    """One candidate decision at one ledger state, with its proxy scores and its executed return."""

    state: str = Field(description="the state's id: `run_id:step` of the recorded run it comes from")
    family: str = Field("", description="the task's category (a synthetic family)")
    decision: str = Field(description="the candidate's completion text")
    action: str = Field(description="`finish`, `call:<need>:<tool>`, or `invalid`")
    proxies: dict[str, float | None] = Field(description="proxy name -> its score of this candidate")
    executed: float = Field(description="mean judged outcome (1 correct, 0 not) over the continuations")
    closure: float | None = Field(None, description="mean share of blocking needs filled at the continuations' end")


def group_kind(actions: Iterable[str]) -> GroupKind:
    """What the valid candidates of one state differ in.

    >>> group_kind(["finish", "call:0:web_search"]), group_kind(["call:0:web_search", "call:1:web_search"])
    ('finish', 'need')
    >>> group_kind(["call:0:web_search", "call:0:subtitle_grounding", "invalid"]), group_kind(["finish", "finish"])
    ('tool', 'same')
    """
    valid = {a for a in actions if a != "invalid"}
    if "finish" in valid and len(valid) > 1:
        return "finish"
    if len({a.split(":")[1] for a in valid if a.startswith("call:")}) > 1:
        return "need"
    return "tool" if len(valid) > 1 else "same"


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either side is constant.

    >>> spearman([1, 2, 3], [3, 2, 1]), spearman([1, 1, 1], [1, 2, 3])
    (-1.0, None)
    """
    rx, ry = pd.Series(list(x), dtype=float).rank().to_numpy(), pd.Series(list(y), dtype=float).rank().to_numpy()
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return None
    return round(float(np.corrcoef(rx, ry)[0, 1]), 4)


def top1_agreement(proxy: Sequence[float], executed: Sequence[float]) -> float:
    """The chance that the proxy's best candidate, ties broken uniformly, is one of the executed best.

    >>> top1_agreement([0.9, 0.9, 0.1], [1.0, 0.0, 0.0])
    0.5
    """
    top = max(proxy)
    best = max(executed)
    chosen = [i for i, p in enumerate(proxy) if p == top]
    return sum(executed[i] == best for i in chosen) / len(chosen)


def calibration(scores: Sequence[float], executed: Sequence[float]) -> dict[str, object]:
    """Mean executed return per proxy bin ([0, 0.2), …, [0.8, 1.0]; scores clipped to [0, 1]) and the expected
    calibration error (bins weighted by their counts)."""
    s = np.clip(np.asarray(scores, dtype=float), 0.0, 1.0)
    e = np.asarray(executed, dtype=float)
    idx = np.minimum((s * BINS).astype(int), BINS - 1)
    bins, ece = [], 0.0
    for b in range(BINS):
        mask = idx == b
        if not mask.any():
            continue
        mean_s, mean_e = float(s[mask].mean()), float(e[mask].mean())
        bins.append({"low": b / BINS, "high": (b + 1) / BINS, "n": int(mask.sum()), "mean_proxy": round(mean_s, 4),
                     "mean_executed": round(mean_e, 4)})
        ece += mask.sum() / len(s) * abs(mean_s - mean_e)
    return {"bins": bins, "ece": round(float(ece), 4)}


def _groups(cands: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    out: dict[str, list[Candidate]] = {}
    for c in cands:
        out.setdefault(c.state, []).append(c)
    return out


def proxy_metrics(cands: Sequence[Candidate], proxy: str) -> dict[str, object]:
    """AUROC, within-group Spearman, top-1 agreement and calibration of one proxy over the candidates that have a
    score for it (a proxy may abstain with None)."""
    scored = [c for c in cands if c.proxies.get(proxy) is not None and math.isfinite(c.proxies[proxy])]  # type: ignore[arg-type]
    if not scored:
        return {"n": 0}
    scores = [float(c.proxies[proxy]) for c in scored]  # type: ignore[arg-type]
    executed = [c.executed for c in scored]
    rhos, tops, flat, varying = [], [], 0, 0
    for group in _groups(scored).values():
        p, e = [float(c.proxies[proxy]) for c in group], [c.executed for c in group]  # type: ignore[arg-type]
        if len(group) < 2 or np.ptp(e) == 0:
            continue  # every candidate led to the same outcome: nothing to rank
        varying += 1
        tops.append(top1_agreement(p, e))
        rho = spearman(p, e)
        if rho is None:
            flat += 1
        else:
            rhos.append(rho)
    return {"n": len(scored), "states": len(_groups(scored)), "varying_states": varying,
            "auroc": auroc(scores, [x >= 0.5 for x in executed]),
            "within_group_spearman": round(float(np.mean(rhos)), 4) if rhos else None,
            "spearman_groups": len(rhos), "flat_groups": flat,
            "top1_agreement": round(float(np.mean(tops)), 4) if tops else None,
            "calibration": calibration(scores, executed)}


def audit_metrics(cands: Sequence[Candidate], proxies: Sequence[str]) -> dict[str, object]:
    """Every proxy's metrics overall, per family and per group kind."""
    kinds = {state: group_kind(c.action for c in group) for state, group in _groups(cands).items()}
    families = sorted({c.family for c in cands})
    out: dict[str, object] = {"overall": {p: proxy_metrics(cands, p) for p in proxies}, "by_family": {},
                              "by_group_kind": {}, "group_kinds": {k: list(kinds.values()).count(k)
                                                                   for k in ("finish", "need", "tool", "same")}}
    for f in families:
        sub = [c for c in cands if c.family == f]
        out["by_family"][f] = {p: proxy_metrics(sub, p) for p in proxies}  # type: ignore[index]
    for k in ("finish", "need", "tool"):
        sub = [c for c in cands if kinds[c.state] == k]
        if sub:
            out["by_group_kind"][k] = {p: proxy_metrics(sub, p) for p in proxies}  # type: ignore[index]
    return out
