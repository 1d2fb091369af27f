"""SFT sized to its data: an epoch budget with early stopping on the dev loss stops when the dev split stops
improving and keeps the best checkpoint; what was asked, what ran and why it stopped are recorded in the run folder
(checkpoint_selection.json, sft_run.json) and the provenance card.

    .venv/bin/pytest tests/sft/test_sized.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import sft_args

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.long  # about a minute on 2 cores: a checkpoint saved every epoch (make long-test)
def test_an_epoch_budget_stops_early_and_records_why(tmp_path, tiny_model, sft_data):
    from omnidecision.sft.train import main

    out = tmp_path / "out"
    epochs = 30
    run = main(*sft_args(tiny_model, sft_data, out, "--max_steps", "-1", "--num_train_epochs", str(epochs),
                         "--max_train_samples", "16", "--max_eval_samples", "16", "--eval_strategy", "epoch",
                         "--save_strategy", "epoch", "--save_total_limit", "2", "--load_best_model_at_end", "true",
                         "--metric_for_best_model", "eval_loss", "--early_stopping_patience", "2",
                         "--learning_rate", "3e-2"))
    sizing = json.loads((out / "checkpoint_selection.json").read_text())["sizing"]
    planned = epochs * 16 // 4  # 16 rows, batch 4: 4 steps an epoch
    assert sizing["budget"] == f"{epochs} epochs" and sizing["train_rows"] == 16
    assert sizing["planned_steps"] == planned
    assert run["global_step"] == sizing["steps"] < planned, sizing  # the dev loss stopped improving first
    assert sizing["stopped"] == "early stopping: no better eval_loss in 2 dev evaluation(s)", sizing
    # the kept weights are the best dev loss's: two evaluations (epochs) before the last
    evals = [h for h in json.loads((out / "log_history.json").read_text()) if "eval_loss" in h]
    best = min(evals[:-1], key=lambda h: h["eval_loss"])  # the last entry is the evaluation of the kept weights
    assert sizing["best_metric"] == pytest.approx(best["eval_loss"])
    assert evals[-1]["eval_loss"] == pytest.approx(best["eval_loss"], rel=1e-4)
    assert best["step"] == sizing["steps"] - 2 * 4
    # the same record in the run card and the provenance card
    assert json.loads((out / "sft_run.json").read_text())["checkpoint_selection"]["sizing"] == sizing
    assert json.loads((out / "provenance.json").read_text())["data"]["sizing"] == sizing


def test_a_fixed_budget_says_it_spent_it(tmp_path, tiny_model, sft_data):
    from omnidecision.sft.train import main

    out = tmp_path / "out"
    main(*sft_args(tiny_model, sft_data, out, "--max_steps", "3", "--max_train_samples", "8"))
    sizing = json.loads((out / "checkpoint_selection.json").read_text())["sizing"]
    assert (sizing["budget"], sizing["steps"], sizing["stopped"]) == ("3 steps", 3, "budget spent")


def test_early_stopping_needs_the_best_checkpoint_kept(tiny_model, sft_data, tmp_path):
    with pytest.raises(ValueError, match="early_stopping_patience=2 needs load_best_model_at_end"):
        sft_args(tiny_model, sft_data, tmp_path, "--early_stopping_patience", "2")
    with pytest.raises(ValueError, match="early_stopping_patience must be >= 0"):
        sft_args(tiny_model, sft_data, tmp_path, "--early_stopping_patience", "-1", "--eval_strategy", "steps",
                 "--load_best_model_at_end", "true", "--save_strategy", "steps")


def test_patience_0_turns_a_recipes_early_stopping_off():
    """A cluster recipe stops early (configs/sft/qwen3-8b-lora.yaml: patience 5); `--early_stopping_patience 0` runs
    its whole budget, and then needs no kept best checkpoint."""
    from omnidecision.sft.config import parse_args  # imports trl: here, so a machine without it skips (conftest)

    recipe = ROOT / "configs" / "sft" / "qwen3-8b-lora.yaml"
    cpu = ["--bf16", "false", "--use_cpu", "true"]  # the GPU recipe, parsed on a CPU machine
    script, training, _ = parse_args(["--config", str(recipe), *cpu])
    assert script.early_stopping_patience == 5 and training.load_best_model_at_end
    script, training, _ = parse_args(["--config", str(recipe), *cpu, "--early_stopping_patience", "0",
                                      "--load_best_model_at_end", "false"])
    assert script.early_stopping_patience is None and not training.load_best_model_at_end
