"""Shared fixtures for the reliability tests: a small synthetic suite built once per module."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def synth_tasks(tmp_path_factory):
    from omnidecision.tasks import synth

    out = tmp_path_factory.mktemp("synth")
    synth.write_suite(12, 3, out)
    return synth.load_suite(out)
