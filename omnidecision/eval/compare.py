"""Side-by-side comparison of eval runs (report.json files or eval folders) and the budget-matched ablation.

    omnidecision compare runs/eval-sft runs/eval-grpo --out runs/compare
    omnidecision ablate --config configs/eval/synthetic-tiny-vllm.yaml --max-tool-calls 6

The first run is the reference: each other run gets its accuracy difference and whether the two Wilson 95%
intervals overlap (overlapping intervals: the difference is not clearly significant), and the paired comparison on
the tasks both ran (`stats.paired_in_loop`) with the task as the unit (its mean accuracy over samples), the unit of
the reports' clustered CI.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omnidecision.eval.correctness import is_correct
from omnidecision.eval.plots import compare_plot
from omnidecision.eval.runner import run_eval
from omnidecision.eval.serve import maybe_serve
from omnidecision.rollout.recipe import read_text
from omnidecision.rollout.store import load_records
from omnidecision.stats import overlap, paired_in_loop, per_task

logger = logging.getLogger(__name__)

MODES: tuple[str, ...] = ("ledger", "react", "memory")


def load_report(path: str | Path) -> dict[str, Any]:
    """A report.json, or the report.json inside an eval folder; errors name the path."""
    p = Path(path)
    f = p / "report.json" if p.is_dir() else p
    try:
        rep = json.loads(read_text(f, "the report", ValueError))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{f}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    for key in ("accuracy", "ci95", "n", "outcomes"):
        if key not in rep:
            raise ValueError(f"{f}: not an eval report (no {key!r} field)")
    rep.setdefault("name", p.name if p.is_dir() else p.parent.name)
    rep["folder"] = str(f.parent)  # where its trajectories are: paired per-task statistics read them
    return rep


def task_correct(folder: str | Path) -> dict[str, float]:
    """task id → mean accuracy over its samples of an eval folder's runs (0.0 / 1.0 with one sample per task),
    judged as the report judges (`correctness.is_correct`: a failed judge is not correct, declining an unanswerable
    task is): the same unit as the report's clustered CI."""
    return per_task((r.task_id, is_correct(r)) for r in load_records(folder))


def paired_rows(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Paired in-loop comparison of every run with the first, on the tasks they share (exact McNemar, paired
    bootstrap CI of the accuracy difference); runs without shared tasks are left out."""
    if len(reports) < 2:
        return []
    ref = task_correct(reports[0]["folder"])
    out = []
    for rep in reports[1:]:
        other = task_correct(rep["folder"])
        if set(ref) & set(other):
            out.append(paired_in_loop(ref, other, (str(reports[0]["name"]), str(rep["name"]))))
    return out


def compare_rows(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per report: accuracy with CI, difference to the first, CI overlap, outcomes, closure, cost."""
    rows = []
    ref = reports[0] if reports else None
    for rep in reports:
        acc = rep["accuracy"]
        row = {
            "name": rep.get("name"),
            "mode": rep.get("mode"),
            "planner": (rep.get("planner") or {}).get("model"),
            "n": rep["n"],
            "accuracy": acc,
            "ci95": rep["ci95"],
            "delta_vs_first": None if acc is None or ref is None or ref["accuracy"] is None else acc - ref["accuracy"],
            "ci_overlaps_first": None if ref is None else overlap(tuple(rep["ci95"]), tuple(ref["ci95"])),
            "outcomes": rep["outcomes"],
            "need_closure_rate": (rep.get("need_closure_rate") or {}).get("all"),
            "prompt_tokens_per_step": (rep.get("prompt_tokens_per_step") or {}).get("mean"),
            "tool_calls_per_question": (rep.get("tool_calls_per_question") or {}).get("total"),
            "invalid_action_rate": rep.get("invalid_action_rate"),
            "cost_per_question": rep.get("cost_per_question"),
            "max_tool_calls": (rep.get("budgets") or {}).get("max_tool_calls"),
            "replay": rep.get("replay"),
            "environment": rep.get("environment"),
            "train_overlap": (rep.get("train_overlap") or {}).get("overlap") or 0,
        }
        rows.append(row)
    return rows


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _n(x: float | None, nd: int = 1) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def render_compare(rows: list[dict[str, Any]], title: str = "Comparison") -> str:
    outcome_names = list(rows[0]["outcomes"]) if rows else []
    head = ["run", "mode", "n", "accuracy", "95% CI", "Δ vs first", "CIs overlap", *outcome_names, "closure",
            "tokens/step", "tool calls/q", "invalid", "cap"]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        delta = "–" if r["delta_vs_first"] is None else f"{100 * r['delta_vs_first']:+.1f} pts"
        label = " (replay)" if r["replay"] else " (offline: no tools)" if r.get("environment") == "offline: no tools" \
            else ""
        label += f" (trained on {r['train_overlap']} of its tasks)" if r.get("train_overlap") else ""
        cells = [str(r["name"]) + label, str(r["mode"]), str(r["n"]),
                 _pct(r["accuracy"]), f"[{_pct(r['ci95'][0])}, {_pct(r['ci95'][1])}]", delta,
                 {True: "yes", False: "no", None: "–"}[r["ci_overlaps_first"]],
                 *(str(r["outcomes"].get(o, 0)) for o in outcome_names), _pct(r["need_closure_rate"]),
                 _n(r["prompt_tokens_per_step"]), _n(r["tool_calls_per_question"], 2), _pct(r["invalid_action_rate"]),
                 "–" if r["max_tool_calls"] is None else str(r["max_tool_calls"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Δ is in accuracy points against the first row; overlapping Wilson 95% intervals mean the "
              "difference is not clearly significant at this n."]
    return "\n".join(lines) + "\n"


def write_compare(reports: list[dict[str, Any]], out_dir: str | Path, title: str = "Comparison",
                  plot: bool = True) -> dict[str, Any]:
    """compare.json, compare.md (and compare.png) under `out_dir`; returns the JSON document."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = compare_rows(reports)
    paired = paired_rows(reports) if all(r.get("folder") for r in reports) else []
    doc = {"title": title, "runs": rows, "paired_in_loop": paired}
    (out / "compare.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    md = render_compare(rows, title)
    if paired:
        md += ("\n\nPaired on the same tasks (vs the first run; unit: the task, its mean accuracy over samples; "
               "'a only' / 'b only': tasks where that run did better):\n\n"
               "| a | b | n | a only | b only | Δ accuracy | 95% CI | p |\n")
        md += "|---|---|---|---|---|---|---|---|\n" + "".join(
            f"| {p['a']} | {p['b']} | {p['n']} | {p['a_only']} | {p['b_only']} | {p['delta']:+.3f} | "
            f"[{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] | {p['p_value']:.3g} |\n" for p in paired)
    (out / "compare.md").write_text(md, encoding="utf-8")
    if plot and rows:
        compare_plot(rows, out / "compare.png")
    return doc


def run_ablation(recipe, out_dir: str | Path, modes: tuple[str, ...] = MODES, max_tool_calls: int | None = None,
                 progress: bool = True) -> dict[str, Any]:
    """Run the same tasks in each mode with one equal tool-call cap (budget-matched) and compare them.

    The cap is `max_tool_calls`, else the recipe's `agent.max_tool_calls`, else its step budget. Each mode is a
    full, resumable eval under OUT/<mode>/."""
    cap = max_tool_calls if max_tool_calls is not None else recipe.agent.max_tool_calls
    cap = cap if cap is not None else recipe.agent.step_budget
    out = Path(out_dir)
    reports = []
    with maybe_serve(recipe) as specs:  # one server for every mode
        for mode in modes:
            agent = recipe.agent.model_copy(update={"mode": mode, "max_tool_calls": cap})
            sub = recipe.model_copy(update={"agent": agent, "out": str(out / mode), "name": mode})
            logger.info("ablation: mode %s, max_tool_calls %d", mode, cap)
            reports.append(run_eval(sub, progress=progress, specs=specs))
    return write_compare(reports, out, title=f"Budget-matched ablation (max_tool_calls = {cap})")
