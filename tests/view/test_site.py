"""The viewer's files, without a browser: what each page holds, the ledger it shows, unreadable lines, no network.

    .venv/bin/pytest -q tests/view/test_site.py
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from markupsafe import escape
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.ledger import replay
from omnidecision.rollout.store import read_records
from omnidecision.view.load import load
from omnidecision.view.render import slug
from omnidecision.view.timeline import build

from .conftest import Runs


def records_of(path: Path):
    files = sorted(path.glob("trajectories*.jsonl")) if path.is_dir() else [path]
    return [r for f in files for _, r in read_records(f)]


def rows_of(site: Path) -> dict:
    text = (site / "assets" / "runs.js").read_text("utf-8")
    return json.loads(text.removeprefix("window.OMNI_VIEW = ").rstrip().rstrip(";"))


def test_ledger_after_each_step_is_what_the_agent_committed(runs: Runs):
    n_checked = 0
    for src in (runs.collection, runs.ledger_eval, runs.rejected):
        for rec in records_of(src):
            view = build(rec)
            assert len(view.steps) == len(rec.steps)
            states = [rec.steps[0].ledger] if rec.steps else []
            for step in rec.steps:  # the replay contract, independently of the viewer
                states.append(replay(step.events, states[-1])[-1] if step.events else states[-1])
            assert [s.after for s in view.steps] == states[1:]
            for i, s in enumerate(view.steps[:-1]):
                assert s.after == rec.steps[i + 1].ledger
            # the grid: one column per committed state, each cell the need's status in that state
            assert view.columns[0] == "init" and view.columns[1:len(rec.steps) + 1] == [str(s.step) for s in rec.steps]
            for row in view.grid:
                statuses = [st.needs[row.index].status for st in states[1:]]
                assert [c[0] for c in row.cells[1:len(rec.steps) + 1]] == statuses
            n_checked += 1
    assert n_checked > 40


def test_rejected_decisions_are_marked_with_the_loop_reason(runs: Runs, site: Path):
    recs = records_of(runs.rejected)
    assert recs and all(r.steps[0].invalid for r in recs)
    for rec in recs:
        view = build(rec)
        assert view.steps[0].rejected == rec.steps[0].invalid
        assert "not actionable" in rec.steps[0].invalid or "unknown need" in rec.steps[0].invalid
        text = (site / "run" / "3" / f"{slug(rec.task_id)}-s{rec.sample}.html").read_text("utf-8")  # 4th source
        assert text.count('class="step rejected"') >= 1
        assert str(escape(f"Rejected: {rec.steps[0].invalid}")) in text
    # finishes refused by the finalizer check (premature finishes of the noisy teacher) carry the diagnosis
    refused = [(r, s) for r in records_of(runs.collection) for s in build(r).steps
               if s.kind == "finish" and s.finalizer is not None and not s.finalizer.passed]
    assert refused, "the noisy teacher made no premature finish: raise its noise"
    assert all(s.rejected and s.finalizer.diagnosis in s.rejected for _, s in refused)


def test_site_has_a_page_per_run_and_side_by_side_pages_for_shared_tasks(runs: Runs, site: Path):
    per_source = [records_of(p) for p in runs.all]
    data = rows_of(site)
    assert len(data["rows"]) == sum(len(x) for x in per_source)
    assert [s["label"] for s in data["sources"]] == ["teacher", "react", "collect", "rejected"]
    for row in data["rows"]:
        assert (site / row[data["fields"].index("href")]).is_file()
    keys = [{(r.task_id, r.sample) for r in recs} for recs in per_source]
    expected = sum(len(keys[a] & keys[b]) for a in range(4) for b in range(a + 1, 4))
    assert expected > 0 and len(list((site / "pairs").glob("*.html"))) == expected
    # the report's headline figures and plots are on the index
    report = json.loads((runs.ledger_eval / "report.json").read_text("utf-8"))
    index = (site / "index.html").read_text("utf-8")
    assert f"{100 * report['accuracy']:.1f}% ({report['correct']}/{report['n']})" in index
    for png in sorted(runs.ledger_eval.glob("*.png")):
        assert f'src="assets/plots/0/{png.name}"' in index
        assert (site / "assets" / "plots" / "0" / png.name).read_bytes() == png.read_bytes()


class _Refs(HTMLParser):
    """Every attribute value that makes a browser load or go somewhere."""

    ATTRS = {"href", "src", "srcset", "action", "formaction", "poster", "data", "background", "manifest", "content"}

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in self.ATTRS and value and not (tag == "meta" and name == "content"):
                self.refs.append(value)
            if name == "style" and value:
                self.refs.append(value)


NETWORK = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:|//)", re.I)  # any scheme, or protocol-relative


def test_no_page_references_a_network_url(site: Path):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 50
    n_refs = 0
    for page in pages:
        parser = _Refs()
        parser.feed(page.read_text("utf-8"))
        for ref in parser.refs:
            assert not NETWORK.match(ref), f"{page}: {ref!r} is not a local relative path"
            n_refs += 1
    assert n_refs > 100
    for asset in ("view.css", "index.js"):
        text = (site / "assets" / asset).read_text("utf-8")
        assert not re.search(r"https?:|//[a-z]|url\(|@import|fetch\(|XMLHttpRequest|WebSocket", text, re.I), asset
    # URLs found in the data (web search hits, evidence sources) are shown as text, never as links
    data = (site / "assets" / "runs.js").read_text("utf-8")
    assert "<a " not in data


def test_malformed_and_truncated_jsonl_report_file_and_line(runs: Runs, tmp_path: Path):
    good = (runs.ledger_eval / "trajectories.jsonl").read_text("utf-8").splitlines(keepends=True)
    assert len(good) >= 8
    lines = list(good)
    lines[2] = '{"run_id": "broken", oops\n'  # line 3: not JSON
    bad_field = json.loads(lines[4])
    bad_field["outcome"] = "maybe"
    lines[4] = json.dumps(bad_field) + "\n"  # line 5: valid JSON, invalid record
    lines[-1] = lines[-1][: len(lines[-1]) // 2]  # last line cut mid-write (no newline)
    bad = tmp_path / "runs" / "trajectories.jsonl"
    bad.parent.mkdir()
    bad.write_text("".join(lines), "utf-8")
    out = tmp_path / "site"
    result = CliRunner().invoke(app, ["view", str(bad.parent), "--out", str(out)])
    assert result.exit_code == 0, result.output
    n = len(lines)
    assert f"{bad}:3: not valid JSON" in result.output
    assert f"{bad}:5: field outcome" in result.output
    assert f"{bad}:{n}: truncated last line" in result.output
    assert f"{n - 3} runs from 1 source(s); 3 unreadable line(s) skipped" in result.output
    # the readable runs are rendered; the unreadable ones are listed on the index with file and line
    rendered = {r[rows_of(out)["fields"].index("task")] for r in rows_of(out)["rows"]}
    wanted = {json.loads(line)["task_id"] for i, line in enumerate(good) if i not in (2, 4, n - 1)}
    assert rendered == wanted
    index = (out / "index.html").read_text("utf-8")
    assert f"{bad}:3:" in index and f"{bad}:5:" in index and f"{bad}:{n}:" in index
    # the same problems come back from the loader itself, in file order
    assert [p.split(": ")[0] for p in load([bad]).problems] == [f"{bad}:3", f"{bad}:5", f"{bad}:{n}"]


def test_a_complete_last_line_without_newline_is_read(runs: Runs, tmp_path: Path):
    text = (runs.ledger_eval / "trajectories.jsonl").read_text("utf-8").rstrip("\n")
    f = tmp_path / "no-newline.jsonl"
    f.write_text(text, "utf-8")
    c = load([f])
    assert c.problems == [] and c.n_runs == len(text.splitlines())


def test_nothing_readable_is_an_error(tmp_path: Path):
    f = tmp_path / "trajectories.jsonl"
    f.write_text("not json\n", "utf-8")
    result = CliRunner().invoke(app, ["view", str(f), str(tmp_path / "missing"), "--out", str(tmp_path / "site")])
    assert result.exit_code == 2
    assert f"{f}:1: not valid JSON" in result.output and "missing: no such file or folder" in result.output
    assert not (tmp_path / "site").exists()


def test_doctests_of_the_view_modules():
    import doctest

    import omnidecision.view.render as render
    import omnidecision.view.timeline as timeline

    for module in (render, timeline):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_write_view_is_the_demo_hook(runs: Runs, tmp_path: Path):
    """`write_view(eval_dirs, out_dir)`: what the demo calls on its eval folders; returns index.html."""
    from omnidecision.view import write_view

    index = write_view((p for p in (runs.ledger_eval, runs.react_eval)), tmp_path / "view")
    assert index == tmp_path / "view" / "index.html" and index.is_file()
    data = rows_of(index.parent)
    assert [s["label"] for s in data["sources"]] == ["teacher", "react"]
    assert len(data["rows"]) == len(records_of(runs.ledger_eval)) + len(records_of(runs.react_eval))
    assert len(list((index.parent / "pairs").glob("*.html"))) == len(records_of(runs.ledger_eval))


def _png(path: Path) -> Path:
    """A real PNG (matplotlib's): the index links what it copied."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path)
    plt.close(fig)
    return path


def test_a_figure_heads_the_index_and_an_index_only_refresh_keeps_the_pages(runs: Runs, tmp_path: Path):
    """`--figure` (the demo's forest plot) is copied into the site and shown on the index; `pages=False` (how the
    demo adds its plot after the view step) rewrites the index without touching a run page."""
    from omnidecision.view import write_view

    out = tmp_path / "view"
    result = CliRunner().invoke(app, ["view", str(runs.ledger_eval), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert 'id="figures"' not in (out / "index.html").read_text("utf-8")
    page = next((out / "run").rglob("*.html"))
    page.write_text("left as it was", "utf-8")  # a rewrite of the pages would replace this
    plot = _png(tmp_path / "contrasts.png")
    write_view([runs.ledger_eval], out, figures=[plot], pages=False)
    index = (out / "index.html").read_text("utf-8")
    assert 'id="figures"' in index and 'src="assets/figures/contrasts.png"' in index
    assert (out / "assets/figures/contrasts.png").read_bytes() == plot.read_bytes()
    assert page.read_text("utf-8") == "left as it was"
    assert len(rows_of(out)["rows"]) == len(records_of(runs.ledger_eval))  # the run list is still complete
    # the CLI takes the same figure; a missing one is refused before anything is written
    result = CliRunner().invoke(app, ["view", str(runs.ledger_eval), "--figure", str(plot), "--out", str(out / "b")])
    assert result.exit_code == 0 and 'src="assets/figures/contrasts.png"' in (out / "b/index.html").read_text("utf-8")
    result = CliRunner().invoke(app, ["view", str(runs.ledger_eval), "--figure", str(tmp_path / "nope.png"),
                                      "--out", str(out / "c")])
    assert result.exit_code != 0 and "nope.png" in result.output and not (out / "c").exists()


def test_the_demo_summary_puts_its_forest_plot_on_the_view_index(runs: Runs, tmp_path: Path):
    """pipeline/summary.py: the plan's view step wrote the site before the plot existed; summarising adds it."""
    from omnidecision.pipeline.plan import Step
    from omnidecision.pipeline.summary import _view_figures

    site = tmp_path / "view"
    argv = ["view", str(runs.ledger_eval), str(runs.react_eval), "--out", str(site)]
    plan = [Step("view", argv, [str(runs.ledger_eval), str(runs.react_eval)], [str(site)], group="report")]
    plot = tmp_path / "contrasts.png"
    _view_figures(plan, plot)  # no plot, no site: nothing to do, nothing written
    assert not site.exists()
    assert CliRunner().invoke(app, argv).exit_code == 0
    _view_figures(plan, _png(plot))
    assert 'src="assets/figures/contrasts.png"' in (site / "index.html").read_text("utf-8")
    assert [s["label"] for s in rows_of(site)["sources"]] == ["teacher", "react"]
