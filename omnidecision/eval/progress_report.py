"""The progress audit's files: reading the runs (an eval folder or a JSONL file), progress.json and progress.md.

The audit itself is `eval.progress`; the command is

    omnidecision audit progress runs/eval/grpo --scorer string --out runs/eval/grpo/progress
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omnidecision.protocol.records import RunRecord
from omnidecision.protocol.redaction import redact_text
from omnidecision.rollout.store import load_records, read_records


def load_runs(source: str | Path) -> list[RunRecord]:
    """RunRecords of an eval/collect folder (its trajectories*.jsonl, first record per task and sample) or of one
    JSONL file. A missing path or a malformed line raises ValueError naming the file (and line)."""
    path = Path(source)
    if path.is_dir():
        if not any(path.glob("trajectories*.jsonl")):
            raise ValueError(f"{path}: no trajectories*.jsonl in this folder")
        return load_records(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file or folder")
    return [r for _, r in read_records(path)]


def recipe_tasks(run_dir: str | Path) -> tuple[str, str] | None:
    """(tasks path, format) from an eval folder's recipe.yaml, or None."""
    import yaml

    recipe = Path(run_dir) / "recipe.yaml"
    if not recipe.is_file():
        return None
    tasks = (yaml.safe_load(recipe.read_text("utf-8")) or {}).get("tasks") or {}
    return (str(tasks["path"]), str(tasks.get("format") or "auto")) if tasks.get("path") else None


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


EVIDENCE = {"ledger": "ledger evidence (evidence atoms, filled needs, verified slots)",
            "all": "ledger evidence and tool observations"}


def render_markdown(res: dict[str, Any], title: str = "Progress audit") -> str:
    """progress.md: the counts and weighted progress, the sensitivity table, one row per audited run."""
    runs, c, sens = res["runs"], res["counts"], res["sensitivity"]
    scorer = res["scorer"] + (f" (`{res['model']}`)" if res.get("model") else "")
    lines = [
        f"# {title}", "",
        f"Failed runs scored by the **{scorer}** scorer over their {EVIDENCE.get(res['evidence'], res['evidence'])}: "
        f"**{c['full']} full, {c['partial']} partial, {c['zero']} zero progress** of {res['n_scored']} scored; "
        f"weighted progress **{_pct(res['weighted_progress'])}** (full 1, partial 0.5, zero 0); mean share of "
        f"subgoals reached {_pct(res['mean_subgoal_fraction'])}.", "",
        f"Runs: {runs['total']} in all; {runs['correct']} correct (not audited); {runs['failed']} failed; "
        f"{runs['no_subgoals']} on tasks without annotated subgoals (no subgoals: excluded); "
        f"{runs['not_judged']} not judged (excluded); {runs['unknown_task']} whose task is not in the task file "
        f"(excluded); {res['scorer_errors']} scorer errors (excluded, listed below); "
        f"{res['nothing_to_check']} with no checkable subgoal.", "",
        "## Sensitivity", "",
        "How much the number depends on the choices: the partial weight, the scorer, the evidence read.", "",
        "| scorer | evidence | partial weight | full / partial / zero | weighted progress |", "|---|---|---|---|---|",
        *(f"| {r['scorer']} | {r['evidence']} | {r['partial_weight']} | {r['counts']['full']} / "
          f"{r['counts']['partial']} / {r['counts']['zero']} | {_pct(r['weighted_progress'])} |"
          for r in sens["rows"]),
    ]
    if second := sens.get("second_scorer"):
        agree = second["agreement"]
        lines += ["", f"The {second['scorer']} scorer put {_pct(agree['same_class'])} of the "
                      f"{agree['runs_both_scored']} runs both scored in the same class as the {res['scorer']} scorer "
                      f"({', '.join(f'{k} {v}' for k, v in agree['confusion'].items()) or 'none'}; "
                      f"{res['scorer']}/{second['scorer']}); {second['scorer_errors']} errors of its own."]
    lines += ["", "## Runs", "", "| task | sample | outcome | reached | progress | note |",
              "|---|---|---|---|---|---|"]
    for r in res["per_run"]:
        note = (r["error"] or "").replace("|", "\\|")[:160]
        if r.get("second"):
            note = (note + "; " if note else "") + f"{r['second']['scorer']}: {r['second']['k']}/{r['second']['n']}"
        lines.append(f"| {r['task_id']} | {r['sample']} | {r['outcome']} | {r['k']}/{r['n']} | "
                     f"{r['progress'] or ('error' if r['error'] else '–')} | {note} |")
    return "\n".join(lines) + "\n"


def write_audit(out_dir: str | Path, res: dict[str, Any], title: str = "Progress audit") -> None:
    """progress.json and progress.md under `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(res, indent=2, ensure_ascii=False)
    (out / "progress.json").write_text(redact_text(text) + "\n", encoding="utf-8")  # protocol/redaction.py
    (out / "progress.md").write_text(redact_text(render_markdown(res, title)), encoding="utf-8")
