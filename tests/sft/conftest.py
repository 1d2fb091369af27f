"""Shared fixtures of the SFT tests: one tiny planner and one small rule-labelled dataset per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnidecision.synthetic.states import write_sft_dataset

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # every SFT test needs trl: skipped without it, failed under CI=true (tests/conftest.py); this hook sees all
    # items of the session, so only those under tests/sft/ are marked
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.requires("trl"))


@pytest.fixture(scope="session")
def sft_data(tmp_path_factory):
    return write_sft_dataset(tmp_path_factory.mktemp("sftdata") / "sft", n_train=96, n_validation=16, seed=0)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, sft_data):
    from omnidecision.synthetic.tiny import build_tiny_planner, harvest_texts

    return build_tiny_planner(tmp_path_factory.mktemp("tiny") / "model", list(harvest_texts(sft_data)),
                              hidden=32, layers=1, heads=2, vocab_size=1024, seed=0)


def sft_args(model, data, out, *extra: str):
    """Parse a small CPU recipe the way `omnidecision sft` does (TrlParser, YAML-free overrides)."""
    from omnidecision.sft.config import parse_args

    return parse_args([
        "--config", str(ROOT / "configs" / "sft" / "tiny-cpu.yaml"),
        "--model_name_or_path", str(model), "--dataset_name", str(data), "--output_dir", str(out),
        "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8", "--max_length", "768",
        "--logging_steps", "1", "--eval_strategy", "no", "--save_strategy", "no", "--warmup_steps", "0",
        "--lr_scheduler_type", "constant", "--disable_tqdm", "true", *extra,
    ])
