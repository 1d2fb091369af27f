"""audio_scouting: search an asset's speech transcript (.vtt/.srt) and labelled audio events by keywords and time
window. With a "media" service present (an audio-capable model, or the replay environment), the request goes to it
first; when it declines (returns None) the text surrogates answer.

    omnidecision tool audio_scouting --args '{"query": "siren", "start": 10}' --tasks tasks.jsonl --task-id t1
"""

from __future__ import annotations

import logging

from omnidecision.tasks.schema import Asset
from omnidecision.tools.base import Observation, ToolContext, ToolError, register_tool
from omnidecision.tools.media import Cue, MediaTool, WindowArgs, in_window, load_cues, search_cues
from omnidecision.tools.subtitles import cue_observation
from omnidecision.tools.text import rank

logger = logging.getLogger(__name__)


class AudioArgs(WindowArgs):
    pass


@register_tool("audio_scouting")
class AudioScouting(MediaTool):
    args_model = AudioArgs
    prefer = ("audio", "video")

    def surrogate(self, args: AudioArgs, ctx: ToolContext, asset: Asset) -> Observation:
        speech_path = ctx.task.resolve(asset.transcript or asset.subtitles)
        if speech_path is None and not asset.audio_events:
            raise ToolError(f"asset {asset.id!r} has no transcript, subtitles or audio events to scout")
        speech = load_cues(speech_path) if speech_path is not None else []
        events = [
            Cue(e.start, e.end, f"(sound) {e.label}")
            for e in asset.audio_events
            if in_window(e.start, e.end, args.start, args.end)
        ]
        matches = search_cues(speech, args.query, args.start, args.end, args.k)
        if args.query.strip():
            matches += [(events[i], s) for i, s in rank(args.query, [e.text for e in events], args.k)]
        else:
            matches += [(e, 1.0) for e in events]
        matches.sort(key=lambda m: (-m[1], m[0].start))
        return cue_observation(self.name, asset.id, args, matches[: args.k], "audio segment")
