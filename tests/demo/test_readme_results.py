"""The README's "Measured" experiment tables are the committed result files', line for line: every planner row and
every pooled paired row that `omnidecision.pipeline.experiment.experiment_table` renders from the file named in the
generated block's marker, and every planned-contrast row of each experiment result file (no figure in the README
without its result file)."""

from __future__ import annotations

import json
from pathlib import Path

from omnidecision.pipeline.arms import planners
from omnidecision.pipeline.experiment import experiment_table

PLANNERS = planners()

ROOT = Path(__file__).resolve().parents[2]


def _blocks(text: str) -> list[tuple[str, str]]:
    """(result file named by the opening marker, block text) of every generated experiment-tables block."""
    import re

    return re.findall(r"<!-- experiment-tables:begin (\S+) -->\n(.*?)<!-- experiment-tables:end -->", text, re.S)


def test_readme_experiment_tables_come_from_the_result_file():
    """The generated block (scripts/readme_experiment.py) of README.md and of docs/findings.md is its named result
    file's `experiment_table`, row for row, and the README's prose names the file's start count and suite size."""
    for doc in ("README.md", "docs/findings.md"):
        text = (ROOT / doc).read_text("utf-8")
        blocks = _blocks(text)
        assert len(blocks) == 1, f"{doc}: {len(blocks)} experiment-tables blocks (regenerate with the script)"
        source, block = blocks[0]
        pooled = json.loads((ROOT / source).read_text("utf-8"))
        rows = [line for line in experiment_table(pooled).splitlines() if line.startswith("| ") and "---" not in line]
        assert len(rows) >= len(PLANNERS) + 10  # planners and pooled pairs
        missing = [line for line in rows if line not in block]
        assert not missing, f"{doc} lacks these lines of {source}'s table (regenerate from the JSON): {missing}"
        if doc == "README.md":
            assert f"{len(pooled['seeds'])} starts" in text and f"{pooled['test_tasks_per_seed']} test tasks" in text


def test_readme_pooled_contrasts_come_from_their_result_files():
    """The planned-contrast rows of the 3-start run (docs/results/experiment.json) and of every pool of later starts
    (docs/results/experiment-Nstarts.json: 5 starts, the declared extension's interim pools, the reading at 9) are in
    the README as `contrast_rows` renders them."""
    import re

    from omnidecision.pipeline.experiment import contrast_rows

    readme = (ROOT / "README.md").read_text("utf-8")
    files = sorted((ROOT / "docs/results").glob("experiment-*starts.json"))
    assert files, "no pooled result file"
    for path in [ROOT / "docs/results/experiment.json", *files]:  # the declared 3-start run, then the pools
        pooled = json.loads(path.read_text("utf-8"))
        if path.name != "experiment.json":
            n = int(re.fullmatch(r"experiment-(\d+)starts\.json", path.name).group(1))
            assert len(pooled["seeds"]) == n, f"{path.name} holds {len(pooled['seeds'])} starts"
        planned = [f"| {c} |" for c in pooled["recipe"]["planned"]]
        rows = [line for line in contrast_rows(pooled["contrasts"]) if line.startswith(tuple(planned))]
        assert len(rows) == len(planned)
        missing = [line for line in rows if line not in readme]
        assert not missing, f"README.md lacks these rows of {path.name}: {missing}"


def test_readme_arms_contrasts_come_from_their_result_files():
    """A run of some arms (scripts/run_arms.py) that read planned contrasts: every planned row is in the README as
    `contrast_rows` renders it, and each arm's hierarchical mean as `ARM 0.xxx [low, high]`."""
    from omnidecision.pipeline.experiment import contrast_rows

    readme = (ROOT / "README.md").read_text("utf-8")
    files = [p for p in sorted((ROOT / "docs/results").glob("arms-*.json"))
             if json.loads(p.read_text("utf-8"))["contrasts"]["planned"]]
    assert files, "no arms result file with planned contrasts"
    for path in files:
        pooled = json.loads(path.read_text("utf-8"))
        planned = [f"| {c} |" for c in pooled["contrasts"]["planned"]]
        rows = [line for line in contrast_rows(pooled["contrasts"]) if line.startswith(tuple(planned))]
        assert len(rows) == len(planned)
        missing = [line for line in rows if line not in readme]
        assert not missing, f"README.md lacks these rows of {path.name}: {missing}"
        for arm, m in pooled["contrasts"]["means"].items():
            assert f"{arm} {m['estimate']:.3f} [{m['low']:.3f}, {m['high']:.3f}]" in readme, (path.name, arm)


def test_readme_demo_figures_come_from_the_demo_result_file():
    summary = json.loads((ROOT / "docs/results/demo-summary.json").read_text("utf-8"))
    readme = (ROOT / "README.md").read_text("utf-8")
    # the planners of the committed run (an arm added to the table since is in the next run's file); none that the
    # table has dropped
    assert set(summary["planners"]) <= set(PLANNERS), sorted(set(summary["planners"]) - set(PLANNERS))
    for name in summary["planners"]:
        assert f"{name} {summary['planners'][name]['accuracy']:.3f}" in readme, name
    assert f"{summary['total_wall_s'] / 60:.1f} min of stage time" in readme
