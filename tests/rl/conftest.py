"""A tiny from-scratch planner and a small rule-generated RL dataset, shared by the GRPO tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_planner(tmp_path_factory):
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    out = tmp_path_factory.mktemp("tiny-planner")
    return build_tiny_planner(out, texts=list(default_corpus(n=200)), hidden=32, layers=1, heads=2)


@pytest.fixture(scope="session")
def rl_dir(tmp_path_factory):
    from omnidecision.rl.data import write_rl_dataset

    return write_rl_dataset(tmp_path_factory.mktemp("harvest"), n_train=24, n_validation=8, seed=3)
