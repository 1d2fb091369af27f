"""subtitle_grounding: find the subtitle cues of an asset that match keywords, optionally inside a time window.

Parses .srt/.vtt with pysubs2; an asset without a subtitle file goes to the "media" service, if any (a live
perception endpoint that hears the asset's sound track).

    omnidecision tool subtitle_grounding --args '{"query": "bridge"}' --tasks tasks.jsonl --task-id t1
"""

from __future__ import annotations

import logging

from omnidecision.ledger.schema import SourceRef
from omnidecision.tools.base import Observation, ToolContext, ToolError, register_tool
from omnidecision.tools.media import WindowArgs, ask_media, fmt_span, get_asset, load_cues, search_cues

logger = logging.getLogger(__name__)


class SubtitleArgs(WindowArgs):
    pass


@register_tool("subtitle_grounding")
class SubtitleGrounding:
    name: str  # set by @register_tool
    args_model = SubtitleArgs

    async def run(self, args: SubtitleArgs, ctx: ToolContext) -> Observation:
        asset = get_asset(ctx, args.asset_id, prefer=("video", "audio"))
        path = ctx.task.resolve(asset.subtitles)
        if path is None:
            # no subtitle file: a media service that hears the asset (a live perception endpoint) may answer
            obs = await ask_media(ctx, self.name, asset, args.query, args.start, args.end)
            if obs is not None:
                return obs
            raise ToolError(f"asset {asset.id!r} has no subtitles")
        matches = search_cues(load_cues(path), args.query, args.start, args.end, args.k)
        return cue_observation(self.name, asset.id, args, matches, "subtitle cue")


def cue_observation(tool: str, asset_id: str, args: WindowArgs, matches, what: str) -> Observation:
    """The observation for a list of (cue, score): one line per cue with its time span."""
    found = [{"start": c.start, "end": c.end, "text": c.text, "score": s} for c, s in matches]
    window = "" if args.start is None and args.end is None else f" in window {args.start}-{args.end}s"
    if not found:
        return Observation(
            tool=tool,
            text=f"No {what} of asset {asset_id} matched {args.query!r}{window}.",
            fields={"asset_id": asset_id, "matches": []},
        )
    lines = [f"{fmt_span(m['start'], m['end'])} {m['text']}" for m in found]
    best = found[0]
    return Observation(
        tool=tool,
        text=f"{len(found)} {what}(s) of asset {asset_id} matching {args.query!r}{window}:\n" + "\n".join(lines),
        fields={"asset_id": asset_id, "matches": found},
        source=SourceRef(tool=tool, asset_id=asset_id, start=best["start"], end=best["end"]),
    )
