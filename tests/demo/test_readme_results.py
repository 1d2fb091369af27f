"""The README's "Measured" demo tables are the committed result file's, line for line: every planner row and every
paired row that `omnidecision.demo.table` renders from `docs/results/demo-summary.json` is in README.md (no
figure in the README without its result file)."""

from __future__ import annotations

import json
from pathlib import Path

from omnidecision.demo import table

ROOT = Path(__file__).resolve().parents[2]


def test_readme_demo_tables_come_from_the_result_file():
    summary = json.loads((ROOT / "docs/results/demo-summary.json").read_text("utf-8"))
    readme = (ROOT / "README.md").read_text("utf-8")
    rows = [line for line in table(summary).splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 10  # planners, pairs and families
    missing = [line for line in rows if line not in readme]
    assert not missing, f"README.md lacks these lines of the demo table (regenerate from the JSON): {missing}"
    assert f"{summary['total_wall_s'] / 60:.1f} min" in readme  # the wall time quoted is the file's
