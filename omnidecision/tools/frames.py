"""frame_confirmation: confirm what is visible at a timestamp (or in a short window) of a video.

With a real video and a "media" service, the frame(s) at the asked time are decoded with `av` and sent as images;
offline, the frame caption nearest the timestamp is compared with the description (token overlap).

    omnidecision tool frame_confirmation --args '{"query": "scoreboard shows 3-1", "t": 42}' --tasks tasks.jsonl
"""

from __future__ import annotations

import logging

from pydantic import Field

from omnidecision.ledger.schema import SourceRef
from omnidecision.tasks.schema import Asset
from omnidecision.tools.base import Observation, ToolContext, ToolError, register_tool
from omnidecision.tools.clips import caption_moments, sample_times
from omnidecision.tools.media import MediaTool, WindowArgs, media_file
from omnidecision.tools.text import rank

logger = logging.getLogger(__name__)


class FrameArgs(WindowArgs):
    t: float | None = Field(None, ge=0, description="the timestamp (s) to look at")


@register_tool("frame_confirmation")
class FrameConfirmation(MediaTool):
    args_model = FrameArgs
    prefer = ("video", "image")

    def frame_times(self, args: FrameArgs, ctx: ToolContext, asset: Asset) -> list[float] | None:
        """The frame at `t`, else three across the window, else the one at its start (a real video a service sees)."""
        if media_file(ctx, asset) is None or asset.type != "video" or "media" not in ctx.services:
            return None
        if args.t is not None:
            return [args.t]
        if args.start is not None and args.end is not None:
            return sample_times(args.start, args.end, 3)
        return [args.start or 0.0]

    def surrogate(self, args: FrameArgs, ctx: ToolContext, asset: Asset) -> Observation:
        if not asset.frame_captions:
            raise ToolError(f"asset {asset.id!r} has no frame captions and no media service can look at it")
        if args.t is None:  # no timestamp: the best matching frame in the window
            moments = caption_moments(asset, args.query, args.start, args.end, 1)
            if not moments:
                return Observation(
                    tool=self.name,
                    text=f"No frame of asset {asset.id} shows {args.query!r}.",
                    fields={"asset_id": asset.id, "confirmed": False},
                )
            m = moments[0]
            return Observation(
                tool=self.name,
                text=f"{' / '.join(m['captions'])} (frames {m['start']:.2f}-{m['end']:.2f}s)",
                fields={"asset_id": asset.id, "confirmed": m["score"] >= 0.5, "score": m["score"], **m},
                source=SourceRef(tool=self.name, asset_id=asset.id, start=m["start"], end=m["end"]),
            )
        cap = min(asset.frame_captions, key=lambda c: (abs(c.t - args.t), c.t))
        tolerance = ctx.settings.frame_tolerance_s
        if abs(cap.t - args.t) > tolerance:
            raise ToolError(f"t: no frame caption within {tolerance:g}s of {args.t:g}s (nearest at {cap.t:g}s)")
        scored = rank(args.query, [cap.caption]) if args.query.strip() else []
        score = scored[0][1] if scored else 0.0
        confirmed = score >= 0.5
        verdict = "confirmed" if confirmed else ("partly matches" if score > 0 else "not visible")
        text = f"At {cap.t:.2f}s: {cap.caption}"
        if args.query.strip():
            text += f"\nDescription {args.query!r}: {verdict} (overlap {score:.2f})."
        return Observation(
            tool=self.name,
            text=text,
            fields={"asset_id": asset.id, "t": cap.t, "caption": cap.caption, "score": score, "confirmed": confirmed},
            source=SourceRef(tool=self.name, asset_id=asset.id, start=cap.t, end=cap.t),
        )
