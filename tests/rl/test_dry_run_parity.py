"""Every dry run checks what its run checks: for grpo, grpo-agent, rft-select, `python -m omnidecision.rl.evaluate`
and judge train, an input the run used to refuse only after its model (or trainer) was built is planted; the dry
run reports it, and the real run refuses it with the same error line before it loads a model or writes its output
folder, because both call one checks function (rl/dryrun.py: grpo_checks, rft_checks, judge_checks;
rl/evaluate.py: evaluate_checks). The judge resumes where its dry run says it starts.

    .venv/bin/pytest -q -p no:cacheprovider tests/rl/test_dry_run_parity.py
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.preflight import PreflightError
from omnidecision.rl import evaluate
from omnidecision.rl.config import parse_args
from omnidecision.rl.data import rl_rows
from tests.refusals import cli_errors, same_refusal

pytestmark = pytest.mark.requires("trl")  # skips without it; fails under CI=true (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
CFG = ROOT / "configs"
GRPO = CFG / "grpo" / "tiny-cpu.yaml"
JUDGE = CFG / "judge" / "tiny-cpu.yaml"




def _grpo_args(command: str, model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return [command, "--config", str(GRPO), "--model_name_or_path", str(model), "--dataset_name", str(data),
            "--output_dir", str(out), *extra]


def _rl_folder(folder: Path, splits: dict[str, list[dict]]) -> Path:
    folder.mkdir(parents=True)
    for split, rows in splits.items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return folder


def _states(n: int, *, drop: str | None = None) -> list[dict]:
    return [{k: v for k, v in r.items() if k != drop} for r in rl_rows(n, seed=5)]


# ---------------------------------------------------------------- gap 1: dev_closure's dev states (grpo, grpo-agent)


@pytest.mark.parametrize("command", ["grpo", "grpo-agent"])
@pytest.mark.parametrize("plant", ["split", "ledger"])
def test_dev_closure_dev_states_are_checked_before_the_model(command, plant, tiny_planner, rl_dir, tmp_path):
    """The recipe's checkpoint_policy is dev_closure: a dev split that is not there, or dev states without a ledger,
    used to stop the run at `load_rl_splits` after the trainer was built."""
    out = tmp_path / "out"
    if plant == "split":
        extra, names = ["--checkpoint_dev_split", "dev"], "checkpoint_dev_split: "
    else:
        dev = _rl_folder(tmp_path / "dev", {"validation": _states(4, drop="ledger")})
        extra, names = ["--checkpoint_dev_data", str(dev)], "no `ledger` column"
    line = same_refusal(_grpo_args(command, tiny_planner, rl_dir, out, *extra), names=names)
    if plant == "split":
        assert "no `dev` split" in line and str(rl_dir) in line
    assert not out.exists()  # refused before prepare_run made the output folder: nothing loaded


# ---------------------------------------------------------------- gap 2: weight averaging under sharded parameters


@pytest.mark.parametrize(("config", "variable", "value", "sharded"), [
    ("zero3.yaml", "ACCELERATE_DEEPSPEED_ZERO_STAGE", "3", "ZeRO-3"),
    ("fsdp.yaml", "ACCELERATE_USE_FSDP", "true", "FSDP"),
])
def test_weight_average_under_sharding_is_refused_by_the_dry_run_as_by_the_run(
        config, variable, value, sharded, tiny_planner, rl_dir, tmp_path, monkeypatch):
    """`weight_average: true` with ZeRO-3 or FSDP: the dry run of the accelerate launch reports it, and the run
    under that launch (the variable `accelerate launch` exports for the config) refuses it in the same line in
    prepare_run, before anything loads (it used to be refused after the trainer was built)."""
    from omnidecision.rl.averaging import check_supported  # transformers: loaded only where trl is required
    from omnidecision.rl.train import main  # imports rl.averaging: transformers, as above

    out = tmp_path / "out"
    args = _grpo_args("grpo", tiny_planner, rl_dir, out, "--select_states", "all", "--checkpoint_policy", "final")
    code, dry = cli_errors([*args[:1], "--accelerate-config", str(CFG / "accelerate" / config), *args[1:],
                            "--dry-run"])
    assert code == 2 and len(dry) == 1, dry
    assert dry[0].startswith("error: weight_average: ") and sharded in dry[0], dry
    parsed = parse_args(args[1:])
    monkeypatch.setenv(variable, value)
    with pytest.raises(PreflightError) as refused:
        main(*parsed)
    assert f"error: {refused.value}" == dry[0]
    assert not out.exists()
    with pytest.raises(ValueError) as guard:  # averaging's own guard, for a caller that builds its own trainer
        check_supported(parsed[1])
    assert f"error: {guard.value}" == dry[0]


# ---------------------------------------------------------------- gap 3: reward_weights


@pytest.mark.parametrize("command", ["grpo", "rft-select"])
def test_a_reward_weight_per_reward_is_checked_before_anything_loads(command, tiny_planner, rl_dir, tmp_path):
    """Two weights for one reward: grpo used to refuse it after loading the states, rft-select after loading the
    planner and sampling every decision."""
    out = tmp_path / "out"
    args = _grpo_args(command, tiny_planner, rl_dir, out, "--reward_funcs", "closure", "--reward_weights", "1.0",
                      "0.25")
    if command == "rft-select":  # rft-select writes --out; its recipe's output_dir is not used
        args += ["--out", str(out), "--max_steps", "1", "--num_generations", "2", "--per_device_train_batch_size",
                 "2", "--generation_batch_size", "2"]
    line = same_refusal(args, names="reward_weights: 2 values for 1 reward_funcs ['closure']")
    assert line.startswith("error: reward_weights: ")
    assert not out.exists()


def test_an_environment_run_refuses_reward_weights_in_its_dry_runs_words(tiny_planner, tmp_path):
    """`environment: ledger` has one reward, the environment's: reward_weights set is refused by the dry run (which
    did not check it) and by the run, in one line."""
    tasks, out = tmp_path / "tasks", tmp_path / "out"
    tasks.mkdir()
    line = same_refusal(["grpo-agent", "--config", str(CFG / "grpo" / "tiny-cpu-env.yaml"), "--model_name_or_path",
                          str(tiny_planner), "--dataset_name", str(tasks), "--output_dir", str(out),
                          "--reward_weights", "1.0"],
                         names="the environment's get_reward is the only reward; unset reward_weights")
    assert line.startswith("error: reward_weights: environment: ledger")
    assert not out.exists()


# ---------------------------------------------------------------- gap 4: python -m omnidecision.rl.evaluate


def _evaluate_errors(capsys, argv: list[str]) -> tuple[int, list[str]]:
    code = evaluate.main(argv)
    return code, [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(("plant", "names"), [("ledger", "ledger: missing"), ("empty", "no rows")])
def test_evaluate_dry_run_checks_the_rows_the_evaluation_reads(plant, names, tiny_planner, tmp_path, capsys):
    """A validation split whose rows have no ledger, or no rows at all: the dry run said ok (the split exists), the
    run stopped in `load_rl_splits` or `heldout_closure_reward` after loading the model. Now both refuse it in one
    line, exit 2."""
    rows = [] if plant == "empty" else _states(3, drop="ledger")
    if plant == "ledger":  # the first row keeps its ledger: the file's columns look complete, the second row lacks it
        rows[0] = _states(1)[0]
    data = _rl_folder(tmp_path / "h" / "rl", {"train": _states(3), "validation": rows})
    argv = [str(tiny_planner), str(data.parent), "--device", "cpu"]
    dry_code, dry = _evaluate_errors(capsys, [*argv, "--dry-run"])
    real_code, real = _evaluate_errors(capsys, argv)
    assert dry_code == real_code == 2, (dry, real)
    assert dry == real and len(real) == 1 and real[0].startswith("error: dataset_name: "), real
    assert names in real[0], real


# ---------------------------------------------------------------- gap 5: judge train resumes as its dry run says


def _judge_rows(n: int) -> list[dict]:
    """RL rows with a decision and what followed it: every other one a positive (moved the ledger in a correct run),
    the others negatives (moved nothing)."""
    return [{**r, "decision": '{"action": "finish"}', "advanced": i % 2 == 0, "correct": True}
            for i, r in enumerate(_states(n))]


def _resume_check(args: list[str]) -> dict:
    res = CliRunner().invoke(app, [*args, "--dry-run"])
    report = json.loads(res.stdout[res.stdout.index("{"):])
    return next(c for c in report["checks"] if c["what"] == "resume_from_checkpoint")


def test_the_judge_resumes_where_its_dry_run_says(tiny_planner, tmp_path):
    """`judge train --resume_from_checkpoint true`: the dry run names the checkpoint, and the run continues from it
    (TRL's reward script passes the field to train(); the judge used to start from scratch whatever it said). A
    checkpoint that is not there is refused by both in one line, before the model loads."""
    data = _rl_folder(tmp_path / "rl", {"train": _judge_rows(16)})
    out = tmp_path / "judge"

    def judge(output_dir: Path) -> list[str]:
        return ["judge", "train", "--config", str(JUDGE), "--model_name_or_path", str(tiny_planner),
                "--dataset_name", str(data), "--output_dir", str(output_dir), "--per_device_train_batch_size", "4",
                "--logging_steps", "1", "--save_strategy", "steps", "--save_steps", "2"]

    base = judge(out)
    first = CliRunner().invoke(app, [*base, "--max_steps", "2"])
    assert first.exit_code == 0, first.output[-3000:]
    checkpoint = out / "checkpoint-2"
    assert json.loads((out / "judge_train.json").read_text())["resumed_from"] is None
    # a mark only the checkpoint's trainer state carries: the continued run's state holds it only if it read it
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    state["log_history"].append({"step": 2, "planted_in_checkpoint": 1})
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))

    resumed = [*base, "--max_steps", "4", "--resume_from_checkpoint", "true"]
    check = _resume_check(resumed)
    assert check["status"] == "ok" and check["detail"] == f"true: resumes from {checkpoint}"
    second = CliRunner().invoke(app, resumed)
    assert second.exit_code == 0, second.output[-3000:]
    assert json.loads((out / "judge_train.json").read_text())["resumed_from"] == str(checkpoint)
    final = json.loads((out / "trainer_state.json").read_text())
    assert final["global_step"] == 4
    assert {"step": 2, "planted_in_checkpoint": 1} in final["log_history"]

    # a named checkpoint that is not there: the same line from the dry run and the run, nothing written
    other = tmp_path / "judge2"
    missing = [*judge(other), "--max_steps", "2", "--resume_from_checkpoint", str(tmp_path / "nope")]
    line = same_refusal(missing, names="resume_from_checkpoint: ")
    assert "nope" in line and not other.exists()


def test_rft_select_reads_no_dev_states(tiny_planner, rl_dir, tmp_path):
    """rft-select shares the GRPO recipe but trains nothing: the recipe's dev_closure dev states (and resume) are
    not its checks, so a recipe whose dev split is missing still passes its dry run."""
    data = tmp_path / "harvest"
    shutil.copytree(rl_dir, data)
    code, errors = cli_errors(["rft-select", "--config", str(GRPO), "--model_name_or_path", str(tiny_planner),
                            "--dataset_name", str(data), "--checkpoint_dev_split", "dev", "--out",
                            str(tmp_path / "rft"), "--dry-run"])
    assert code == 0 and errors == [], errors
