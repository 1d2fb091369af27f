"""docs/guide/metrics.md: its curves are drawn from the result file it names, the figures it quotes are that file's,
and its `report_to` table is what the recipes say.

    pytest -q tests/docs/test_metrics_page.py
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guide" / "metrics.md"
RESULT = ROOT / "docs" / "results" / "training-curves.json"


def _text() -> str:
    return " ".join(PAGE.read_text("utf-8").split())


def _script():
    spec = importlib.util.spec_from_file_location("training_curves", ROOT / "scripts/analysis/training_curves.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_quoted_figures_are_the_files():
    data, text = json.loads(RESULT.read_text("utf-8")), _text()
    sft, grpo = data["runs"]["sft"], data["runs"]["grpo"]
    evals = [r for r in sft["log_history"] if "eval_loss" in r]
    assert f"loss of {sft['log_history'][0]['loss']:.2f} at step {sft['log_history'][0]['step']}" in text
    assert f"`eval_loss` of {evals[-1]['eval_loss']:.4f} at step {evals[-1]['step']}" in text
    assert f"dev token accuracy of {evals[-1]['eval_mean_token_accuracy']:.3f}" in text
    assert all(a["eval_loss"] > b["eval_loss"] for a, b in zip(evals, evals[1:-1], strict=False))  # "fell at every"
    assert sft["checkpoint_selection"]["chosen_step"] == 900 and "is the last, step 900" in text
    rewards = [r["reward"] for r in grpo["log_history"] if "reward" in r]
    assert f"between {min(rewards):.2f} and {max(rewards):.2f}" in text and len(rewards) == 30
    chosen = grpo["checkpoint_selection"]
    assert chosen["chosen_step"] == 0 and {c["dev_closure"] for c in chosen["candidates"]} == {0.95}
    closure = grpo["closure_eval"]
    assert closure["start"]["closure"]["mean"] == closure["trained"]["closure"]["mean"] == 0.95
    runtimes = [r["train_runtime"] for run in (sft, grpo) for r in run["log_history"] if "train_runtime" in r]
    assert f"SFT 900 steps ({runtimes[0]:.0f} s), GRPO 30 steps ({runtimes[1]:.0f} s)" in text


def test_the_plots_are_drawn_from_the_file(tmp_path):
    written = _script().plot(json.loads(RESULT.read_text("utf-8")), tmp_path)
    assert [p.name for p in written] == ["training-curves-sft.png", "training-curves-grpo.png"]
    for p in written:
        assert (ROOT / "docs" / "results" / p.name).is_file() and f"../results/{p.name}" in PAGE.read_text("utf-8")


def test_every_logged_grpo_key_is_named_on_the_page():
    data, page = json.loads(RESULT.read_text("utf-8")), PAGE.read_text("utf-8")
    keys = {k for run in ("sft", "grpo") for r in data["runs"][run]["log_history"] for k in r}
    keys -= {"step", "epoch", "total_flos", "train_samples_per_second", "train_steps_per_second"}
    named = set(re.findall(r"`([\w/<>]+)`", page))
    missing = [k for k in sorted(keys) if k not in named and not any(
        k.startswith(p.split("<")[0]) and "<" in p for p in named) and k.split("/")[-1] not in named]
    assert not missing, missing


def test_the_report_to_table_is_the_recipes():
    rows = re.findall(r"^\| (`configs/[^|]+) \| (\w+) \| (\d+) \|$", PAGE.read_text("utf-8"), re.M)
    assert len(rows) >= 10
    for recipes, report_to, steps in rows:
        for recipe in re.findall(r"`(configs/[^`]+)`", recipes):
            values = yaml.safe_load((ROOT / recipe).read_text("utf-8"))
            assert (values.get("report_to"), values.get("logging_steps")) == (report_to, int(steps)), recipe
    listed = {r for recipes, _, _ in rows for r in re.findall(r"`(configs/[^`]+)`", recipes)}
    shipped = {p.relative_to(ROOT).as_posix() for d in ("sft", "grpo", "judge")
               for p in (ROOT / "configs" / d).glob("*.yaml") if "report_to" in yaml.safe_load(p.read_text("utf-8"))}
    assert shipped - listed <= {"configs/grpo/tiny-cpu-judge-own.yaml", "configs/grpo/tiny-cpu-judge-shuffled.yaml"}, \
        shipped - listed
