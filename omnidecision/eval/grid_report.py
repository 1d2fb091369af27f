"""The backend-swap grid's statistics and report: the accuracy of every cell, the paired swaps and the saturation
reading (`grid.json`, `grid.md`); the cells themselves are run by `eval/grid.py`.

    omnidecision ablate --grid configs/ablate/synthetic-grid.yaml --tasks.path runs/synth-eval --out runs/grid

Each axis (planner, perception) lists its variants weakest first; the first is the axis's **reference**. A **swap**
replaces one axis's reference by another of its variants while the other axis stays fixed: (a) the planner swap
p0 → p at perception q compares cell (p0, q) with (p, q); (b) the perception swap q0 → q at planner p compares
(p, q0) with (p, q); (c) swapping both compares (p0, q0) with (p, q) for p ≠ p0, q ≠ q0. Each swap is the paired
in-loop comparison of `eval/compare.py` on the tasks both cells ran (`stats.paired_in_loop`: the task is the unit,
its mean accuracy over samples; Δ = to − from; paired bootstrap 95% CI; exact McNemar / sign-test p).

**The saturation rule.** A swap *moves* accuracy when the 95% CI of its Δ excludes 0 (lower bound > 0: it raises
accuracy; upper bound < 0: it lowers it); otherwise (a CI that contains or touches 0) it is *within CI*. Every
planner swap at every perception, and every perception swap at every planner, is one *line* of the reading, with
one sentence:

- a line that moves: "<axis> swap A → B at <other axis> y raises|lowers accuracy by Δ pts (95% CI [lo, hi])";
- a line within CI while the same swap moves at another level of the other axis: "... within CI at <other axis> y
  (...): saturated by <other axis>" (at y the other axis caps what this swap can show);
- a line within CI where the same swap moves at no level of the other axis: "... within CI at <other axis> y
  (...), as at every <other axis>: no <axis> effect resolved at this n".

The **verdict** reads the two axes together; an axis moves at *every* level when all its lines move, at *no* level
when none does:

- perception at every planner, planner at none: "perception-bound" (a better planner cannot show what perception
  does not deliver: the planner is saturated by perception);
- planner at every perception, perception at none: "planner-bound";
- both at every level: "neither saturates";
- neither at any level: "unresolved" (no swap beyond its CI at this n: more tasks or samples);
- anything else: "interaction", naming for each axis the levels of the other where it moves and where it is
  saturated.

Swapping both (c) is reported with its Δ and CI but does not enter the verdict.

    >>> moves([0.02, 0.2]), moves([-0.3, -0.01]), moves([0.0, 0.2])
    ('raises', 'lowers', None)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omnidecision.stats import paired_in_loop

AXES: dict[str, str] = {"planner": "perception", "perception": "planner"}  # an axis → the axis held fixed
RULE = ("A swap moves accuracy when the paired 95% CI of its Δ (to − from, on the tasks both cells ran; unit: the "
        "task) excludes 0, and is within CI otherwise. Per line: moves; or within CI while the same swap moves at "
        "another level of the other axis (saturated by the other axis); or within CI at every level (no effect "
        "resolved at this n). Verdict: perception-bound (perception moves at every planner, the planner at none), "
        "planner-bound (the converse), neither saturates (both move everywhere), unresolved (nothing moves), "
        "interaction (anything else).")


def moves(ci95: list[float] | tuple[float, float]) -> str | None:
    """'raises' when the CI lies above 0, 'lowers' when it lies below, None when it contains or touches 0."""
    low, high = ci95
    return "raises" if low > 0 else "lowers" if high < 0 else None


def label(planner: str, perception: str) -> str:
    return f"{planner} × {perception}"


def swap_deltas(planners: list[str], perceptions: list[str], per_task: dict[tuple[str, str], dict[str, float]]
                ) -> list[dict[str, Any]]:
    """Every swap of the grid (module docstring: (a) planner, (b) perception, (c) both) as `stats.paired_in_loop`'s
    record plus `axis`, `swap` ("A → B"), `at` (the fixed level of the other axis; None for both), `from` / `to`
    (the two cells) and `moves`. `per_task` maps (planner, perception) → task id → mean accuracy over samples."""
    p0, q0 = planners[0], perceptions[0]
    pairs: list[tuple[str, str, str | None, tuple[str, str], tuple[str, str]]] = []
    for q in perceptions:
        pairs += [("planner", f"{p0} → {p}", q, (p0, q), (p, q)) for p in planners[1:]]
    for p in planners:
        pairs += [("perception", f"{q0} → {q}", p, (p, q0), (p, q)) for q in perceptions[1:]]
    pairs += [("both", f"{label(p0, q0)} → {label(p, q)}", None, (p0, q0), (p, q))
              for p in planners[1:] for q in perceptions[1:]]
    out = []
    for axis, swap, at, a, b in pairs:
        stats = paired_in_loop(per_task[a], per_task[b], (label(*a), label(*b)))
        out.append({"axis": axis, "swap": swap, "at": at, "from": list(a), "to": list(b), **stats,
                    "moves": moves(stats["ci95"])})
    return out


def _pts(delta: dict[str, Any]) -> str:
    lo, hi = delta["ci95"]
    return f"{100 * delta['delta']:+.1f} pts, 95% CI [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def _level(lines: list[dict[str, Any]]) -> str:
    moved = sum(line["moves"] is not None for line in lines)
    return "every" if lines and moved == len(lines) else "none" if moved == 0 else "some"


def saturation_reading(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    """The saturation rule of the module docstring over `swap_deltas`' records: one sentence per line (`lines`),
    how often each axis moves (`planner` / `perception`: every | some | none) and the `verdict`."""
    lines = []
    for axis, other in AXES.items():
        mine = [d for d in deltas if d["axis"] == axis]
        for d in mine:
            head = f"{axis} swap {d['swap']}"
            elsewhere = any(e["moves"] for e in mine if e["swap"] == d["swap"] and e["at"] != d["at"])
            if d["moves"]:
                text = f"{head} at {other} {d['at']} {d['moves']} accuracy ({_pts(d)})"
            elif elsewhere:
                text = f"{head} within CI at {other} {d['at']} ({_pts(d)}): saturated by {other}"
            else:
                text = (f"{head} within CI at {other} {d['at']} ({_pts(d)}), as at every {other}: no {axis} effect "
                        f"resolved at this n")
            lines.append({"axis": axis, "swap": d["swap"], "at": d["at"], "moves": d["moves"], "sentence": text})
    for d in (d for d in deltas if d["axis"] == "both"):
        state = f"{d['moves']} accuracy" if d["moves"] else "within CI"
        lines.append({"axis": "both", "swap": d["swap"], "at": None, "moves": d["moves"],
                      "sentence": f"swapping both, {d['swap']}: {state} ({_pts(d)})"})
    level = {axis: _level([line for line in lines if line["axis"] == axis]) for axis in AXES}
    return {"rule": RULE, "lines": lines, **level, "verdict": _verdict(level, lines)}


def _verdict(level: dict[str, str], lines: list[dict[str, Any]]) -> str:
    pl, pe = level["planner"], level["perception"]
    if pe == "every" and pl == "none":
        return ("perception-bound: upgrading perception moves accuracy at every planner, while planner swaps stay "
                "within CI at every perception (the planner is saturated by perception)")
    if pl == "every" and pe == "none":
        return ("planner-bound: upgrading the planner moves accuracy at every perception, while perception swaps "
                "stay within CI at every planner (perception is saturated by the planner)")
    if pl == "every" and pe == "every":
        return "neither saturates: planner and perception swaps each move accuracy at every level of the other"
    if pl == "none" and pe == "none":
        return "unresolved: no swap moves accuracy beyond its 95% CI at this n (more tasks or samples needed)"
    parts = []
    for axis, other in AXES.items():
        mine = [line for line in lines if line["axis"] == axis]
        if level[axis] == "every":
            parts.append(f"{axis} swaps move accuracy at every {other}")
        elif level[axis] == "none":
            parts.append(f"{axis} swaps stay within CI at every {other}")
        else:
            moved = sorted({str(line["at"]) for line in mine if line["moves"]})
            held = sorted({str(line["at"]) for line in mine if not line["moves"]})
            parts.append(f"{axis} swaps move accuracy at {other} {', '.join(moved)} but stay within CI at "
                         f"{', '.join(held)} (saturated by {other} there)")
    return "interaction: " + "; ".join(parts)


def cell_row(planner: str, perception: str, report: dict[str, Any]) -> dict[str, Any]:
    """One cell of grid.json: its report's accuracy with the clustered CI, counts and outcomes."""
    keys = ("n", "n_tasks", "samples_per_task", "accuracy", "ci95", "ci_method", "outcomes", "folder")
    return {"planner": planner, "perception": perception, "name": label(planner, perception),
            **{k: report.get(k) for k in keys}}


def grid_document(title: str, planners: list[str], perceptions: list[str],
                  reports: dict[tuple[str, str], dict[str, Any]],
                  per_task: dict[tuple[str, str], dict[str, float]], **meta: Any) -> dict[str, Any]:
    """grid.json's content: the cells (from each cell's report.json), the swaps and the saturation reading."""
    cells = [cell_row(p, q, reports[(p, q)]) for p in planners for q in perceptions]
    deltas = swap_deltas(planners, perceptions, per_task)
    return {"title": title, **meta, "planners": planners, "perceptions": perceptions, "cells": cells,
            "swaps": deltas, "reading": saturation_reading(deltas)}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def render_grid(doc: dict[str, Any]) -> str:
    """grid.md: the accuracy matrix, the swaps table and the saturation reading."""
    planners, perceptions = doc["planners"], doc["perceptions"]
    cells = {(c["planner"], c["perception"]): c for c in doc["cells"]}
    lines = [f"# {doc['title']}", "",
             "Accuracy per cell, 95% CI clustered by task (rows: planner, columns: perception; the first of each "
             "is the reference, the others its swaps):", "",
             "| planner \\ perception | " + " | ".join(perceptions) + " |", "|---" * (len(perceptions) + 1) + "|"]
    for p in planners:
        row = []
        for q in perceptions:
            c = cells[(p, q)]
            lo, hi = c["ci95"]
            row.append(f"{_pct(c['accuracy'])} [{_pct(lo)}, {_pct(hi)}] (n={c['n']})")
        lines.append(f"| {p} | " + " | ".join(row) + " |")
    lines += ["", "Swaps, paired on the same tasks (Δ = to − from; unit: the task; paired bootstrap 95% CI; "
              "'from only' / 'to only': tasks where that cell did better):", "",
              "| swap | at | from | to | n | from only | to only | Δ | 95% CI | p | reading |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in doc["swaps"]:
        lo, hi = d["ci95"]
        lines.append(f"| {d['axis']} {d['swap']} | {d['at'] or '–'} | {d['a']} | {d['b']} | {d['n']} | "
                     f"{d['a_only']} | {d['b_only']} | {100 * d['delta']:+.1f} pts | "
                     f"[{100 * lo:+.1f}, {100 * hi:+.1f}] | {d['p_value']:.3g} | {d['moves'] or 'within CI'} |")
    reading = doc["reading"]
    lines += ["", "## Saturation reading", "", *(f"- {line['sentence']}" for line in reading["lines"]), "",
              f"**Verdict:** {reading['verdict']}", "", f"Rule: {reading['rule']}"]
    return "\n".join(lines) + "\n"


def write_grid(doc: dict[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """OUT/grid.json and OUT/grid.md; returns the document."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "grid.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "grid.md").write_text(render_grid(doc), encoding="utf-8")
    return doc
