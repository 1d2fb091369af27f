"""Keyword ranking, BM25 search over pages + corpus, the domain block list, corpus caching and corpus errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from omnidecision.tools.registry import build_tool_context, run_tool
from omnidecision.tools.search import CorpusError, corpus_index, is_blocked, load_corpus
from omnidecision.tools.text import rank


def test_rank_scores_token_overlap_not_substring():
    docs = ["The old lighthouse was built in 1887.", "Our guide is Maria.", "Lighthouses are built on rocks"]
    ranked = rank("year the old lighthouse was built", docs)
    assert [i for i, _ in ranked] == [0, 2]
    assert ranked[0][1] > ranked[1][1]
    assert rank("submarine", docs) == []


def test_web_search_finds_pages_and_corpus_and_blocks_domains(web_task):
    ctx = build_tool_context(web_task)
    obs = asyncio.run(run_tool("web_search", {"query": "lighthouse built year"}, ctx))
    assert obs.ok, obs.error
    urls = [h["url"] for h in obs.fields["hits"]]
    assert "https://en.wikipedia.org/wiki/Harbour_Lighthouse" in urls
    assert not any("example.com" in u for u in urls), "blocked benchmark host leaked into results"
    assert obs.source is not None and obs.source.url == urls[0]
    obs = asyncio.run(run_tool("web_search", {"query": "who designed the lighthouse engineer"}, ctx))
    assert obs.fields["hits"][0]["url"] == "https://history.example.org/keepers"  # the task's own page
    assert "Thomas Reed" in obs.fields["hits"][0]["snippet"]


def test_block_list_from_settings_too(web_task):
    ctx = build_tool_context(web_task, settings={"blocked_domains": ["wikipedia.org"]})
    obs = asyncio.run(run_tool("web_search", {"query": "lighthouse built 1887"}, ctx))
    assert all("wikipedia" not in h["url"] and "example.com" not in h["url"] for h in obs.fields["hits"])
    assert is_blocked("https://www.en.wikipedia.org/x", ["wikipedia.org"])
    assert not is_blocked("https://notwikipedia.org/x", ["wikipedia.org"])


def test_no_results_is_an_ok_empty_observation(web_task):
    obs = asyncio.run(run_tool("web_search", {"query": "quantum chromodynamics"}, build_tool_context(web_task)))
    assert obs.ok and obs.fields["hits"] == []


def test_page_reader_by_url_by_keywords_and_blocked(web_task):
    ctx = build_tool_context(web_task)
    obs = asyncio.run(run_tool("page_reader", {"url": "https://ferries.example.org/timetable/"}, ctx))
    assert obs.ok and "7:30" in obs.text and obs.source.url == "https://ferries.example.org/timetable"
    obs = asyncio.run(run_tool("page_reader", {"url": "island ferry timetable"}, ctx))
    assert obs.ok and "7:30" in obs.text and obs.fields["requested"] == "island ferry timetable"
    obs = asyncio.run(run_tool("page_reader", {"url": "https://quiz.example.com/answers/lighthouse"}, ctx))
    assert not obs.ok and "blocked" in obs.error
    obs = asyncio.run(run_tool("page_reader", {"url": "https://nowhere.org/zzz qqq"}, ctx))
    assert not obs.ok and "no page" in obs.error


def test_corpus_indexed_once_for_many_tasks(web_task, corpus_file):
    first = corpus_index(corpus_file)
    for i in range(50):
        build_tool_context(web_task.model_copy(update={"id": f"w{i}"}))
    assert corpus_index(corpus_file) is first


def test_bad_corpus_names_file_line_and_field(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"url": "https://a.org", "text": "ok"}\n{"url": "https://b.org"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad.jsonl:2: .*text"):
        load_corpus(bad)
    bad.write_text('{"url": "https://a.org", "text": "ok"}\n{oops\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad.jsonl:2: not valid JSON"):
        load_corpus(bad)
