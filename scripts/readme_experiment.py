"""Regenerate the README's experiment tables from the committed result file (no figure without its file).

    python scripts/readme_experiment.py [docs/results/experiment.json]      # rewrites README.md in place

Everything between the markers `<!-- experiment-tables:begin -->` and `<!-- experiment-tables:end -->` is replaced
by `omnidecision.pipeline.experiment.experiment_table` of the file; the prose around the markers is written by
hand and tests/demo/test_readme_results.py checks that it names the file's seed count and test-suite size.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omnidecision.pipeline.experiment import experiment_table

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- experiment-tables:begin -->", "<!-- experiment-tables:end -->"


def main(argv: list[str]) -> None:
    result = ROOT / (argv[0] if argv else "docs/results/experiment.json")
    readme = ROOT / "README.md"
    text = readme.read_text("utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: the markers {BEGIN} … {END} are missing (put them around the tables)")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    table = experiment_table(json.loads(result.read_text("utf-8"))).strip()
    readme.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}", "utf-8")
    print(f"{readme}: experiment tables from {result}")


if __name__ == "__main__":
    main(sys.argv[1:])
