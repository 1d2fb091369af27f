"""Small real assets for the tool tests: an .srt, a .vtt transcript, frame captions, pages and a corpus; a video
and a WAV written with PyAV / wave."""

from __future__ import annotations

import json
import wave
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from omnidecision.tasks.schema import Asset, AudioEvent, FrameCaption, Page, Task

SRT = """1
00:00:01,000 --> 00:00:03,500
Welcome to the harbour tour.

2
00:00:05,000 --> 00:00:08,000
The old lighthouse was built in 1887.

3
00:00:10,000 --> 00:00:12,000
Our guide today is Maria Lopez.

4
00:00:20,000 --> 00:00:23,000
The lighthouse keeper retired in 1962.
"""

VTT = """WEBVTT

00:00:02.000 --> 00:00:04.000
Listen to the ship horn.

00:00:15.000 --> 00:00:18.500
The ferry departs at seven thirty.
"""


@pytest.fixture
def media_task(tmp_path: Path) -> Task:
    (tmp_path / "tour.srt").write_text(SRT, encoding="utf-8")
    (tmp_path / "speech.vtt").write_text(VTT, encoding="utf-8")
    asset = Asset(
        id="v1",
        type="video",
        path="missing.mp4",
        subtitles="tour.srt",
        transcript="speech.vtt",
        audio_events=[
            AudioEvent(start=30, end=32, label="seagulls screaming"),
            AudioEvent(start=40, end=41, label="ship horn blast"),
        ],
        frame_captions=[
            FrameCaption(t=0, caption="a harbour with fishing boats"),
            FrameCaption(t=2, caption="a red lighthouse on a rocky point"),
            FrameCaption(t=4, caption="close-up of the red lighthouse door"),
            FrameCaption(t=6, caption="a woman in a blue jacket speaking"),
            FrameCaption(t=8, caption="seagulls over the water"),
        ],
    )
    return Task(id="t1", question="When was the lighthouse built?", assets=[asset], base_dir=str(tmp_path))


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    pages = [
        {
            "url": "https://en.wikipedia.org/wiki/Harbour_Lighthouse",
            "title": "Harbour Lighthouse",
            "text": "The Harbour Lighthouse is a red tower. It was built in 1887 by the port authority. "
            "It was automated in 1962.",
        },
        {
            "url": "https://quiz.example.com/answers/lighthouse",
            "title": "Benchmark answers",
            "text": "Answer key: the lighthouse was built in 1887.",
        },
        {
            "url": "https://ferries.example.org/timetable",
            "title": "Ferry timetable",
            "text": "The island ferry departs at 7:30 and returns at 18:00 every day.",
        },
        {
            "url": "https://cooking.example.net/bread",
            "title": "Sourdough bread",
            "text": "Knead the dough and let it rise overnight.",
        },
    ]
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in pages) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def web_task(corpus_file: Path) -> Task:
    return Task(
        id="w1",
        question="Who designed the lighthouse?",
        pages=[
            Page(
                url="https://history.example.org/keepers",
                title="Keepers of the light",
                text="The lighthouse was designed by engineer Thomas Reed. Keepers lived there until 1962.",
            )
        ],
        corpus=str(corpus_file),
        blocked_domains=["example.com"],
    )


# ---------------------------------------------------------------- real media files written with PyAV / wave


def _write_video(path: Path, seconds: int = 3, fps: int = 10) -> Path:
    """Frame i is a flat gray of level 8 * i: a decoded frame tells which one it is."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.qmin, stream.codec_context.qmax = 1, 3
        for i in range(seconds * fps):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 8 * i, dtype=np.uint8), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def _write_audio(path: Path, seconds: int = 4, rate: int = 22050) -> Path:
    """A WAV whose second s is a 440 Hz tone of amplitude 0.1 * (s + 1): a cut segment tells where it came from."""
    t = np.arange(seconds * rate) / rate
    samples = (0.1 * (np.floor(t) + 1) * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return path


@pytest.fixture
def write_video():
    """write_video(path, seconds=3, fps=10): an mpeg4 video whose frame i is a flat gray of level 8 * i."""
    return _write_video


@pytest.fixture
def write_audio():
    """write_audio(path, seconds=4): a WAV whose second s is a 440 Hz tone of amplitude 0.1 * (s + 1)."""
    return _write_audio
