"""The synthetic closure suite: determinism, coverage of levels/answer types, well-formed gold decompositions."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from omnidecision.tasks.schema import Task
from omnidecision.tasks.synth import generate, load_suite, write_suite


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_seed_is_byte_identical_and_another_seed_differs(tmp_path):
    write_suite(40, 7, tmp_path / "a")
    write_suite(40, 7, tmp_path / "b")
    write_suite(40, 8, tmp_path / "c")
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert (tmp_path / "a" / "tasks.jsonl").read_bytes() != (tmp_path / "c" / "tasks.jsonl").read_bytes()


def test_cli_writes_the_suite(tmp_path):
    from typer.testing import CliRunner

    from omnidecision.cli import app

    result = CliRunner().invoke(app, ["tasks", "synth", "--n", "12", "--seed", "1", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "wrote 12 tasks" in result.output
    assert len((tmp_path / "tasks.jsonl").read_text().splitlines()) == 12


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> tuple[Path, list[Task]]:
    out = tmp_path_factory.mktemp("synth500")
    write_suite(500, 0, out)
    return out, load_suite(out)


def test_500_tasks_cover_levels_answer_types_and_hard_cases(suite):
    out, tasks = suite
    assert len(tasks) == 500 and len({t.id for t in tasks}) == 500
    assert {t.level for t in tasks} == {"easy", "medium", "hard"}
    assert {t.answer_type for t in tasks} == {"number", "text", "list", "mcq"}
    assert any(not t.answerable for t in tasks)
    assert sum(1 for t in tasks if any(n.conflicting_value for n in t.gold.needs)) >= 20
    assert all(t.source == "synthetic" for t in tasks)
    # hard tasks: two branches joined by a computation
    for t in tasks:
        if t.level == "hard":
            code = [n for n in t.gold.needs if n.preferred_source == "code"]
            assert len(code) == 1 and len(code[0].depends_on) == 2
    # surface forms vary: many distinct question shapes once names are masked out
    shapes = {re.sub(r"\b[A-Z][a-z]+\b|\d+", "X", t.question) for t in tasks}
    assert len(shapes) > 100


def test_gold_is_consistent(suite):
    out, tasks = suite
    for t in tasks:
        gold = t.gold
        assert gold is not None
        for i, need in enumerate(gold.needs):
            assert all(d < i for d in need.depends_on), (t.id, i)
            for ph in re.findall(r"\{#(\d+)\}", need.query_focus):
                assert int(ph) in need.depends_on, (t.id, i, need.query_focus)
            assert need.fillable == (need.value is not None), (t.id, i)
        if t.answerable:
            assert t.answer is not None and all(n.fillable for n in gold.needs if n.role == "blocking")
            if t.answer_type == "mcq":
                assert t.options and t.answer in "ABCD" and len(t.options) == 4
                assert t.options["ABCD".index(t.answer)].split(". ", 1)[1] == gold.slots[-1].value
            if gold.computation:
                env = {f"n{i}": int(n.value) for i, n in enumerate(gold.needs) if n.value and n.value.isdigit()}
                assert str(eval(gold.computation, {"abs": abs, "max": max}, env)) == t.answer
        else:
            assert t.answer is None and any(not n.fillable for n in gold.needs)
        # assets resolve relative to the suite folder
        asset = t.assets[0]
        assert t.resolve(asset.subtitles).is_file() and t.resolve(asset.transcript).is_file()
        assert t.resolve(t.corpus) == out / "corpus.jsonl"


def test_evidence_holds_each_gold_value_verbatim(suite):
    """Every fillable media/web value appears in the task's own evidence (surrogates or corpus)."""
    out, tasks = suite
    corpus = (out / "corpus.jsonl").read_text()
    for t in tasks[:200]:
        asset = t.assets[0]
        media = (t.resolve(asset.subtitles).read_text() + t.resolve(asset.transcript).read_text()
                 + " ".join(e.label for e in asset.audio_events) + " ".join(f.caption for f in asset.frame_captions))
        for need in t.gold.needs:
            if need.value is None or need.preferred_source == "code":
                continue
            haystack = corpus if need.preferred_source == "web" else media
            assert re.search(rf"\b{re.escape(need.value)}\b", haystack), (t.id, need.description, need.value)


def test_generate_is_fast_enough_for_thousands():
    tasks, corpus, files = generate(1000, seed=5)
    assert len(tasks) == 1000 and len(corpus) > 1000 and len(files) == 2000
