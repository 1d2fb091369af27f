"""scripts/analysis/family_table.py: per-family counts of eval folders and, where the planner's training run is found
through its provenance, that run's best dev loss (the figure docs/research/source-switch.md's seed table reads)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("family_table", ROOT / "scripts/analysis/family_table.py")
family_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(family_table)


def _eval_folder(tmp: Path, name: str, model: Path | None) -> Path:
    folder = tmp / name
    folder.mkdir()
    report = {"correct": 3, "n": 4, "by_category": {"source_switch": {"correct": 1, "n": 2},
                                                    "compute_slot": {"correct": 2, "n": 2}}}
    (folder / "report.json").write_text(json.dumps(report), "utf-8")
    planner = {"kind": "local", "model": str(model) if model else ""}
    (folder / "recipe.yaml").write_text(yaml.safe_dump({"backends": {"planner": planner}}), "utf-8")
    return folder


def test_counts_per_family_and_the_best_dev_loss_of_the_run_behind_the_planner(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    history = [{"step": 250, "eval_loss": 0.2}, {"step": 500, "loss": 0.01}, {"step": 500, "eval_loss": 0.0312},
               {"step": 750, "eval_loss": 0.05}]
    (run / "trainer_state.json").write_text(json.dumps({"log_history": history}), "utf-8")
    model = tmp_path / "model"
    model.mkdir()
    (model / "provenance.json").write_text(json.dumps({"stage": "sft", "output_dir": str(run)}), "utf-8")

    with_run = _eval_folder(tmp_path, "a", model)
    assert family_table.family_counts(with_run) == {"compute_slot": [2, 2], "source_switch": [1, 2], "all": [3, 4]}
    assert family_table.best_dev_loss(with_run) == 0.0312  # the minimum eval loss, not the last or a train loss

    # a planner without a recorded training run (a reference, or an exported folder moved away) has none
    assert family_table.best_dev_loss(_eval_folder(tmp_path, "b", None)) is None
    (model / "provenance.json").write_text(json.dumps({"stage": "sft", "output_dir": str(tmp_path / "gone")}), "utf-8")
    assert family_table.best_dev_loss(with_run) is None
