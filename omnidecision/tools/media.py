"""Helpers shared by the perception tools: assets, subtitle/transcript cues (pysubs2), frame decoding and audio
segment extraction (PyAV), image loading (Pillow), and the hand-off to a "media" service (a multimodal model or the
OmniGAIA replay environment).

    python -m omnidecision.tools.media VIDEO.mp4 0.5 1.0   # decode frames at 0.5 s and 1.0 s, print their times
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pysubs2
from pydantic import BaseModel, ConfigDict, Field, model_validator

from omnidecision.tasks.schema import Asset
from omnidecision.tools.base import DecodedFrame, Observation, ToolContext, ToolError
from omnidecision.tools.text import rank

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    text: str


def get_asset(ctx: ToolContext, asset_id: str | None, prefer: tuple[str, ...] = ()) -> Asset:
    """The named asset; without a name, the first asset of the most preferred type (e.g. audio before video for
    audio scouting), so a planner's short form `{"action": "call", "need": i}` does not hit an image on a
    multi-asset task."""
    asset = None
    if asset_id is None and prefer:
        asset = next((a for kind in prefer for a in ctx.task.assets if a.type == kind), None)
    asset = asset or ctx.task.asset(asset_id)
    if asset is None:
        known = ", ".join(a.id for a in ctx.task.assets) or "none"
        raise ToolError(f"asset_id: no asset {asset_id!r} in task {ctx.task.id} (assets: {known})")
    return asset


def media_file(ctx: ToolContext, asset: Asset) -> Path | None:
    """The asset's media file when it exists on disk, else None (offline surrogates are used instead)."""
    path = ctx.task.resolve(asset.path)
    return path if path is not None and path.is_file() else None


_CUE_CACHE: dict[tuple[str, int], list[Cue]] = {}
_CUE_LOCK = threading.Lock()


def load_cues(path: Path) -> list[Cue]:
    """Cues of an .srt/.vtt (any format pysubs2 reads), cached by path and mtime."""
    if not path.is_file():
        raise ToolError(f"subtitle file not found: {path}")
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    with _CUE_LOCK:
        if key in _CUE_CACHE:
            return _CUE_CACHE[key]
    try:
        subs = pysubs2.load(str(path), encoding="utf-8")
    except Exception as exc:  # pysubs2 raises several types for unreadable files
        raise ToolError(f"cannot parse subtitles {path}: {exc}") from None
    cues = [
        Cue(ev.start / 1000.0, ev.end / 1000.0, ev.plaintext.replace("\n", " ").strip())
        for ev in subs
        if not ev.is_comment and ev.plaintext.strip()
    ]
    with _CUE_LOCK:
        _CUE_CACHE[key] = cues
    return cues


def in_window(start: float, end: float, lo: float | None, hi: float | None) -> bool:
    """Does [start, end] overlap the window [lo, hi] (either side open)?"""
    return (lo is None or end >= lo) and (hi is None or start <= hi)


def search_cues(cues: list[Cue], query: str, lo: float | None, hi: float | None, k: int) -> list[tuple[Cue, float]]:
    """Best cues for the query inside the window; with an empty query, the window's cues in time order."""
    window = [c for c in cues if in_window(c.start, c.end, lo, hi)]
    if not query.strip():
        return [(c, 1.0) for c in window[: max(k, 20)]]
    return [(window[i], score) for i, score in rank(query, [c.text for c in window], k)]


def fmt_span(start: float, end: float) -> str:
    return f"[{start:.2f}-{end:.2f}s]"


def video_duration(path: Path) -> float | None:
    import av

    with av.open(str(path)) as container:
        if container.duration is not None:
            return container.duration / 1_000_000
        stream = container.streams.video[0]
        if stream.duration is not None and stream.time_base is not None:
            return float(stream.duration * stream.time_base)
    return None


def decode_frames(path: Path, timestamps: list[float], max_side: int = 512) -> list[DecodedFrame]:
    """Decode the frame shown at each timestamp (the first frame whose time is >= t, or the last one) as JPEG."""
    import av

    out: list[DecodedFrame] = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        tb = stream.time_base
        offset = float(stream.start_time * tb) if stream.start_time is not None and tb is not None else 0.0
        for t in timestamps:
            container.seek(int((t + offset) / tb), stream=stream, backward=True, any_frame=False)
            chosen = None
            for frame in container.decode(stream):
                if frame.time is None:
                    continue
                chosen = frame
                if frame.time - offset >= t - 1e-6:
                    break
            if chosen is None:
                raise ToolError(f"no frame decodable at {t:.2f}s in {path}")
            image = chosen.to_image()
            image.thumbnail((max_side, max_side))
            buf = io.BytesIO()
            image.save(buf, format="JPEG", quality=85)
            out.append(DecodedFrame(t, round(chosen.time - offset, 4), buf.getvalue(), image.width, image.height))
    return out


def audio_segment_wav(path: Path, start: float | None = None, end: float | None = None, max_s: float = 30.0,
                      sample_rate: int = 16000) -> tuple[bytes, float, float]:
    """The audio of [start, end] (capped at `max_s` seconds) of any file PyAV reads (a video's sound track too), as a
    mono 16-bit WAV at `sample_rate`. Returns (wav bytes, actual start, actual end)."""
    import av

    lo = max(0.0, start or 0.0)
    hi = lo + max_s if end is None else min(end, lo + max_s)
    out_buf = io.BytesIO()
    with av.open(str(path)) as container:
        if not container.streams.audio:
            raise ToolError(f"{path.name}: no audio stream")
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="s16", layout="mono", rate=sample_rate)
        if lo > 0 and stream.time_base is not None:
            container.seek(int(lo / stream.time_base), stream=stream, backward=True)
        with av.open(out_buf, mode="w", format="wav") as out:
            ostream = out.add_stream("pcm_s16le", rate=sample_rate, layout="mono")
            first = last = None
            for frame in container.decode(stream):
                if frame.time is None:
                    continue
                f_end = frame.time + frame.samples / frame.sample_rate
                if f_end < lo:
                    continue
                if frame.time > hi:
                    break
                first = frame.time if first is None else first
                last = f_end
                frame.pts = None  # let the encoder number the resampled frames
                for rf in resampler.resample(frame):
                    for packet in ostream.encode(rf):
                        out.mux(packet)
            for packet in ostream.encode(None):
                out.mux(packet)
    if first is None:
        raise ToolError(f"{path.name}: no audio between {lo:.2f}s and {hi:.2f}s")
    return out_buf.getvalue(), round(max(lo, first), 3), round(min(hi, last or hi), 3)


def image_jpeg(path: Path, max_side: int = 768) -> tuple[bytes, int, int]:
    """An image file as JPEG bytes, its longer side at most `max_side` (Pillow). Returns (bytes, width, height)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            rgb = image.convert("RGB")
    except OSError as exc:
        raise ToolError(f"{path.name}: not a readable image ({exc})") from None
    rgb.thumbnail((max_side, max_side))
    buf = io.BytesIO()
    rgb.save(buf, format="JPEG", quality=85)
    return buf.getvalue(), rgb.width, rgb.height


async def ask_media(
    ctx: ToolContext,
    tool: str,
    asset: Asset,
    query: str,
    start: float | None = None,
    end: float | None = None,
    frame_times: list[float] | None = None,
) -> Observation | None:
    """Hand the request to the "media" service, if any: decoded frames when the asset is a real video and the
    service looks at frames, else `perceive`. None means: use the offline surrogates."""
    service: Any = ctx.services.get("media")
    if service is None:
        return None
    path = media_file(ctx, asset)
    if path is not None:  # the service sees the file where it is, whatever the task's base folder
        asset = asset.model_copy(update={"path": str(path)})
    if frame_times is not None and path is not None and asset.type == "video" and hasattr(service, "perceive_frames"):
        frames = decode_frames(path, frame_times, ctx.settings.frame_max_side)
        obs = await service.perceive_frames(tool, asset, query, frames)
        if obs is None:  # a service that does not look at frames may take the window another way (video)
            obs = await service.perceive(tool, asset, query, start, end)
    else:
        obs = await service.perceive(tool, asset, query, start, end)
    if obs is not None and obs.tool != tool:
        obs = obs.model_copy(update={"tool": tool})
    return obs


class WindowArgs(BaseModel):
    """A query (keywords or a description), an optional asset and an optional time window in seconds."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field("", max_length=2000, description="keywords or a description to look for")
    asset_id: str | None = Field(None, description="which asset; default: the task's first asset")
    start: float | None = Field(None, ge=0, description="window start (s)")
    end: float | None = Field(None, ge=0, description="window end (s)")
    k: int = Field(5, ge=1, le=50, description="how many matches to return")

    @model_validator(mode="after")
    def _window(self) -> WindowArgs:
        if self.start is not None and self.end is not None and self.end < self.start:
            raise ValueError("end: must not be before start")
        return self


class MediaTool:
    """A perception tool on one asset (audio_scouting, clip_grounding, frame_confirmation): the "media" service
    answers first (shown the decoded frames at `frame_times`, else asked about the window); without one, or when it
    declines, the asset's text surrogates answer (`surrogate`)."""

    name: str  # set by @register_tool
    prefer: tuple[str, ...] = ()  # the asset types looked at when the call names none, the most preferred first

    def frame_times(self, args: Any, ctx: ToolContext, asset: Asset) -> list[float] | None:
        """The timestamps to decode and show the service; None: no frames (the service gets the window)."""
        return None

    def surrogate(self, args: Any, ctx: ToolContext, asset: Asset) -> Observation:
        """The answer from the asset's text surrogates (transcripts, captions, labelled events)."""
        raise NotImplementedError

    async def run(self, args: Any, ctx: ToolContext) -> Observation:
        asset = get_asset(ctx, args.asset_id, prefer=self.prefer)
        obs = await ask_media(ctx, self.name, asset, args.query, args.start, args.end,
                              frame_times=self.frame_times(args, ctx, asset))
        return obs if obs is not None else self.surrogate(args, ctx, asset)


if __name__ == "__main__":
    for f in decode_frames(Path(sys.argv[1]), [float(x) for x in sys.argv[2:]]):
        print(f"requested {f.requested_t:.3f}s -> frame at {f.t:.3f}s ({f.width}x{f.height}, {len(f.jpeg)} bytes)")
