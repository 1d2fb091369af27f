"""What `omnidecision tiny-planner` refuses, found by one function its dry run can ask
(`synthetic.tiny.tiny_planner_problems`): a head size from hidden/heads that vLLM's CPU attention does not serve
(`head_dim_problem`, which `build_tiny_planner` raises) and a --data folder with no SFT row (`harvest_texts`, which
the run reads). The run refuses in these words before writing anything (exit 2, one `error: FIELD: ...` line each),
and its dry run reports the same lines.

    .venv/bin/pytest -q -p no:cacheprovider tests/synthetic/test_tiny_refusals.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.synthetic.tiny import build_tiny_planner, harvest_texts, tiny_planner_problems

pytest.importorskip("transformers")


@pytest.fixture
def no_rows(tmp_path: Path) -> Path:
    folder = tmp_path / "harvest"
    (folder / "sft").mkdir(parents=True)
    (folder / "sft" / "train.jsonl").write_text("\n", "utf-8")  # a file, no row
    return folder


def test_a_head_size_vllm_cannot_serve_is_found_and_refused_in_the_same_words(tmp_path: Path) -> None:
    problems = tiny_planner_problems(None, hidden=160, heads=4)  # 160/4 = 40: not a CPU attention head size
    assert set(problems) == {"head_dim"} and problems["head_dim"].startswith("head_dim=40 (hidden/heads)")
    with pytest.raises(ValueError) as err:
        build_tiny_planner(tmp_path / "m", ["abc"], hidden=160, heads=4)
    assert str(err.value) == problems["head_dim"]
    run = CliRunner().invoke(app, ["tiny-planner", "--out", str(tmp_path / "cli"), "--hidden", "160", "--heads", "4"])
    assert run.exit_code == 2 and f"error: head_dim: {problems['head_dim']}" in run.stderr
    assert not (tmp_path / "cli").exists()
    assert tiny_planner_problems(None, hidden=64, heads=2) == {}  # 32: served
    assert tiny_planner_problems(None, hidden=64, heads=0) == {"head_dim": "heads=0: a model needs at least one "
                                                                           "attention head"}


def test_a_data_folder_without_rows_is_found_and_refused_in_the_same_words(tmp_path: Path, no_rows: Path) -> None:
    problems = tiny_planner_problems(no_rows, hidden=64, heads=2)
    assert set(problems) == {"data"} and problems["data"].startswith(f"no SFT rows under {no_rows}")
    with pytest.raises(ValueError) as err:
        list(harvest_texts(no_rows))
    assert str(err.value) == problems["data"]
    run = CliRunner().invoke(app, ["tiny-planner", "--out", str(tmp_path / "cli"), "--data", str(no_rows)])
    assert run.exit_code == 2 and f"error: data: {problems['data']}" in run.stderr
    assert not (tmp_path / "cli").exists()
    (no_rows / "sft" / "train.jsonl").write_text('{"messages": [{"role": "user", "content": "x"}]}\n', "utf-8")
    assert tiny_planner_problems(no_rows, hidden=64, heads=2) == {}


@pytest.mark.parametrize("args", [["--hidden", "160", "--heads", "4"], ["--data", "NO_ROWS"]])
def test_the_dry_run_refuses_what_the_run_refuses(tmp_path: Path, no_rows: Path, args: list[str]) -> None:
    args = [str(no_rows) if a == "NO_ROWS" else a for a in args]
    dry = CliRunner().invoke(app, ["tiny-planner", "--out", str(tmp_path / "cli"), *args, "--dry-run"])
    run = CliRunner().invoke(app, ["tiny-planner", "--out", str(tmp_path / "cli"), *args])
    assert dry.exit_code == 2 and run.exit_code == 2
    said = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert said and all(" ".join(line.split()) in " ".join(dry.stderr.split()) for line in said), (said, dry.stderr)
    assert not (tmp_path / "cli").exists()
