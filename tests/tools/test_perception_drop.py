"""Degraded perception (`agent.settings.perception_drop`): a perception tool returns nothing usable with probability p,
drawn once per (task, tool); web search is never dropped; p = 0 changes nothing.

    .venv/bin/pytest tests/tools/test_perception_drop.py -q
"""

from __future__ import annotations

import asyncio

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.ledger.schema import PERCEPTION_TOOLS
from omnidecision.tools.registry import build_tool_context, perception_dropped, run_tool


def _subtitles(task, **settings):
    ctx = build_tool_context(task, settings=settings)
    return asyncio.run(run_tool("subtitle_grounding", {"query": "lighthouse built"}, ctx))


def test_drop_all_and_none(media_task):
    clean = _subtitles(media_task)
    assert clean.ok and "1887" in clean.text and "perception_dropped" not in clean.fields
    assert _subtitles(media_task, perception_drop=0.0) == clean
    dropped = _subtitles(media_task, perception_drop=1.0)
    assert dropped.ok and dropped.fields["perception_dropped"] is True
    assert "1887" not in dropped.text and dropped.fields["matches"] == []


def test_web_is_never_dropped(web_task):
    ctx = build_tool_context(web_task, settings={"perception_drop": 1.0})
    obs = asyncio.run(run_tool("web_search", {"query": "lighthouse designed"}, ctx))
    assert obs.ok and "perception_dropped" not in obs.fields and "Thomas Reed" in obs.text


def test_draws_are_per_task_and_tool_and_near_p():
    ids = [f"syn-{i}" for i in range(2000)]
    for p in (0.2, 0.5):
        for tool in PERCEPTION_TOOLS:
            share = sum(perception_dropped(t, tool, p) for t in ids) / len(ids)
            assert share == pytest.approx(p, abs=0.04), (p, tool, share)
    # deterministic: the same (task, tool) gives the same answer every time; tools are drawn independently
    first = [perception_dropped(t, "audio_scouting", 0.5) for t in ids]
    assert first == [perception_dropped(t, "audio_scouting", 0.5) for t in ids]
    assert first != [perception_dropped(t, "subtitle_grounding", 0.5) for t in ids]
    # a higher p drops a superset (one uniform draw per (task, tool)), and the seed changes the draws
    assert all(perception_dropped(t, "audio_scouting", 0.7) for t, d in zip(ids, first, strict=True) if d)
    assert first != [perception_dropped(t, "audio_scouting", 0.5, seed=1) for t in ids]


def test_recipe_field_reaches_the_tools():
    cfg = AgentConfig.model_validate({"settings": {"perception_drop": 0.3, "perception_drop_seed": 2}})
    assert cfg.tool_settings().perception_drop == 0.3 and cfg.tool_settings().perception_drop_seed == 2
    assert AgentConfig().model_dump()["settings"] == {}  # the default leaves config digests of old runs unchanged
    with pytest.raises(ValueError, match="perception_drop"):
        AgentConfig.model_validate({"settings": {"perception_drop": 1.5}})
