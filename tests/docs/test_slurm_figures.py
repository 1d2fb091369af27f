"""The figures of docs/cluster/local-cluster.md are what docs/results/slurm-local.json renders
(tests/slurm/figures.py), and that file holds what the SLURM tests measured: no record doubled or lost, at most one
step lost per preemption with the SIGTERM checkpoint, the uninterrupted run's weights after every requeue.

    .venv/bin/pytest -q tests/docs/test_slurm_figures.py
"""

from __future__ import annotations

import json

from tests.slurm.figures import PAGE, RESULTS, render, section


def test_the_page_shows_what_the_results_file_renders():
    assert section(PAGE.read_text("utf-8")) == render(json.loads(RESULTS.read_text("utf-8"))), \
        "docs/cluster/local-cluster.md: run `python -m tests.slurm.figures`"


def test_the_results_file_holds_the_acceptance_figures():
    r = json.loads(RESULTS.read_text("utf-8"))["results"]
    assert r["collect_requeue"]["duplicated"] == 0 and r["collect_requeue"]["lost"] == 0
    assert r["collect_requeue"]["merge_jobs"] == 1
    assert r["sft_requeue"]["save_on_sigterm"]["steps_lost"] <= 1
    assert r["sft_requeue"]["no_sigterm_checkpoint"]["steps_lost"] >= 1
    assert all(v["identical_weights"] for v in r["sft_requeue"].values())
    assert r["sft_two_nodes"]["identical_weights"] and r["collect_array"]["equal_records"]
    assert r["grpo_requeue"]["save_on_sigterm"]["steps_lost"] <= 1
    assert all(v["identical_weights"] for v in r["grpo_requeue"].values())
