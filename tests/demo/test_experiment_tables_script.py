"""scripts/analysis/experiment_tables.py: the one marked block is replaced and its opening marker names the result
file; a document with no block or two is refused rather than half-rewritten."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("experiment_tables", ROOT / "scripts/analysis/experiment_tables.py")
experiment_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(experiment_tables)

BARE = "prose\n<!-- experiment-tables:begin -->\n| old |\n<!-- experiment-tables:end -->\nafter\n"


def test_the_block_is_replaced_and_names_its_source():
    once = experiment_tables.regenerate(BARE, "docs/results/x.json", "| new |\n")
    assert once == ("prose\n<!-- experiment-tables:begin docs/results/x.json -->\n| new |\n"
                    "<!-- experiment-tables:end -->\nafter\n")
    # a second run from another file rewrites the named marker too
    twice = experiment_tables.regenerate(once, "docs/results/y.json", "| newer |")
    assert "begin docs/results/y.json -->\n| newer |\n" in twice and "| new |" not in twice and "x.json" not in twice


@pytest.mark.parametrize("text", ["no markers here\n", BARE + BARE])
def test_zero_or_two_blocks_are_refused(text):
    with pytest.raises(ValueError, match="experiment-tables blocks"):
        experiment_tables.regenerate(text, "docs/results/x.json", "| new |")


def test_its_target_page_holds_exactly_one_block():
    """The page the script rewrites exists and has the one block it replaces (regenerate refuses zero or two)."""
    for name in experiment_tables.TARGETS:
        text = (ROOT / name).read_text("utf-8")
        once = experiment_tables.regenerate(text, "docs/results/x.json", "| new |")
        assert once.count("experiment-tables:begin") == 1
