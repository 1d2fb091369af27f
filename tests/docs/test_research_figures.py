"""Every figure a research page shows from a result file is the file's, line for line (no figure without its file).

A page marks what it rendered from a result file with `<!-- figures:begin docs/results/F -->` … `<!-- figures:end -->`
(or, for the experiment's whole table, `<!-- experiment-tables:begin F -->` … `<!-- experiment-tables:end -->`, written
by scripts/analysis/experiment_tables.py). Inside a block, every table row that names a planner, a contrast or a
family of F, and every `ARM 0.xxx [low, high]` mean, must be what the project's renderers make of F; the tables some
pages wrote by hand are checked figure by figure below. Pages: every .md under docs/ and README.md.

    pytest -q tests/docs/test_research_figures.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from omnidecision.eval.families import markdown as family_markdown
from omnidecision.pipeline import curve
from omnidecision.pipeline.experiment import contrast_rows, experiment_table

ROOT = Path(__file__).resolve().parents[2]
RESEARCH = ROOT / "docs" / "research"
PAGES = sorted([*ROOT.glob("docs/**/*.md"), ROOT / "README.md"])
FIGURES = re.compile(r"<!-- figures:begin (\S+) -->\n(.*?)<!-- figures:end -->", re.S)
TABLES = re.compile(r"<!-- experiment-tables:begin (\S+) -->\n(.*?)<!-- experiment-tables:end -->", re.S)
MEAN = re.compile(r"\b(\w+) (\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\]")


def _load(rel: str) -> dict[str, Any]:
    path = ROOT / rel
    assert path.is_file(), f"{rel}: the result file a page names is missing"
    return json.loads(path.read_text("utf-8"))


def _blocks(pattern: re.Pattern[str]) -> list[tuple[str, str, str]]:
    return [(p.relative_to(ROOT).as_posix(), source, block) for p in PAGES
            for source, block in pattern.findall(p.read_text("utf-8"))]


def _page(name: str) -> str:
    return (RESEARCH / name).read_text("utf-8")


def _rows(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("| ") and "---" not in line]


def check_block(source: str, block: str) -> int:
    """Assert every figure of `block` that names something of `source` is the file's; return how many were checked."""
    data, checked = _load(source), 0
    lines = _rows(block)
    if data.get("contrasts"):
        section = data["contrasts"]
        rendered = contrast_rows(section)
        names = {*section["planned"], *section.get("exploratory", {})}
        for line in lines:
            if line.split("|")[1].strip() in names:
                assert line in rendered, f"{source}: this contrast row is not the file's: {line}"
                checked += 1
        planned = [r for r in rendered if r.startswith(tuple(f"| {c} |" for c in section["planned"]))]
        if checked:  # a block that shows contrasts shows every planned one
            missing = [r for r in planned if r not in block]
            assert not missing, f"{source}: planned contrasts missing from the block: {missing}"
        for arm, value, low, high in MEAN.findall(block):
            m = section.get("means", {}).get(arm)
            if m is not None:
                assert (value, low, high) == (f"{m['estimate']:.3f}", f"{m['low']:.3f}", f"{m['high']:.3f}"), \
                    f"{source}: {arm}'s mean"
                checked += 1
    if "per_seed_accuracy" in data:
        table = experiment_table(data).splitlines()
        for line in lines:
            if line.split("|")[1].strip() in data["per_seed_accuracy"]:
                assert line in table, f"{source}: this planner row is not the file's: {line}"
                checked += 1
    if "families" in data and "command" in data:  # omnidecision.eval.families
        for line in _rows(family_markdown(data))[1:]:
            assert line in block, f"{source}: the family row {line} is missing or differs"
            checked += 1
    if data.get("kind") == "teacher-curve":  # every table row is one the curve page renders from the file
        rendered = {line.strip() for render in (curve.curve_table, curve.contrast_table, curve.arm_cost_table,
                                                curve.time_table, curve.cost_table, curve.per_start_table)
                    for line in render(data)}
        for line in lines:
            assert line in rendered, f"{source}: this curve row is not the file's: {line}"
            checked += 1
    if "planners" in data and "total_wall_s" in data:  # a demo summary
        for name, p in data["planners"].items():
            assert f"{name} {p['accuracy']:.3f}" in block, f"{source}: {name}'s accuracy"
            checked += 1
        assert f"{data['total_wall_s'] / 60:.1f} min of stage time" in block, f"{source}: the stage time"
    return checked


def test_the_research_pages_mark_their_figures():
    blocks = [b for b in _blocks(FIGURES) + _blocks(TABLES) if b[0].startswith("docs/research/")]
    sources = {source for _, source, _ in blocks}
    # the current reading, the 9-start reading, the testbed and the demo are rendered from their files
    assert {"docs/results/arms-rl-short-form.json", "docs/results/experiment-9starts.json",
            "docs/results/synth-families.json", "docs/results/demo-summary.json"} <= sources, sources


@pytest.mark.parametrize(("page", "source", "block"), _blocks(FIGURES), ids=lambda v: v if "\n" not in v else "")
def test_a_figures_block_is_its_result_files(page: str, source: str, block: str):
    assert check_block(source, block) > 0, f"{page}: the block for {source} shows nothing the test can check"


@pytest.mark.parametrize(("page", "source", "block"), _blocks(TABLES), ids=lambda v: v if "\n" not in v else "")
def test_an_experiment_tables_block_is_its_result_files_table(page: str, source: str, block: str):
    rows = _rows(experiment_table(_load(source)))
    assert len(rows) >= 20  # planners and contrasts
    missing = [line for line in rows if line not in block]
    assert not missing, f"{page} lacks these lines of {source}'s table (regenerate with the script): {missing}"


def test_a_changed_figure_is_caught():
    """The check fails on a block whose figure differs from the file's by one digit."""
    page = _page("rl-arms-short-form.md")
    source, block = FIGURES.findall(page)[0]
    good = check_block(source, block)
    row = next(line for line in _rows(block) if line.startswith("| grpo_judge-sft |"))
    bad = row.replace("| +0.002 |", "| +0.003 |", 1)
    assert bad != row and good > 0
    with pytest.raises(AssertionError, match="not the file's"):
        check_block(source, block.replace(row, bad))
    mean = MEAN.search(block).group(0)
    with pytest.raises(AssertionError, match="mean"):
        check_block(source, block.replace(mean, mean[:-2] + ("1]" if mean[-2] != "1" else "2]")))


def test_a_changed_curve_figure_is_caught():
    page = _page("teacher-curve.md")
    source, block = next((src, b) for src, b in FIGURES.findall(page) if "teacher-curve" in src)
    row = next(line for line in _rows(block) if line.startswith("| sft |"))
    assert check_block(source, block) > 0
    with pytest.raises(AssertionError, match="curve row"):
        check_block(source, block.replace(row, row.replace("0.", "0.9", 1)))


def test_rerun_figures():
    data = _load("docs/results/rerun-start2.json")
    assert f"{len(data['units'])} units, {len(data['differ'])} differ" in _page("reproducibility.md")


def test_listed_tools_table():
    """source-switch.md's listed-tools table: each planner and scope's accuracy and repeat-after-empty rate."""
    data, rows = _load("docs/results/listed-tools.json"), _rows(_page("source-switch.md"))
    for planner, scopes in data["planners"].items():
        for scope, r in scopes.items():
            row = next(line for line in rows if line.startswith(f"| {planner} | {scope} |"))
            rae = r["decisions"]["repeat_after_empty"]
            assert f"{r['accuracy']:.3f}" in row, row
            assert f"{rae['rate']:.2f} ({rae['events']} of {rae['states']})" in row, row


def test_oracle_capacity_table():
    """source-switch.md's depth and seed table: each variant's accuracy and wrong decisions over states."""
    data, rows = _load("docs/results/oracle-capacity.json"), _rows(_page("source-switch.md"))
    for v in data["variants"].values():
        label = f"| {v['layers']} layers, SFT seed {v['sft_seed']} |"
        row = next(line for line in rows if line.startswith(label))
        assert f"| {v['accuracy']:.3f} | {v['errors']['wrong']} / {v['errors']['states']} |" in row, row
    ref = data["reference"]
    row = next(line for line in rows if "(the experiment's; SFT time of the rerun)" in line)
    assert f"| {ref['accuracy']:.3f} | {ref['errors']['wrong']} / {ref['errors']['states']} |" in row, row


def test_short_form_change_table():
    """short-form-testbed.md's before/after table: the mean of starts with its interval, and the same starts before."""
    data = _load("docs/results/short-form-change.json")
    rows = _rows(_page("short-form-testbed.md"))
    checked = 0
    for family, r in data["families"].items():
        row = next((line for line in rows if line.startswith(f"| {family} |") and "/" in line), None)
        if row is None:
            continue
        after, before = r["after"], r["before"]
        assert f"{after['estimate']:.3f}" in row and f"| {before['estimate']:.3f} |" in row, row
        if after["low"] < after["estimate"]:  # an interval is shown where the starts differ
            assert f"[{after['low']:.3f}, {after['high']:.3f}]" in row, row
        checked += 1
    assert checked >= 3


FAMILY_COLUMNS = ("source_switch", "supplementary_finish", "conflict_second_source")


def _cells(row: str) -> list[str]:
    return [c.strip().replace("**", "") for c in row.strip().strip("|").split("|")]


def _counts(entry: dict[str, Any], family: str) -> str:
    right, n = entry[family]
    return f"{right}/{n}"


def test_oracle_seeds_table():
    """source-switch.md's SFT-seed table: per run, the three families' counts on test / probe, the totals and the best
    dev loss, as scripts/analysis/family_table.py wrote them."""
    data = _load("docs/results/oracle-seeds.json")
    checked = 0
    for row in _rows(_page("source-switch.md")):
        m = re.match(r"\| K = (\d)(?: \(all\))?, seed (\d)(, 3,000 steps)? ", row)
        if not m:
            continue
        key = f"k{m[1]}-s{m[2]}" + ("-3000" if m[3] else "")
        test, probe = data[f"{key}.test"], data.get(f"{key}.probe")
        cells = _cells(row)
        for family, cell in zip(FAMILY_COLUMNS, cells[1:4], strict=True):
            assert cell == f"{_counts(test, family)} / {_counts(probe, family) if probe else '–'}", (key, family)
        assert cells[4] == f"{test['all'][0]} / {probe['all'][0] if probe else '–'}", key
        assert cells[5] == f"{test['best_dev_loss']:.4f}", key
        checked += 1
    assert checked == 9


def test_switch_copies_table():
    """source-switch.md's switch-copies table: each cell's probe / test counts, as family_table.py wrote them."""
    data = _load("docs/results/switch-copies.json")
    labels = {"K = 1 (3a21459's model)": "k1", "all × 4": "all4", "all × 8": "all8", "empty × 4": "empty4"}
    checked = 0
    for row in _rows(_page("source-switch.md")):
        m = re.match(r"\| start (\d), (K = 1 \(3a21459's model\)|all × 4|all × 8|empty × 4), ", row)
        if not m:
            continue
        runs = [data[k] for k in (f"s{m[1]}.{labels[m[2]]}.probe", f"s{m[1]}.{labels[m[2]]}.test") if k in data]
        cells = _cells(row)
        for family, cell in zip(FAMILY_COLUMNS, cells[1:4], strict=True):
            assert cell == " / ".join(_counts(r, family) for r in runs), (row, family)
        total = " / ".join(str(r["all"][0]) for r in runs)
        assert cells[4] in (total, f"{runs[0]['all'][0]}/{runs[0]['all'][1]}"), row
        checked += 1
    assert checked == 6


def test_short_form_counts_per_start():
    """short-form-testbed.md: oracle_sft's per-start test counts are arms-short-form.json's accuracies × 120 tasks, and
    the priority-order trial's totals are arms-priority-order.json's."""
    page = _page("short-form-testbed.md")
    short = _load("docs/results/arms-short-form.json")
    counts = [f"{round(a * 120)}/120" for a in short["per_seed_accuracy"]["oracle_sft"]]
    row = next(line for line in _rows(page) if line.startswith("| all |"))
    assert _cells(row)[1:1 + len(counts)] == counts, row
    prio = _load("docs/results/arms-priority-order.json")
    first, second = (round(a * 120) for a in prio["per_seed_accuracy"]["oracle_sft"])
    assert f"all {first}/120 and {second}/120" in " ".join(page.split())


def test_rl_arms_table_per_start():
    """rl-arms-short-form.md's per-arm table: each start's accuracy (each replicate's for a replicated arm), the
    hierarchical mean with its interval, and the same starts of the 9-start file."""
    data, before = _load("docs/results/arms-rl-short-form.json"), _load("docs/results/experiment-9starts.json")
    rows = _rows(_page("rl-arms-short-form.md"))
    for arm, m in data["contrasts"]["means"].items():
        row = next(line for line in rows if re.match(rf"\| {arm}( \(r0–r3\))? \|", line))
        cells = _cells(row)
        for start, cell in zip(("0", "1"), cells[1:3], strict=True):
            reps = [f"{a:.3f}" for a in data["per_replicate_accuracy"][arm][start].values()]
            assert cell in (", ".join(reps), f"{reps[0]} ×{len(reps)}" if len(set(reps)) == 1 else None), (arm, cell)
        mean = f"{m['estimate']:.3f} [{m['low']:.3f}, {m['high']:.3f}]"
        assert cells[3] in (mean, f"{m['estimate']:.3f}" if m["low"] == m["high"] else None), (arm, cells[3])
        earlier = [f"{a:.3f}" for a in before["per_seed_accuracy"][arm][:2]]
        assert cells[4] in (", ".join(earlier), earlier[0] if len(set(earlier)) == 1 else None), (arm, cells[4])


CURVES = [("teacher-curve", "The teacher-data curve", "teacher-curve.md"),
          ("sft-sized", "SFT sized to its data", "sft-sized.md")]


@pytest.mark.parametrize(("name", "title", "declaration"), CURVES, ids=[c[0] for c in CURVES])
def test_the_curve_result_page_is_what_its_file_renders(name: str, title: str, declaration: str):
    """docs/research/NAME-result.md is generated from docs/results/NAME.json (issues 57 and 64): the page committed
    is the one `python -m omnidecision.pipeline.curve` writes from the file committed, line for line."""
    result = _load(f"docs/results/{name}.json")
    assert result["kind"] == "teacher-curve"
    page = (RESEARCH / f"{name}-result.md").read_text("utf-8")
    assert page == curve.curve_page(result, f"docs/results/{name}.json", f"../results/{name}.png", title,
                                    declaration), \
        f"regenerate: python -m omnidecision.pipeline.curve docs/results/{name}.json --title \"{title}\" --page " \
        f"docs/research/{name}-result.md --plot docs/results/{name}.png"
    assert (ROOT / "docs" / "results" / f"{name}.png").stat().st_size > 10_000


def test_the_sized_reading_is_its_file():
    """The figures of docs/research/sft-sized.md's reading that are no interval (the interval ones are held by
    tests/docs/test_research_claims.py): starts at or above the teacher, the between-start sd, the half-widths, the
    replicates ended at their start, the steps trained, every replicate at or above its teacher."""
    data = _load("docs/results/sft-sized.json")
    text = " ".join((RESEARCH / "sft-sized.md").read_text("utf-8").split())
    by_n = data["by_n"]

    def at_or_above(n: str, arm: str) -> int:
        return curve.at_or_above_teacher(by_n[n]["per_seed_accuracy"], arm)

    assert f"at or above its teacher at {at_or_above('15', 'sft')} of 6 starts at N = 15" in text
    assert f"and at {at_or_above('30', 'sft')} of 6 at N = 30" in text
    assert f"the fixed-steps SFT at {at_or_above('15', 'sft_fixed')} of 6 and {at_or_above('30', 'sft_fixed')} of 6" \
        in text
    spread = {arm: curve.sd(by_n["15"]["per_seed_accuracy"][arm]) for arm in ("sft", "sft_fixed")}
    assert f"sd at N = 15 is {spread['sft']:.3f} for sft and {spread['sft_fixed']:.3f} for sft_fixed" in text
    planned = by_n["30"]["contrasts"]["planned"]
    for key in ("sft-sft_fixed", "grpo_own-sft", "grpo_own-rft_own", "grpo_judge-rft"):
        half = curve.half_width(planned[key])
        assert f"{half:.3f} for {key.replace('-', ' − ')}" in text, key
    ended = {n: by_n[n]["ended_at_start"] for n in ("15", "30")}
    assert f"ended {ended['15']['grpo_own']} of 18 grpo_own replicates at their start at N = 15, " \
           f"{ended['30']['grpo_own']} of 18 at N = 30" in text
    for a, b in (("grpo_own", "rft_own"), ("grpo_judge", "rft")):
        assert f"({a}, {b}): {ended['15'][a]} and {ended['15'][b]} of 18 at N = 15, {ended['30'][a]} and " \
               f"{ended['30'][b]} at N = 30" in text, (a, b)
    steps = {n: [cell["sft"]["steps"] for cell in by_n[n]["budget"].values()] for n in ("15", "30")}
    assert f"{min(steps['15'])} to {max(steps['15'])} optimizer steps at N = 15 and " \
           f"{min(steps['30'])} to {max(steps['30'])} at N = 30" in text, steps
    # every grpo_own, grpo_judge and rft_own replicate at or above its start's teacher (to 3 decimals, as printed)
    for n in ("15", "30"):
        teacher = by_n[n]["per_seed_accuracy"]["teacher"]
        for arm in ("grpo_own", "grpo_judge", "rft_own"):
            for start, reps in by_n[n]["per_replicate_accuracy"][arm].items():
                assert all(round(a, 3) >= round(teacher[int(start)], 3) for a in reps.values()), (n, arm, start)
    assert "every grpo_own, grpo_judge and rft_own replicate at both N scored at least its start's teacher" in text
    teachers = {n: by_n[n]["per_seed_accuracy"]["teacher"] for n in ("15", "30")}
    below = {n: [(start, r) for start, reps in by_n[n]["per_replicate_accuracy"]["rft"].items()
                 for r, a in reps.items() if round(a, 3) < round(teachers[n][int(start)], 3)] for n in ("15", "30")}
    assert len(below["15"]) == 3 and not below["30"] and "Three rft replicates at N = 15 did not" in text, below
