"""clip_grounding: find the moment(s) of a video that match a description.

With a real video and a "media" service, frames are decoded with `av` at evenly spaced timestamps of the asked
window and sent as images to the service; offline, the asset's frame captions are ranked against the description
and adjacent matching captions merge into moments.

    omnidecision tool clip_grounding --args '{"query": "a red car turns left"}' --tasks tasks.jsonl --task-id t1
"""

from __future__ import annotations

import logging

from pydantic import Field

from omnidecision.ledger.schema import SourceRef
from omnidecision.tasks.schema import Asset
from omnidecision.tools.base import Observation, ToolContext, ToolError, register_tool
from omnidecision.tools.media import MediaTool, WindowArgs, fmt_span, media_file, video_duration
from omnidecision.tools.text import rank

logger = logging.getLogger(__name__)


class ClipArgs(WindowArgs):
    frames: int | None = Field(None, ge=1, le=64, description="frames to decode with a real video (default 8)")


def sample_times(lo: float, hi: float, n: int) -> list[float]:
    """n timestamps at the centres of n equal parts of [lo, hi].

    >>> sample_times(0, 10, 2)
    [2.5, 7.5]
    """
    step = (hi - lo) / n
    return [round(lo + step * (i + 0.5), 4) for i in range(n)]


def caption_moments(asset: Asset, query: str, lo: float | None, hi: float | None, k: int) -> list[dict]:
    caps = sorted(
        (c for c in asset.frame_captions if (lo is None or c.t >= lo) and (hi is None or c.t <= hi)), key=lambda c: c.t
    )
    if not caps:
        return []
    gaps = [b.t - a.t for a, b in zip(caps, caps[1:], strict=False)]
    half = (min(gaps) / 2) if gaps else 0.5
    scores = dict(rank(query, [c.caption for c in caps])) if query.strip() else {i: 1.0 for i in range(len(caps))}
    moments: list[dict] = []
    for i in sorted(scores):
        c = caps[i]
        last = moments[-1] if moments else None
        if last is not None and last["last_index"] == i - 1:
            last.update(end=round(c.t + half, 3), last_index=i, score=max(last["score"], scores[i]))
            last["captions"].append(c.caption)
        else:
            moments.append(
                {
                    "start": round(max(0.0, c.t - half), 3),
                    "end": round(c.t + half, 3),
                    "captions": [c.caption],
                    "score": scores[i],
                    "last_index": i,
                }
            )
    moments.sort(key=lambda m: (-m["score"], m["start"]))
    for m in moments:
        m.pop("last_index")
    return moments[:k]


@register_tool("clip_grounding")
class ClipGrounding(MediaTool):
    args_model = ClipArgs
    prefer = ("video", "image")

    def frame_times(self, args: ClipArgs, ctx: ToolContext, asset: Asset) -> list[float] | None:
        """`frames` times spread over the window (default: the whole video) of a real video a service looks at."""
        path = media_file(ctx, asset)
        if path is None or asset.type != "video" or "media" not in ctx.services:
            return None
        hi = args.end if args.end is not None else (asset.duration or video_duration(path) or 0.0)
        lo = args.start or 0.0
        return sample_times(lo, max(hi, lo), args.frames or ctx.settings.clip_frames)

    def surrogate(self, args: ClipArgs, ctx: ToolContext, asset: Asset) -> Observation:
        if not asset.frame_captions:
            raise ToolError(f"asset {asset.id!r} has no frame captions and no media service can look at it")
        moments = caption_moments(asset, args.query, args.start, args.end, args.k)
        if not moments:
            return Observation(
                tool=self.name,
                text=f"No moment of asset {asset.id} matched {args.query!r}.",
                fields={"asset_id": asset.id, "moments": []},
            )
        lines = [f"{fmt_span(m['start'], m['end'])} {' / '.join(m['captions'])}" for m in moments]
        best = moments[0]
        return Observation(
            tool=self.name,
            text=f"{len(moments)} moment(s) of asset {asset.id} matching {args.query!r}:\n" + "\n".join(lines),
            fields={"asset_id": asset.id, "moments": moments},
            source=SourceRef(tool=self.name, asset_id=asset.id, start=best["start"], end=best["end"]),
        )
