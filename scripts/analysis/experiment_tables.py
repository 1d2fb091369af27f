"""Regenerate the experiment tables of docs/research/nine-starts.md from a committed result file (no figure without
its file).

    python scripts/analysis/experiment_tables.py docs/results/experiment-9starts.json    # rewrites the page in place

In each file, everything between `<!-- experiment-tables:begin FILE -->` and `<!-- experiment-tables:end -->` is
replaced by `omnidecision.pipeline.experiment.experiment_table` of the result file, and FILE in the opening marker
names it, so tests/docs/test_research_figures.py can check the block against the file it came from. The prose around
the markers is written by hand.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from omnidecision.pipeline.experiment import experiment_table

ROOT = Path(__file__).resolve().parents[2]
# the opening marker names its result file (older READMEs had a bare marker: still recognised, and rewritten)
BLOCK = re.compile(r"<!-- experiment-tables:begin(?: (?P<source>\S+))? -->\n.*?<!-- experiment-tables:end -->",
                   re.S)
TARGETS = ("docs/research/nine-starts.md",)


def regenerate(text: str, source: str, table: str) -> str:
    """`text` with its one marked block replaced by `table` from `source` (a repository-relative path)."""
    blocks = BLOCK.findall(text)
    if len(blocks) != 1:
        raise ValueError(f"{len(blocks)} experiment-tables blocks (want exactly one)")
    block = f"<!-- experiment-tables:begin {source} -->\n{table.strip()}\n<!-- experiment-tables:end -->"
    return BLOCK.sub(lambda _: block, text)


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit(__doc__)
    source = Path(argv[0]).as_posix()
    table = experiment_table(json.loads((ROOT / source).read_text("utf-8")))
    for name in TARGETS:
        path = ROOT / name
        try:
            path.write_text(regenerate(path.read_text("utf-8"), source, table), "utf-8")
        except ValueError as exc:
            raise SystemExit(f"{path}: {exc}") from exc
        print(f"{path}: experiment tables from {source}")


if __name__ == "__main__":
    main(sys.argv[1:])
