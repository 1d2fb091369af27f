"""scripts/readme_experiment.py: the one marked block is replaced and its opening marker names the result file; a
document with no block or two is refused rather than half-rewritten."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("readme_experiment", ROOT / "scripts/readme_experiment.py")
readme_experiment = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_experiment)

BARE = "prose\n<!-- experiment-tables:begin -->\n| old |\n<!-- experiment-tables:end -->\nafter\n"


def test_the_block_is_replaced_and_names_its_source():
    once = readme_experiment.regenerate(BARE, "docs/results/x.json", "| new |\n")
    assert once == ("prose\n<!-- experiment-tables:begin docs/results/x.json -->\n| new |\n"
                    "<!-- experiment-tables:end -->\nafter\n")
    # a second run from another file rewrites the named marker too
    twice = readme_experiment.regenerate(once, "docs/results/y.json", "| newer |")
    assert "begin docs/results/y.json -->\n| newer |\n" in twice and "| new |" not in twice and "x.json" not in twice


@pytest.mark.parametrize("text", ["no markers here\n", BARE + BARE])
def test_zero_or_two_blocks_are_refused(text):
    with pytest.raises(ValueError, match="experiment-tables blocks"):
        readme_experiment.regenerate(text, "docs/results/x.json", "| new |")
