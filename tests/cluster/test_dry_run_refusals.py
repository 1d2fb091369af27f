"""A dry run refuses what the real run refuses, in the same words: for sft, grpo, judge train, rft-select and export,
an input the stage's own loader rejects is refused by `--dry-run` (exit 2) and by the real command (exit 2, before
anything loads or is written) with the same error line, because both call the stage's one checks function
(sft/dryrun.py, rl/dryrun.py, export.py:export_checks).

    pytest -q tests/cluster/test_dry_run_refusals.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from tests.refusals import cli_errors, same_refusal

pytestmark = pytest.mark.requires("trl")

ROOT = Path(__file__).resolve().parents[2]
CFG = ROOT / "configs"




@pytest.fixture(scope="module")
def planner(tmp_path_factory) -> Path:
    """A locally built tiny Qwen3 checkpoint (a real model folder: config, weights, tokenizer)."""
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    return build_tiny_planner(tmp_path_factory.mktemp("models") / "tiny", texts=list(default_corpus(n=30)),
                              hidden=32, layers=1, heads=2, vocab_size=512)


def _jsonl(folder: Path, rows: list[dict], splits: tuple[str, ...] = ("train", "validation")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split in splits:
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return folder


def _rl_rows_without(column: str) -> list[dict]:
    from omnidecision.rl.data import rl_rows

    return [{k: v for k, v in r.items() if k != column} for r in rl_rows(6)]


def test_sft_refuses_a_dataset_without_messages(planner, tmp_path):
    from omnidecision.sft.data import load_sft_splits

    data = _jsonl(tmp_path / "sft", [{"prompt": "p", "completion": "c"}] * 4)
    with pytest.raises(ValueError, match="no `messages` column"):  # the loader the run uses refuses it too
        load_sft_splits(data)
    line = same_refusal(["sft", "--config", str(CFG / "sft/tiny-cpu.yaml"), "--model_name_or_path", str(planner),
                          "--dataset_name", str(data), "--output_dir", str(tmp_path / "out")],
                         names="no `messages` column")
    assert line.startswith("error: dataset_name: ") and "'train'" in line
    assert not (tmp_path / "out").exists()


def test_the_module_accelerate_launches_refuses_in_the_same_line(planner, tmp_path):
    """`accelerate launch -m omnidecision.sft.train ...` runs the module's entry: the same line, exit 2, no
    traceback on every rank."""
    import os
    import subprocess
    import sys

    data = _jsonl(tmp_path / "sft", [{"prompt": "p", "completion": "c"}] * 4)
    args = ["--config", str(CFG / "sft/tiny-cpu.yaml"), "--model_name_or_path", str(planner), "--dataset_name",
            str(data), "--output_dir", str(tmp_path / "out")]
    _, dry = cli_errors(["sft", *args, "--dry-run"])
    proc = subprocess.run([sys.executable, "-m", "omnidecision.sft.train", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if line.startswith("error:")] == dry
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_grpo_refuses_states_without_the_ledger(planner, tmp_path):
    from omnidecision.rl.data import load_rl_splits

    data = _jsonl(tmp_path / "rl", _rl_rows_without("ledger"))
    with pytest.raises(KeyError, match="ledger"):
        load_rl_splits(data)
    same_refusal(["grpo", "--config", str(CFG / "grpo/tiny-cpu.yaml"), "--model_name_or_path", str(planner),
                   "--dataset_name", str(data), "--output_dir", str(tmp_path / "out")], names="no `ledger` column")
    assert not (tmp_path / "out").exists()


def test_judge_train_refuses_rows_without_labels(planner, tmp_path):
    from omnidecision.rl.judge_train import judge_pairs
    from omnidecision.synthetic.states import write_sft_dataset

    data = write_sft_dataset(tmp_path / "sft", n_train=6, n_validation=2)  # SFT rows: no decision, no `advanced`
    rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    with pytest.raises(ValueError, match="positive and negative"):  # what the run's pairing says of them
        judge_pairs(rows)
    same_refusal(["judge", "train", "--config", str(CFG / "judge/tiny-cpu.yaml"), "--model_name_or_path",
                   str(planner), "--dataset_name", str(data), "--output_dir", str(tmp_path / "out")],
                  names="no `prompt`, `decision`, `advanced` column")
    assert not (tmp_path / "out").exists()


def test_rft_select_refuses_states_without_prompts(planner, tmp_path):
    from omnidecision.rl.data import load_rl_splits

    data = _jsonl(tmp_path / "rl", _rl_rows_without("prompt"))
    with pytest.raises(KeyError, match="prompt"):
        load_rl_splits(data)
    same_refusal(["rft-select", "--config", str(CFG / "grpo/tiny-cpu.yaml"), "--model_name_or_path", str(planner),
                   "--dataset_name", str(data), "--out", str(tmp_path / "rft")], names="no `prompt` column")
    assert not (tmp_path / "rft").exists() and not (tmp_path / "rft.tmp").exists()
    # and a dry run that passes does not stop at these checks (the recipe, model and states are fine)
    good = _jsonl(tmp_path / "good", [r for r in _rl_rows_without("nothing")])
    res = CliRunner().invoke(app, ["rft-select", "--config", str(CFG / "grpo/tiny-cpu.yaml"), "--model_name_or_path",
                                   str(planner), "--dataset_name", str(good), "--out", str(tmp_path / "rft"),
                                   "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "rft-select" in json.loads(res.stdout)["would_run"][0]


@pytest.mark.parametrize("kind", ["not a checkpoint", "missing"])
def test_export_refuses_a_non_checkpoint_in_one_line(tmp_path, kind):
    src = tmp_path / "src"
    if kind == "not a checkpoint":
        src.mkdir()
        (src / "notes.txt").write_text("a folder, but no model in it")
    out = tmp_path / "export"
    res = CliRunner().invoke(app, ["export", str(src), "--out", str(out)])
    assert res.exit_code == 2
    assert res.stderr.strip().count("\n") == 0, res.stderr  # one line, no traceback
    expected = "no such folder" if kind == "missing" else "a folder without config.json or adapter_config.json"
    assert res.stderr.strip() == f"error: checkpoint: {src}{': ' if kind == 'missing' else ' is '}{expected}"
    assert not out.exists()
    same_refusal(["export", str(src), "--out", str(out)], names=str(src))
    assert not out.exists()


def test_export_refuses_a_full_checkpoint_without_a_tokenizer(planner, tmp_path):
    import shutil

    src = tmp_path / "weights-only"
    shutil.copytree(planner, src, ignore=shutil.ignore_patterns("tokenizer*", "special_tokens_map.json",
                                                                "chat_template.jinja", "vocab.json", "merges.txt"))
    same_refusal(["export", str(src), "--out", str(tmp_path / "out")], names="no tokenizer files")
    assert not (tmp_path / "out").exists()
