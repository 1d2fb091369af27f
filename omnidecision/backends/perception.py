"""Perception over OpenAI-compatible multimodal chat endpoints (vLLM serving Qwen2.5-VL / Qwen2.5-Omni / Qwen3-Omni,
Gemini's OpenAI endpoint, …): the real `MediaService` behind subtitle_grounding, audio_scouting, clip_grounding and
frame_confirmation.

What the tools hand over, and how it is sent (per the endpoint's abilities, `PerceptionSpec.inputs`):
- frames the tool decoded with PyAV at its timestamps → `image_url` parts with `data:image/jpeg;base64,…` URIs;
- an image asset → one `image_url` part (Pillow, longer side capped);
- an audio window (an audio asset, or a video's sound track) → an `input_audio` part (WAV, mono 16 kHz, PyAV);
- a video window without frames → `video_url` with a data URI when the endpoint takes video, else sampled frames.
A request the endpoint cannot take (audio to an image-only model) returns None: the tool falls back to the asset's
text surrogates. Every observation carries a `SourceRef` with the asset id and the time window it looked at, and
answers are cached by (tool, asset, window/frame times, query). One spec per tool (a "default" serves the rest):
base URL, model, key env var, concurrency, timeout, retries — the chat client is `backends.openai_backend`.

    python -m omnidecision.backends.perception http://127.0.0.1:8000/v1 MODEL VIDEO.mp4 "what is on screen?" 1.5
"""

from __future__ import annotations

import asyncio
import base64
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from omnidecision.backends.openai_backend import OpenAIBackend
from omnidecision.ledger.schema import PERCEPTION_TOOLS, SourceRef
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatRequest
from omnidecision.protocol.observations import Observation
from omnidecision.protocol.secrets import EndpointSecrets
from omnidecision.tasks.schema import Asset
from omnidecision.tools.base import DecodedFrame
from omnidecision.tools.media import audio_segment_wav, decode_frames, image_jpeg, video_duration

logger = logging.getLogger(__name__)

Modality = Literal["image", "audio", "video"]

# What each tool asks the model to do with what it is shown (the user's query follows).
TOOL_PROMPTS: dict[str, str] = {
    "frame_confirmation": "You see frame(s) of a video (or an image) at the given timestamps. Say whether the "
                          "description holds in them and state exactly what is visible that bears on it.",
    "clip_grounding": "You see frames sampled from a video window, each with its timestamp. Say at which "
                      "timestamps the described moment happens (or that it does not) and describe it.",
    "audio_scouting": "You hear an audio segment. Report what is said or heard that matches the query, with "
                      "times relative to the segment start.",
    "subtitle_grounding": "You see/hear part of a video. Report the speech or on-screen text that matches the "
                          "query, with timestamps.",
}


class PerceptionSpec(EndpointSecrets):
    """One perception endpoint (the `environment.perception.<tool>` part of a live recipe).

    Attributes:
        temperature: sampling temperature of the perception model's answers
    """

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)  # a refused key is never echoed

    base_url: str | None = Field(None, description="OpenAI-compatible base URL, e.g. http://gpu-node:8001/v1; no "
                                 "credential in it (userinfo, ?api_key=, ?token=, ...: refused; the key goes in "
                                 "api_key_env)")
    model: str = Field("", description="the served model name")
    api_key_env: str = Field("OPENAI_API_KEY", description="env var holding the key (unset: 'EMPTY', as vLLM takes)")
    inputs: list[Modality] = Field(default_factory=lambda: ["image"],
                                   description="what the endpoint takes: image, audio, video")
    max_concurrency: int = Field(8, ge=1, description="requests in flight at once")
    timeout_s: float = Field(120.0, gt=0, description="per request")
    max_retries: int = Field(3, ge=0, description="retries on connection errors, timeouts, 429 and 5xx")
    max_tokens: int = Field(256, ge=1, description="answer length")
    temperature: float = Field(0.0, ge=0.0)
    frame_max_side: int = Field(512, ge=32, description="longer side of a frame/image sent (pixels)")
    audio_max_s: float = Field(30.0, gt=0, description="longest audio segment sent (seconds)")
    video_frames: int = Field(8, ge=1, le=64, description="frames sampled from a window when video is not taken")
    max_video_bytes: int = Field(20_000_000, ge=1, description="largest file sent whole as video_url")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="sent as is (e.g. mm_processor_kwargs)")


    def backend_spec(self) -> BackendSpec:
        # free text, no JSON schema; chat_template_kwargs are harmless to a VLM template
        return BackendSpec(kind="openai", base_url=self.base_url, model=self.model, api_key_env=self.api_key_env,
                           temperature=self.temperature, max_tokens=self.max_tokens, timeout_s=self.timeout_s,
                           max_retries=self.max_retries, structured_output=False,
                           max_concurrency=self.max_concurrency, options={"extra_body": dict(self.extra_body)})

    def problems(self, tool: str) -> list[str]:
        out = []
        if not self.base_url:
            out.append(f"perception.{tool}: base_url is not set (the OpenAI-compatible endpoint of the model)")
        if not self.model:
            out.append(f"perception.{tool}: model is not set (the served model name)")
        return out


# ---------------------------------------------------------------- request building (pure; tested against vLLM)


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(jpeg: bytes) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_uri(jpeg, "image/jpeg")}}


def audio_part(wav: bytes) -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav).decode("ascii"), "format": "wav"}}


def video_part(data: bytes, mime: str = "video/mp4") -> dict[str, Any]:
    return {"type": "video_url", "video_url": {"url": data_uri(data, mime)}}


def perception_messages(tool: str, query: str, parts: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """System: what the tool asks; user: the query, what is shown (`note`: asset, times) and the media parts."""
    text = f"{note}\nQuery: {query.strip() or '(describe what is there)'}"
    return [{"role": "system", "content": TOOL_PROMPTS.get(tool, TOOL_PROMPTS["frame_confirmation"])},
            {"role": "user", "content": [{"type": "text", "text": text}, *parts]}]


def frames_note(asset: Asset, frames: list[DecodedFrame]) -> str:
    times = ", ".join(f"{f.t:.2f}s" for f in frames)
    return f"Asset {asset.id} ({asset.type}); {len(frames)} frame(s), in order, at {times}."


# ---------------------------------------------------------------- the service


@dataclass(frozen=True)
class PerceptionQuestion:
    """One question to the perception model: the tool that asks, the asset, the query, the media parts with the note
    that introduces them, the source an answer cites, and what the observation records besides the answer."""

    tool: str
    asset: Asset
    query: str
    parts: list[dict[str, Any]]
    note: str
    source: SourceRef
    fields: dict[str, Any] = field(default_factory=dict)


class OpenAIPerception:
    """`FrameMediaService` over one OpenAI-compatible multimodal endpoint (see the module docstring)."""

    def __init__(self, spec: PerceptionSpec, media_root: str | Path | None = None, backend: Any = None) -> None:
        self.spec = spec
        self.media_root = Path(media_root) if media_root is not None else None
        chat = spec.backend_spec()  # free text, no JSON schema
        self.backend = backend or OpenAIBackend(chat)
        self._cache: dict[tuple, Observation] = {}
        self._inflight: dict[tuple, asyncio.Future] = {}

    # -- where the file is --------------------------------------------------------------------------------
    def path_of(self, asset: Asset) -> Path | None:
        if not asset.path:
            return None
        p = Path(asset.path)
        if not p.is_absolute() and self.media_root is not None:
            p = self.media_root / p
        return p if p.is_file() else None

    # -- the MediaService protocol ------------------------------------------------------------------------
    async def perceive_frames(self, tool: str, asset: Any, query: str, frames: list[DecodedFrame]
                              ) -> Observation | None:
        if "image" not in self.spec.inputs or not frames:
            return None
        key = (tool, asset.id, tuple(round(f.t, 3) for f in frames), query.strip())
        source = SourceRef(tool=tool, asset_id=asset.id, start=min(f.t for f in frames), end=max(f.t for f in frames))
        parts = [image_part(f.jpeg) for f in frames]
        fields = {"frames": [f.t for f in frames]}
        return await self._ask(key, PerceptionQuestion(tool, asset, query, parts, frames_note(asset, frames), source,
                                                      fields))

    async def perceive(self, tool: str, asset: Any, query: str, start: float | None = None,
                       end: float | None = None) -> Observation | None:
        path = self.path_of(asset)
        if path is None:
            return None  # no media file: the tool answers from the asset's text surrogates
        if asset.type == "image":
            if "image" not in self.spec.inputs:
                return None
            jpeg, w, h = await asyncio.to_thread(image_jpeg, path, self.spec.frame_max_side)
            key = (tool, asset.id, None, None, query.strip())
            note = f"Asset {asset.id} (image, {w}x{h})."
            return await self._ask(key, PerceptionQuestion(tool, asset, query, [image_part(jpeg)], note,
                                                          SourceRef(tool=tool, asset_id=asset.id)))
        if tool in ("audio_scouting", "subtitle_grounding") or asset.type == "audio":
            if "audio" not in self.spec.inputs:
                return None
            wav, lo, hi = await asyncio.to_thread(audio_segment_wav, path, start, end, self.spec.audio_max_s)
            key = (tool, asset.id, lo, hi, query.strip())
            note = f"Asset {asset.id} ({asset.type}); audio from {lo:.2f}s to {hi:.2f}s of the asset."
            return await self._ask(key, PerceptionQuestion(tool, asset, query, [audio_part(wav)], note,
                                                          SourceRef(tool=tool, asset_id=asset.id, start=lo, end=hi),
                                                          {"window": [lo, hi]}))
        # a video window without decoded frames: the file as video, else frames sampled here
        if "video" in self.spec.inputs and path.stat().st_size <= self.spec.max_video_bytes:
            data = await asyncio.to_thread(path.read_bytes)
            key = (tool, asset.id, start, end, query.strip(), "video")
            window = f" Look at {start or 0:.2f}s to {end:.2f}s." if end is not None else ""
            note = f"Asset {asset.id} (video).{window}"
            return await self._ask(key, PerceptionQuestion(tool, asset, query, [video_part(data)], note,
                                                          SourceRef(tool=tool, asset_id=asset.id, start=start,
                                                                    end=end)))
        if "image" not in self.spec.inputs:
            return None
        lo = start or 0.0
        hi = end if end is not None else (asset.duration or await asyncio.to_thread(video_duration, path) or lo)
        n = self.spec.video_frames
        times = [round(lo + (hi - lo) * (i + 0.5) / n, 3) for i in range(n)] if hi > lo else [lo]
        frames = await asyncio.to_thread(decode_frames, path, times, self.spec.frame_max_side)
        return await self.perceive_frames(tool, asset, query, frames)

    # -- one cached request -------------------------------------------------------------------------------
    async def _ask(self, key: tuple, question: PerceptionQuestion) -> Observation:
        if key in self._cache:
            return self._cache[key].model_copy(update={"fields": {**self._cache[key].fields, "cached": True}})
        if key in self._inflight:  # the same question already on its way: share the answer
            return await asyncio.shield(self._inflight[key])
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            obs = await self._request(question)
            if obs.ok:
                self._cache[key] = obs
            future.set_result(obs)
            return obs
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        finally:
            self._inflight.pop(key, None)

    async def _request(self, question: PerceptionQuestion) -> Observation:
        tool, asset, source, fields = question.tool, question.asset, question.source, question.fields
        messages = perception_messages(tool, question.query, question.parts, question.note)
        try:
            resp = await self.backend.chat(ChatRequest(role="perception", messages=messages))
        except BackendError as exc:
            return Observation(tool=tool, ok=False, source=source, error=f"perception endpoint: {exc.reason}",
                               fields={"asset_id": asset.id, "model": self.spec.model, **fields})
        answer = resp.text.strip()
        return Observation(tool=tool, ok=bool(answer), text=answer, source=source,
                           error=None if answer else "the perception model returned an empty answer",
                           fields={"asset_id": asset.id, "model": resp.model or self.spec.model,
                                   "usage": resp.usage.model_dump(), **fields})


class PerceptionRouter:
    """The media service of a live environment: each perception tool's own endpoint, else the "default" one."""

    def __init__(self, specs: dict[str, PerceptionSpec], media_root: str | Path | None = None) -> None:
        unknown = sorted(set(specs) - {*PERCEPTION_TOOLS, "default"})
        if unknown:
            raise ValueError(f"perception: unknown tool(s) {unknown}; known: default, {', '.join(PERCEPTION_TOOLS)}")
        shared: dict[str, OpenAIPerception] = {}
        self.services: dict[str, OpenAIPerception] = {}
        for tool, spec in specs.items():
            key = spec.model_dump_json()  # equal specs share one client, one cache, one concurrency cap
            shared.setdefault(key, OpenAIPerception(spec, media_root))
            self.services[tool] = shared[key]

    def service(self, tool: str) -> OpenAIPerception | None:
        return self.services.get(tool) or self.services.get("default")

    async def perceive_frames(self, tool: str, asset: Any, query: str, frames: list[DecodedFrame]
                              ) -> Observation | None:
        svc = self.service(tool)
        return await svc.perceive_frames(tool, asset, query, frames) if svc is not None else None

    async def perceive(self, tool: str, asset: Any, query: str, start: float | None = None,
                       end: float | None = None) -> Observation | None:
        svc = self.service(tool)
        return await svc.perceive(tool, asset, query, start, end) if svc is not None else None


if __name__ == "__main__":
    url, model, video, query, *times = sys.argv[1:]
    svc = OpenAIPerception(PerceptionSpec(base_url=url, model=model))
    clip = Asset(id="v", type="video", path=str(Path(video).resolve()))
    decoded = decode_frames(Path(video), [float(t) for t in times] or [0.0])
    print(asyncio.run(svc.perceive_frames("frame_confirmation", clip, query, decoded)).model_dump_json(indent=2))
