"""Loading harvested SFT folders (JSONL, parquet, save_to_disk) and the errors on bad rows.

    .venv/bin/pytest tests/sft/test_data.py -q
"""

from __future__ import annotations

import json
import os

import pytest

from omnidecision.sft.data import data_stats, load_sft_splits, prepare
from omnidecision.synthetic.states import sft_rows

datasets = pytest.importorskip("datasets")


def _dataset_dict():
    return datasets.DatasetDict({"train": datasets.Dataset.from_list(sft_rows(12, 1)),
                                 "validation": datasets.Dataset.from_list(sft_rows(4, 2))})


def test_parquet_and_save_to_disk_folders(tmp_path):
    dd = _dataset_dict()
    pq = tmp_path / "pq"
    pq.mkdir()
    for split, d in dd.items():
        d.to_parquet(str(pq / f"{split}.parquet"))
    disk = tmp_path / "disk"
    dd.save_to_disk(str(disk))
    for folder in (pq, disk):
        splits = load_sft_splits(folder)
        assert {k: len(v) for k, v in splits.items()} == {"train": 12, "validation": 4}
        assert splits["train"][0]["messages"][-1]["role"] == "assistant"


def test_prepare_keeps_messages_only_and_sets_thinking(tmp_path):
    d = datasets.Dataset.from_list(sft_rows(10, 3))
    out = prepare(d, where="x", limit=4, enable_thinking=False, seed=0, shuffle=True)
    assert len(out) == 4 and set(out.column_names) == {"messages", "chat_template_kwargs"}
    assert out[0]["chat_template_kwargs"] == {"enable_thinking": False}
    stats = data_stats({"train": out})
    assert stats["train"]["rows"] == 4 and sum(stats["train"]["actions"].values()) == 4


def test_bad_folders_and_rows_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_sft_splits(tmp_path / "missing")
    nomsg = tmp_path / "nomsg"
    nomsg.mkdir()
    (nomsg / "train.jsonl").write_text(json.dumps({"prompt": "x"}) + "\n")
    with pytest.raises(ValueError, match="no `messages` column"):
        load_sft_splits(nomsg)
    rows = sft_rows(3, 4)
    rows[2]["messages"] = rows[2]["messages"][:2]  # no assistant turn
    with pytest.raises(ValueError, match="row 2: the last message must be the assistant"):
        prepare(datasets.Dataset.from_list(rows), where="f:train", limit=None, enable_thinking=None, seed=0,
                shuffle=False)


def test_wandb_without_key_goes_offline(monkeypatch, tmp_path):
    from omnidecision.preflight import wandb_offline_fallback

    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))  # no `wandb login` on this machine either
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert wandb_offline_fallback(["wandb"]) is True
    assert os.environ["WANDB_MODE"] == "offline"
    monkeypatch.setenv("WANDB_MODE", "online")
    assert wandb_offline_fallback(["wandb"]) is False
    assert os.environ["WANDB_MODE"] == "online"
