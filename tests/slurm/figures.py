"""The figures section of docs/cluster/local-cluster.md, rendered from docs/results/slurm-local.json (written by
`OD_SLURM_RESULTS=docs/results/slurm-local.json make slurm-test`); tests/docs/test_slurm_figures.py holds the page
to what the file renders.

    python -m tests.slurm.figures            # rewrite the page's section from the file
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "slurm-local.json"
PAGE = ROOT / "docs" / "cluster" / "local-cluster.md"
BEGIN, END = "<!-- figures: docs/results/slurm-local.json -->", "<!-- end figures -->"


def _ratio(r: dict) -> str:
    return f"{r['slurm_wall_s']:.0f} s vs {r['local_wall_s']:.0f} s ({r['slurm_wall_s'] / r['local_wall_s']:.1f}x)"


def _requeue_rows(stage: str, runs: dict) -> list[str]:
    """One row per requeue run of a training stage (with and without the SIGTERM checkpoint)."""
    rows = []
    for key, c in sorted(runs.items()):
        label = "with the SIGTERM checkpoint" if key == "save_on_sigterm" else "without the SIGTERM checkpoint"
        rows.append(f"| {stage} requeue {label}: {c['what']} | resumed from step {c['resumed_from_step']}, "
                    f"{c['steps_lost']} steps lost, final step {c['final_step']}, identical weights: "
                    f"{c['identical_weights']} | — |")
    return rows


def render(record: dict) -> str:
    """The Markdown table of one results file."""
    r = record["results"]
    rows = [f"Measured {record['date']} at {record['git_revision']} on {record['machine']['cpu']} "
            f"({record['machine']['cores']} cores), one run.", "",
            "| what | result | on SLURM vs without (wall time) |", "| --- | --- | --- |"]
    if c := r.get("collect_array"):
        rows.append(f"| collect, {c['what']} | {c['records']} records, equal to the local run's: {c['equal_records']}"
                    f" | {_ratio(c)} |")
    if c := r.get("collect_requeue"):
        rows.append(f"| collect, {c['what']} | {c['records']} records, {c['duplicated']} duplicated, {c['lost']} lost,"
                    f" {c['merge_jobs']} merge job | — |")
    if c := r.get("sft_two_nodes"):
        rows.append(f"| SFT, {c['what']} | equal losses: {c['equal_losses']}, identical weights: "
                    f"{c['identical_weights']} | {_ratio(c)} |")
    rows += _requeue_rows("SFT", r.get("sft_requeue", {}))
    if c := r.get("grpo_judge_node"):
        j = c["judge"]
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(j.get("failures", {}).items())) or "none"
        rows.append(f"| GRPO, {c['what']} | {j.get('requests', 0)} judge requests answered, {j.get('successes', 0)} "
                    f"parsed (failures: {reasons}; the judge is the tiny planner, not trained to judge) | — |")
    rows += _requeue_rows("GRPO", r.get("grpo_requeue", {}))
    if c := r.get("cpu_node_sigterm"):
        rows.append(f"| CPU node, {c['what']} (KillWait {c['kill_wait']}) | the trainer saved: under "
                    f"`omnidecision.node_launch` {c['node_launch_saved']}, under `accelerate launch` "
                    f"{c['accelerate_launch_saved']} | — |")
    return "\n".join(rows)


def section(text: str) -> str:
    """The page's rendered section (between the markers)."""
    m = re.search(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), text, flags=re.S)
    if m is None:
        raise ValueError(f"{PAGE}: no {BEGIN} ... {END} section")
    return m.group(1)


def write_page() -> None:
    text = PAGE.read_text("utf-8")
    body = render(json.loads(RESULTS.read_text("utf-8")))
    PAGE.write_text(text.replace(section(text), body), "utf-8")


if __name__ == "__main__":
    write_page()
