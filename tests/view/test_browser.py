"""The viewer in a real headless Chromium: no console errors, filters and pages change the visible rows, a run page
shows every step, a side-by-side page shows both planners, nothing but local files is requested. Screenshots go to
test-artifacts/view/ (gitignored; OMNIDECISION_TEST_ARTIFACTS moves it).

    .venv/bin/pytest -q tests/view/test_browser.py
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from omnidecision.rollout.store import read_records
from omnidecision.view import write_view
from omnidecision.view.render import slug
from omnidecision.view.timeline import build, time_window

from .conftest import Page, Runs


def all_records(runs: Runs) -> list[tuple[str, object]]:
    """(source label, record) for every run, read with the store's own reader (not the viewer's)."""
    labels = ["teacher", "react", "collect", "rejected"]
    out = []
    for label, path in zip(labels, runs.all, strict=True):
        files = sorted(path.glob("trajectories*.jsonl")) if path.is_dir() else [path]
        out += [(label, r) for f in files for _, r in read_records(f)]
    return out


def visible(p: Page) -> list[dict[str, str]]:
    return p.page.eval_on_selector_all(
        "#rows tr.run", "trs => trs.map(t => ({outcome: t.dataset.outcome, correct: t.dataset.correct, "
                        "planner: t.dataset.planner, task: t.cells[0].textContent}))")


def count_text(p: Page) -> str:
    return p.page.inner_text("#count")


def open_page(p: Page, path: Path) -> None:
    p.page.goto(path.resolve().as_uri())
    p.page.wait_for_load_state("load")


def assert_clean(p: Page) -> None:
    assert p.errors == [], p.errors
    bad = [u for u in p.requests if not u.startswith(("file:", "data:"))]
    assert p.requests and bad == [], bad


def judged(r) -> str:
    return "unjudged" if r.judge is None or r.judge.correct is None else ("correct" if r.judge.correct else "wrong")


def test_index_filters_and_pages_change_the_visible_rows(site: Path, runs: Runs, page: Page, artifacts: Path):
    recs = all_records(runs)
    open_page(page, site / "index.html")
    page.page.wait_for_selector("body[data-ready='1']")
    page.page.screenshot(path=str(artifacts / "index.png"), full_page=True)
    # first page: 100 rows at most, all runs counted
    assert len(visible(page)) == min(100, len(recs))
    assert f"of {len(recs)}" in count_text(page)
    # each filter shows exactly the runs that match, and changes what is visible
    outcomes = Counter(r.outcome for _, r in recs)
    assert len(outcomes) >= 2, f"need two outcomes to filter on: {outcomes}"
    rare = min(outcomes, key=outcomes.get)
    page.page.select_option("#f-outcome", rare)
    rows = visible(page)
    assert len(rows) == outcomes[rare] and {r["outcome"] for r in rows} == {rare}
    page.page.select_option("#f-outcome", "")
    page.page.select_option("#f-planner", label=f"react ({sum(1 for lab, _ in recs if lab == 'react')})")
    rows = visible(page)
    assert len(rows) == sum(1 for lab, _ in recs if lab == "react") > 0
    assert {r["planner"] for r in rows} == {"react"}
    page.page.select_option("#f-correct", "wrong")
    want = sorted(r.task_id for lab, r in recs if lab == "react" and judged(r) == "wrong")
    assert sorted(r["task"] for r in visible(page)) == want
    page.page.click("#f-reset")
    level = sorted({r.level for _, r in recs})[0]
    page.page.select_option("#f-level", level)
    assert len(visible(page)) == min(100, sum(1 for _, r in recs if r.level == level))
    page.page.select_option("#f-level", "")
    category = sorted({r.category for _, r in recs})[-1]
    page.page.select_option("#f-category", category)
    assert {r["task"] for r in visible(page)} == {r.task_id for _, r in recs if r.category == category}
    page.page.click("#f-reset")
    page.page.fill("#f-text", recs[0][1].task_id)
    assert {r["task"] for r in visible(page)} == {recs[0][1].task_id}
    page.page.click("#f-reset")
    # pages: 50 a page, the next page holds the rest
    page.page.select_option("#f-size", "50")
    first = visible(page)
    assert len(first) == 50 < len(recs)
    page.page.click("#next")
    second = visible(page)
    assert len(second) == min(50, len(recs) - 50) and second != first
    assert "page 2/" in count_text(page)
    # the filter state survives going to a run page and back (it lives in the URL hash)
    page.page.select_option("#f-outcome", rare)
    page.page.click("#rows tr.run td a")
    page.page.wait_for_selector("article.step, #ending")
    page.page.go_back()
    page.page.wait_for_selector("body[data-ready='1']")
    assert {r["outcome"] for r in visible(page)} == {rare}
    assert_clean(page)


def test_run_page_shows_every_step_and_the_ledger(site: Path, runs: Runs, page: Page, artifacts: Path):
    recs = [r for lab, r in all_records(runs) if lab == "collect"]
    rec = max(recs, key=lambda r: (len(r.steps), r.task_id))  # the longest run of the collection
    open_page(page, site / "run" / "2" / f"{slug(rec.task_id)}-s{rec.sample}.html")
    page.page.screenshot(path=str(artifacts / "run.png"), full_page=True)
    steps = page.page.eval_on_selector_all("article.step", "els => els.map(e => e.dataset.step)")
    assert steps == [str(s.step) for s in rec.steps] and len(steps) >= 3
    assert page.page.inner_text("h1.question") == rec.question
    # the needs grid: a row per need, a column per committed state (after decompose, then after each step)
    last = rec.final_ledger
    grid = page.page.eval_on_selector_all("#grid table.grid tbody tr", "trs => trs.map(t => t.cells.length)")
    assert len(grid) == len(last.needs)
    extra = 1 if rec.final_events else 0
    assert set(grid) == {2 + 1 + len(rec.steps) + extra}  # need + role + init + steps (+ end)
    # every evidence atom is marked new, with its source and time window, in the ledger after the step that added it
    view = build(rec)
    assert last.evidence, "the longest run found no evidence"
    for atom in last.evidence:
        step = next(s for s in view.steps if atom.id in s.new_evidence)
        row = page.page.locator(f"#step-{step.record.step} .ledger table.evidence tr.new").nth(
            sorted(step.new_evidence).index(atom.id)).text_content()
        assert atom.claim in row and atom.source.tool in row and time_window(atom.source) in row
    assert page.page.inner_text("#ending")
    assert rec.outcome in page.page.inner_text("#ending")
    assert_clean(page)


def test_rejected_step_and_side_by_side_page(site: Path, runs: Runs, page: Page, artifacts: Path):
    rec = next(r for lab, r in all_records(runs) if lab == "rejected")
    open_page(page, site / "run" / "3" / f"{slug(rec.task_id)}-s{rec.sample}.html")
    first = page.page.locator(f"#step-{rec.steps[0].step}")
    assert "rejected" in first.get_attribute("class")
    assert rec.steps[0].invalid in first.inner_text()
    # its side-by-side page with the ledger eval: both planners, their outcomes, links back to both run pages
    page.page.click("a.pairlink >> text=side by side with teacher")
    page.page.wait_for_selector(".pair")
    page.page.screenshot(path=str(artifacts / "pair.png"), full_page=True)
    sides = page.page.eval_on_selector_all(".side", "els => els.map(e => e.dataset.planner)")
    assert sides == ["teacher", "rejected"]
    assert page.page.locator(".side").nth(1).locator("li.rejected").count() >= 1
    page.page.click(".side >> nth=0 >> text=full run")
    page.page.wait_for_selector("article.step")
    assert page.page.url.endswith(f"/run/0/{slug(rec.task_id)}-s{rec.sample}.html")
    assert_clean(page)


HOSTILE = '<img src="https://evil.example/x.png" onerror="document.title=1"></td><script>window.pwned=1</script>'


def test_markup_in_run_data_is_shown_as_text(runs: Runs, page: Page, tmp_path: Path):
    """Questions, answers and observations are data: a run carrying markup renders it as text, loads nothing."""
    lines = [json.loads(x) for x in (runs.ledger_eval / "trajectories.jsonl").read_text("utf-8").splitlines()]
    # a run with an observation (the file's order is the order runs finished in)
    line = next(x for x in lines if any(s.get("observation") for s in x["steps"]))
    line["question"] = "Q " + HOSTILE
    line["answer"] = HOSTILE
    step = next(s for s in line["steps"] if s.get("observation"))
    step["observation"]["text"] = HOSTILE
    f = tmp_path / "hostile.jsonl"
    f.write_text(json.dumps(line) + "\n", "utf-8")
    index = write_view([f], tmp_path / "site")
    open_page(page, index)
    page.page.wait_for_selector("body[data-ready='1']")
    assert HOSTILE in page.page.inner_text("#rows")
    page.page.click("#rows tr.run td a")
    page.page.wait_for_selector("article.step")
    assert page.page.inner_text("h1.question") == "Q " + HOSTILE
    assert HOSTILE in page.page.inner_text("pre.obs")
    assert page.page.locator("main img, main script").count() == 0
    assert page.page.evaluate("window.pwned === undefined && document.title !== '1'")
    assert_clean(page)
