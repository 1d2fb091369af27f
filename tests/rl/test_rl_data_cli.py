"""RL state rows, loading harvested splits, and the `omnidecision grpo` command's argument errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnidecision.protocol.rows import RL_COLUMNS
from omnidecision.rl.data import load_rl_splits, rl_rows


def test_rows_carry_the_contract_columns():
    rows = rl_rows(5, seed=1)
    assert all(set(RL_COLUMNS) <= set(r) for r in rows)
    r = rows[0]
    assert r["prompt"][0]["role"] == "system" and r["prompt"][1]["content"].startswith("QUESTION:")
    assert isinstance(json.loads(r["tool_call_counts"]), dict) and isinstance(json.loads(r["failed_calls"]), list)
    assert rl_rows(5, seed=1) == rows  # seeded


def test_load_parquet_harvest_and_carve_missing_validation(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rl = tmp_path / "harvest" / "rl"
    rl.mkdir(parents=True)
    rows = rl_rows(20, seed=2)
    pq.write_table(pa.Table.from_pylist(rows), rl / "train-00000.parquet")
    with pytest.raises(KeyError, match="no `validation` split"):
        load_rl_splits(tmp_path / "harvest")
    splits = load_rl_splits(tmp_path / "harvest", carve=0.25, seed=0)
    assert len(splits["train"]) == 15 and len(splits["validation"]) == 5


def test_missing_columns_name_the_folder(tmp_path):
    d = tmp_path / "rl"
    d.mkdir()
    (d / "train.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
    (d / "validation.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(KeyError, match=r"missing RL columns \['prompt', 'ledger'\]"):
        load_rl_splits(tmp_path)


def test_cli_bad_override_is_a_clear_error():
    from typer.testing import CliRunner

    from omnidecision.cli import app

    recipe = Path(__file__).resolve().parents[2] / "configs" / "grpo" / "tiny-cpu.yaml"
    result = CliRunner().invoke(app, ["grpo", "--config", str(recipe), "--num_generations", "3"])
    assert result.exit_code == 2
    assert "multiple of" in result.output
