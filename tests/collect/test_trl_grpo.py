"""The harvest's RL rows and the project's reward work with TRL's OWN `grpo` script, unchanged:
`trl grpo --dataset_name DIR/rl --reward_funcs omnidecision.rewards.stock.closure_reward` (docs/guide/trl.md).

The reward is loaded by TRL's own loader (the dotted-path branch of `trl.scripts.grpo.main`, run as it is, its
trainer replaced by a recorder), then scores real harvested RL rows; then TRL's script trains one GRPO step with it
on the tiny planner, in this process (and, `slow`, through the `trl` command line in its own).

    pytest -q tests/collect/test_trl_grpo.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("trl")

DOTTED = "omnidecision.rewards.stock.closure_reward"


class _Loaded(Exception):
    """Raised by the recording trainer: TRL's script has built everything it hands to GRPOTrainer."""


def load_like_trl(reward_funcs: list[str], dataset: Path, monkeypatch) -> tuple[list, object]:
    """Run `trl.scripts.grpo.main` on these arguments up to the trainer; (its reward functions, its train split)."""
    import trl
    from trl.scripts.grpo import main, make_parser

    seen: dict = {}

    class Recorder:
        def __init__(self, *, reward_funcs, train_dataset, **kwargs):
            seen.update(reward_funcs=reward_funcs, train_dataset=train_dataset)
            raise _Loaded

    monkeypatch.setattr(trl, "GRPOTrainer", Recorder)  # main() imports it from trl when it runs
    args = make_parser().parse_args_and_config(
        args=["--model_name_or_path", "unused", "--dataset_name", str(dataset), "--output_dir", "unused",
              "--reward_funcs", *reward_funcs, "--use_cpu", "true", "--bf16", "false", "--report_to", "none"],
        fail_with_unknown_args=True)
    with pytest.raises(_Loaded):
        main(*args)
    return seen["reward_funcs"], seen["train_dataset"]


def test_trl_loads_the_reward_by_its_dotted_path_and_it_scores_harvested_rows(harvested: Path, monkeypatch):
    from omnidecision.ledger import Ledger
    from omnidecision.rewards.closure import ClosureRubric

    funcs, train = load_like_trl([DOTTED, "omnidecision.rewards.stock.format_reward"], harvested / "rl", monkeypatch)
    from omnidecision.rewards.stock import closure_reward, format_reward

    assert funcs == [closure_reward, format_reward]  # the module-level functions themselves, by TRL's import
    rows = [r for r in train if r["decision"]][:16]
    assert len(rows) == 16
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}  # what TRL hands a reward: every column
    recorded = [[{"role": "assistant", "content": r["decision"]}] for r in rows]  # TRL's conversational completions
    scores = closure_reward(recorded, **columns)
    assert scores == ClosureRubric()(recorded, **columns)  # the project's rubric, at its default weights
    assert all(0.0 <= s <= 1.0 for s in scores) and len(set(scores)) > 1, scores
    # the judge-correct teacher's decisions beat garbage and a finish on a state that can still advance
    garbage = closure_reward([[{"role": "assistant", "content": "not an action"}]] * len(rows), **columns)
    assert garbage == [0.0] * len(rows)
    open_state = next(i for i, r in enumerate(rows) if r["actionable"] and not r["finish_available"])
    one = {k: [v[open_state]] for k, v in columns.items()}
    call = json.dumps({"action": "call", "need": rows[open_state]["actionable"][0]})
    finish = json.dumps({"action": "finish"})
    assert closure_reward([call], **one)[0] > closure_reward([finish], **one)[0]
    assert format_reward([finish, "oops"], ledger=[Ledger(question="q").model_dump_json()] * 2) == [1.0, 0.0]


def test_a_judge_reward_without_a_judge_names_the_variables(monkeypatch):
    for name in ("OMNIDECISION_JUDGE_PATH", "OMNIDECISION_JUDGE_URL", "OMNIDECISION_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    from omnidecision.rewards import stock

    stock._judged.cache_clear()
    with pytest.raises(ValueError, match="OMNIDECISION_JUDGE_PATH"):
        stock.closure_judge_reward(['{"action": "finish"}'], ledger=["{}"])
    with pytest.raises(AttributeError, match="no_such_reward"):
        stock.no_such_reward  # noqa: B018


GRPO_ARGS = ["--reward_funcs", DOTTED, "--max_steps", "1", "--num_generations", "2", "--per_device_train_batch_size",
             "2", "--max_completion_length", "12", "--bf16", "false", "--use_cpu", "true", "--report_to", "none",
             "--save_strategy", "no", "--logging_steps", "1"]


def test_trls_grpo_script_trains_a_step_with_the_closure_reward(harvested: Path, tiny_planner: Path, tmp_path: Path,
                                                               monkeypatch, capfd):
    """`trl.scripts.grpo.main`, what `trl grpo` runs, in this process: one GRPO step on the harvest's RL rows."""
    from trl.scripts.grpo import main, make_parser

    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "grpo"
    args = make_parser().parse_args_and_config(
        args=["--model_name_or_path", str(tiny_planner), "--dataset_name", str(harvested / "rl"),
              "--output_dir", str(out), *GRPO_ARGS], fail_with_unknown_args=True)
    main(*args)
    log = "".join(capfd.readouterr())
    assert "rewards/closure_reward/mean" in log and "'train_loss'" in log, log[-3000:]  # the trainer's logged metrics
    assert (out / "config.json").is_file() and any(out.glob("*.safetensors"))


@pytest.mark.slow
def test_trl_grpo_cli_trains_a_step_with_the_closure_reward(harvested: Path, tiny_planner: Path, tmp_path: Path):
    """The same through TRL's command line, in its own process (slow: the process imports the whole stack)."""
    trl = shutil.which("trl") or str(Path(sys.executable).with_name("trl"))
    if not Path(trl).exists():
        pytest.skip("the trl command line is not installed")
    out = tmp_path / "grpo"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": "1"}
    cmd = [trl, "grpo", "--model_name_or_path", str(tiny_planner), "--dataset_name", str(harvested / "rl"),
           "--output_dir", str(out), *GRPO_ARGS]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "rewards/closure_reward/mean" in log and "'train_loss'" in log, log[-3000:]
    assert (out / "config.json").is_file() and any(out.glob("*.safetensors"))
