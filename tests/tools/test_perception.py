"""Subtitle, audio, clip and frame tools on real .srt/.vtt files and captions; real av decoding of a tiny video."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from omnidecision.tasks.schema import Asset, Task
from omnidecision.tools.base import DecodedFrame, Observation
from omnidecision.tools.registry import build_tool_context, run_tool

from .videos import write_gray_video


def run(name, args, task, services=None, settings=None):
    return asyncio.run(run_tool(name, args, build_tool_context(task, services, settings)))


def test_subtitles_multiword_query_ranks_best_cue(media_task):
    obs = run("subtitle_grounding", {"query": "year the old lighthouse was built"}, media_task)
    assert obs.ok, obs.error
    best = obs.fields["matches"][0]
    assert "1887" in best["text"] and (best["start"], best["end"]) == (5.0, 8.0)
    assert obs.source.asset_id == "v1" and (obs.source.start, obs.source.end) == (5.0, 8.0)
    assert "[5.00-8.00s]" in obs.text


def test_subtitles_time_window_and_case(media_task):
    obs = run("subtitle_grounding", {"query": "LIGHTHOUSE", "start": 15, "end": 30}, media_task)
    assert [m["text"] for m in obs.fields["matches"]] == ["The lighthouse keeper retired in 1962."]
    obs = run("subtitle_grounding", {"query": "", "start": 9, "end": 13}, media_task)  # window listing
    assert [m["start"] for m in obs.fields["matches"]] == [10.0]
    obs = run("subtitle_grounding", {"query": "submarine"}, media_task)
    assert obs.ok and obs.fields["matches"] == [] and "No subtitle cue" in obs.text


def test_subtitles_errors(media_task):
    obs = run("subtitle_grounding", {"query": "x", "asset_id": "nope"}, media_task)
    assert not obs.ok and "asset_id" in obs.error and "v1" in obs.error
    obs = run("subtitle_grounding", {"query": "x", "start": 10, "end": 5}, media_task)
    assert not obs.ok and "end" in obs.error
    broken = media_task.model_copy(deep=True)
    broken.assets[0].subtitles = "gone.srt"
    obs = run("subtitle_grounding", {"query": "x"}, broken)
    assert not obs.ok and "gone.srt" in obs.error


def test_audio_searches_transcript_and_events(media_task):
    obs = run("audio_scouting", {"query": "when does the ferry depart"}, media_task)
    assert obs.ok and obs.fields["matches"][0]["text"] == "The ferry departs at seven thirty."
    obs = run("audio_scouting", {"query": "ship horn"}, media_task)
    texts = [m["text"] for m in obs.fields["matches"]]
    assert "(sound) ship horn blast" in texts and "Listen to the ship horn." in texts
    obs = run("audio_scouting", {"query": "seagull", "start": 25, "end": 35}, media_task)
    assert [m["text"] for m in obs.fields["matches"]] == ["(sound) seagulls screaming"]


class RecordingMedia:
    """The boundary of an external multimodal API: records what it is sent and answers something fixed."""

    def __init__(self, answer: str | None = "seen"):
        self.frames: list[DecodedFrame] = []
        self.calls: list[tuple] = []
        self.answer = answer

    async def perceive(self, tool, asset, query, start=None, end=None):
        self.calls.append((tool, asset.id, query, start, end))
        return None if self.answer is None else Observation(tool="x", text=self.answer)

    async def perceive_frames(self, tool, asset, query, frames):
        self.frames.extend(frames)
        self.calls.append((tool, asset.id, query, [f.requested_t for f in frames]))
        return Observation(tool=tool, text=self.answer or "")


def test_audio_delegates_to_media_service_and_falls_back(media_task):
    media = RecordingMedia("a dog barks at 3s")
    obs = run("audio_scouting", {"query": "dog", "start": 1, "end": 5}, media_task, {"media": media})
    assert obs.ok and obs.text == "a dog barks at 3s" and obs.tool == "audio_scouting"
    assert media.calls == [("audio_scouting", "v1", "dog", 1.0, 5.0)]
    declining = RecordingMedia(None)
    obs = run("audio_scouting", {"query": "ferry"}, media_task, {"media": declining})
    assert obs.ok and "ferry" in obs.fields["matches"][0]["text"]


def test_clip_grounding_from_captions_merges_adjacent(media_task):
    obs = run("clip_grounding", {"query": "the red lighthouse"}, media_task)
    assert obs.ok, obs.error
    best = obs.fields["moments"][0]
    assert len(best["captions"]) == 2 and best["start"] == 1.0 and best["end"] == 5.0
    obs = run("clip_grounding", {"query": "seagulls flying over water", "start": 5}, media_task)
    assert obs.fields["moments"][0]["captions"] == ["seagulls over the water"]


def test_frame_confirmation_offline(media_task):
    obs = run("frame_confirmation", {"query": "red lighthouse", "t": 2.4}, media_task)
    assert obs.ok and obs.fields["confirmed"] and obs.fields["t"] == 2
    obs = run("frame_confirmation", {"query": "a green submarine", "t": 6}, media_task)
    assert obs.ok and not obs.fields["confirmed"] and "not visible" in obs.text
    obs = run("frame_confirmation", {"query": "boats", "t": 60}, media_task)
    assert not obs.ok and "t:" in obs.error
    obs = run("frame_confirmation", {"query": "woman blue jacket"}, media_task)
    assert obs.fields["confirmed"] and obs.source.start == 5.0


@pytest.fixture
def tiny_video(tmp_path: Path) -> Path:
    """20 frames at 10 fps; frame i is a flat gray of level 10 * i (so the decoded frame identifies itself)."""
    return write_gray_video(tmp_path / "tiny.mp4", frames=20, step=10, gop_size=5, qmin=1, qmax=3)


def _gray(jpeg: bytes) -> float:
    from io import BytesIO

    from PIL import Image

    return float(np.asarray(Image.open(BytesIO(jpeg)).convert("L")).mean())


def test_frame_confirmation_decodes_real_frames_at_timestamps(tiny_video: Path):
    task = Task(id="v", question="?", assets=[Asset(id="clip", type="video", path=str(tiny_video))])
    media = RecordingMedia("a gray square")
    for t in (0.0, 0.7, 1.2, 1.9):
        obs = run("frame_confirmation", {"query": "gray", "t": t}, task, {"media": media})
        assert obs.ok and obs.text == "a gray square"
    got = [(f.requested_t, f.t, round(_gray(f.jpeg) / 10)) for f in media.frames]
    assert got == [(0.0, 0.0, 0), (0.7, 0.7, 7), (1.2, 1.2, 12), (1.9, 1.9, 19)]
    assert all(f.width == 64 and f.height == 48 for f in media.frames)


def test_clip_grounding_sends_evenly_spaced_frames(tiny_video: Path):
    task = Task(id="v", question="?", assets=[Asset(id="clip", type="video", path=str(tiny_video))])
    media = RecordingMedia("moment at 1s")
    obs = run("clip_grounding", {"query": "brightest", "frames": 4}, task, {"media": media})
    assert obs.ok and media.calls[0][3] == [0.25, 0.75, 1.25, 1.75]
    assert [round(_gray(f.jpeg) / 10) for f in media.frames] == [3, 8, 13, 18]  # first frame at or after t
