"""A dry run that passes means the run reads its inputs (DESIGN.md invariant 10; issue 65): a local-looking model or
dataset path that does not exist is an error in both, never "treated as the hub id"; a hub id is accepted from the
HF cache (offline) or the hub; SFT, GRPO, judge and rft-select data are checked on every row the run reads, each
problem named as file:line: field, by the dry run and the real run in the same one line.

    pytest -q tests/cluster/test_dry_run_inputs.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnidecision.inputs import resolve, split_problem
from omnidecision.preflight import check_model, is_hub_id
from tests.cluster.test_dry_run_refusals import CFG, _jsonl, _rl_rows_without
from tests.refusals import same_refusal

pytestmark = pytest.mark.requires("trl")


@pytest.fixture(scope="module")
def planner(tmp_path_factory) -> Path:
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    return build_tiny_planner(tmp_path_factory.mktemp("models") / "tiny", texts=list(default_corpus(n=30)),
                              hidden=32, layers=1, heads=2, vocab_size=512)


@pytest.fixture
def sft_data(tmp_path) -> Path:
    from omnidecision.synthetic.states import write_sft_dataset

    return write_sft_dataset(tmp_path / "sft", n_train=6, n_validation=2, seed=0)


def _sft(planner: Path | str, data: Path | str, out: Path) -> list[str]:
    return ["sft", "--config", str(CFG / "sft/tiny-cpu.yaml"), "--model_name_or_path", str(planner),
            "--dataset_name", str(data), "--output_dir", str(out)]


# ---------------------------------------------------------------- local-looking names


@pytest.mark.parametrize("name", ["runs/sft", "data/sft", "./x", "runs/export/qwen3-8b", "~/no/such/model"])
def test_a_missing_local_path_is_never_a_hub_id(name, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # `runs/` need not exist here: it is where the project writes
    monkeypatch.setattr("omnidecision.inputs.on_hub", lambda *a, **k: pytest.fail("a path was looked up on the hub"))
    assert not is_hub_id(name)
    check = check_model(name, "model_name_or_path")
    assert check.status == "error" and "no such folder" in check.detail and "not a hub id" in check.detail


def test_a_folder_here_makes_its_children_local(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodels").mkdir()
    assert not is_hub_id("mymodels/sft") and resolve("mymodels/sft").kind == "missing"


def test_a_hub_id_is_found_in_the_cache_offline_or_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve("Qwen/Qwen3-8B").kind == "missing"  # offline, not cached: the run cannot load it either
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen3-8B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    assert resolve("Qwen/Qwen3-8B").kind == "cached"
    assert check_model("Qwen/Qwen3-8B", "model_name_or_path").status == "ok"


def test_a_hub_id_the_hub_denies_is_an_error_and_an_unreachable_hub_says_not_checked(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("omnidecision.inputs.on_hub", lambda *a, **k: False)
    assert check_model("someorg/no-such-model", "m").status == "error"
    monkeypatch.setattr("omnidecision.inputs.on_hub", lambda *a, **k: None)
    check = check_model("someorg/some-model", "m")
    assert check.status == "warning" and "not checked" in check.detail


def test_sft_refuses_a_missing_local_model_in_the_dry_run_and_the_run(sft_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = same_refusal(_sft("runs/sft", sft_data, tmp_path / "out"), names="runs/sft: no such folder")
    assert line.startswith("error: model_name_or_path: ") and not (tmp_path / "out").exists()


def test_grpo_refuses_a_missing_local_model(planner, tmp_path, monkeypatch):
    from omnidecision.rl.data import rl_rows

    monkeypatch.chdir(tmp_path)
    data = _jsonl(tmp_path / "rl", rl_rows(6))
    same_refusal(["grpo", "--config", str(CFG / "grpo/tiny-cpu.yaml"), "--model_name_or_path", "runs/sft",
                   "--dataset_name", str(data), "--output_dir", str(tmp_path / "out")], names="runs/sft: no such")


@pytest.mark.parametrize("name", ["data/sft", "./x"])
def test_sft_refuses_a_missing_local_dataset(planner, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    line = same_refusal(_sft(planner, name, tmp_path / "out"), names=f"{name}: no such folder")
    assert line.startswith("error: dataset_name: ")


# ---------------------------------------------------------------- every row the run reads


def _rows(data: Path, split: str = "train") -> list[dict]:
    return [json.loads(line) for line in (data / f"{split}.jsonl").read_text().splitlines()]


def _write(data: Path, rows: list[dict] | str, split: str = "train") -> Path:
    text = rows if isinstance(rows, str) else "".join(json.dumps(r) + "\n" for r in rows)
    (data / f"{split}.jsonl").write_text(text, "utf-8")
    return data / f"{split}.jsonl"


def test_sft_refuses_an_empty_train_file(planner, sft_data, tmp_path):
    train = _write(sft_data, "")
    line = same_refusal(_sft(planner, sft_data, tmp_path / "out"), names=f"{train}: no rows")
    assert line.startswith("error: dataset_name: ")


def test_sft_refuses_messages_on_the_first_line_only(planner, sft_data, tmp_path):
    rows = _rows(sft_data)
    rows[2] = {k: v for k, v in rows[2].items() if k != "messages"}
    train = _write(sft_data, rows)
    same_refusal(_sft(planner, sft_data, tmp_path / "out"), names=f"{train}:3: messages: missing")


def test_sft_refuses_messages_that_are_not_a_list(planner, sft_data, tmp_path):
    rows = _rows(sft_data)
    rows[1]["messages"] = "hello"
    train = _write(sft_data, rows)
    same_refusal(_sft(planner, sft_data, tmp_path / "out"), names=f"{train}:2: messages: must be a list")


def test_sft_checks_the_eval_split_too(planner, sft_data, tmp_path):
    rows = _rows(sft_data, "validation")
    rows[-1]["messages"] = rows[-1]["messages"][:-1]  # no assistant turn
    validation = _write(sft_data, rows, "validation")
    same_refusal([*_sft(planner, sft_data, tmp_path / "out"), "--eval_strategy", "steps", "--eval_steps", "1"],
                  names=f"{validation}:{len(rows)}: messages: the last message must be the assistant action")


def test_a_binary_file_is_named_with_its_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_bytes("{\"messages\": []}\n".encode("utf-16"))
    assert split_problem([str(path)], lambda row: None) == f"{path}:1: not UTF-8 text (a binary or UTF-16 file?)"


def test_grpo_refuses_a_state_without_its_ledger_past_the_first_line(planner, tmp_path):
    from omnidecision.rl.data import rl_rows

    rows = rl_rows(6)
    rows[4] = {k: v for k, v in rows[4].items() if k != "ledger"}
    data = _jsonl(tmp_path / "rl", rows)
    same_refusal(["grpo", "--config", str(CFG / "grpo/tiny-cpu.yaml"), "--model_name_or_path", str(planner),
                   "--dataset_name", str(data), "--output_dir", str(tmp_path / "out")],
                  names=f"{data / 'train.jsonl'}:5: ledger: missing")


def test_judge_train_refuses_rows_without_correct(planner, tmp_path):
    from omnidecision.rl.data import rl_rows

    rows = [{**r, "decision": r.get("decision") or '{"action": "stop"}', "advanced": i % 2 == 0}
            for i, r in enumerate(rl_rows(8))]
    rows = [{k: v for k, v in r.items() if k != "correct"} for r in rows]
    data = _jsonl(tmp_path / "rl", rows, splits=("train",))
    line = same_refusal(["judge", "train", "--config", str(CFG / "judge/tiny-cpu.yaml"), "--model_name_or_path",
                          str(planner), "--dataset_name", str(data), "--output_dir", str(tmp_path / "out")],
                         names="0 positive")
    assert "no row has a `correct` value" in line and not (tmp_path / "out").exists()


def test_rft_select_refuses_states_without_task_id(planner, tmp_path):
    rows = _rl_rows_without("task_id")
    data = _jsonl(tmp_path / "rl", rows)
    same_refusal(["rft-select", "--config", str(CFG / "grpo/tiny-cpu.yaml"), "--model_name_or_path", str(planner),
                   "--dataset_name", str(data), "--out", str(tmp_path / "rft")], names="task_id")
    assert not (tmp_path / "rft").exists() and not (tmp_path / "rft.tmp").exists()
