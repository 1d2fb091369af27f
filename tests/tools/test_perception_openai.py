"""The OpenAI-compatible perception backend, request side: what the perception tools send is a valid vLLM
chat-completion request (vLLM's own `ChatCompletionRequest` model, its content-part parser and its media loaders
decode every part), built from frames PyAV decoded at the asked timestamps of a video this test writes, audio
segments PyAV cut from a file this test writes, and image files; answers carry the asset and the time window, and
are cached. The endpoint itself is the boundary here (a real server answers in test_perception_vllm.py): the
backend object below validates and decodes each request with vLLM's code, then replies.
"""

from __future__ import annotations

import asyncio
import base64
import io
import wave
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from omnidecision.backends.openai_backend import OpenAIBackend
from omnidecision.backends.perception import OpenAIPerception, PerceptionRouter, PerceptionSpec
from omnidecision.protocol.chat import BackendError, ChatRequest, ChatResponse, Usage
from omnidecision.tasks.schema import Asset, Task
from omnidecision.tools.media import audio_segment_wav
from omnidecision.tools.registry import build_tool_context, run_tool

protocol = pytest.importorskip("vllm.entrypoints.openai.chat_completion.protocol")
chat_utils = pytest.importorskip("vllm.renderers.chat_utils")
connector = pytest.importorskip("vllm.multimodal.media.connector")


class VLLMValidatingEndpoint:
    """The endpoint boundary: validates each request with vLLM's request model, parses its content parts with
    vLLM's parser and decodes the media with vLLM's MediaConnector, keeps what it decoded, and replies."""

    def __init__(self, spec: PerceptionSpec, answer: str = "a gray frame") -> None:
        self.wire = OpenAIBackend(spec.backend_spec())  # the real client's request building
        self.answer = answer
        self.requests: list = []
        self.images: list[Image.Image] = []
        self.audio: list[tuple[np.ndarray, float]] = []
        self.videos: list[str] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        kwargs = self.wire.request_kwargs(request)
        body = {k: v for k, v in kwargs.items() if k != "extra_body"} | kwargs["extra_body"]
        validated = protocol.ChatCompletionRequest.model_validate(body)
        self.requests.append(validated)
        media = connector.MediaConnector()
        for message in validated.messages:
            if isinstance(message.get("content"), str):
                continue
            for part in message["content"]:
                kind, content = chat_utils._parse_chat_message_content_mm_part(part)
                if kind == "image_url":
                    self.images.append(media.fetch_image(content))
                elif kind == "input_audio":
                    self.audio.append(media.fetch_audio(f"data:audio/{content['format']};base64,{content['data']}"))
                elif kind == "video_url":
                    self.videos.append(content)
                else:
                    assert kind == "text", kind
        return ChatResponse(text=self.answer, usage=Usage(prompt_tokens=10, completion_tokens=3), model="vlm")


def gray(image: Image.Image) -> int:
    return round(float(np.asarray(image.convert("L")).mean()) / 8)


@pytest.fixture
def media(tmp_path: Path, write_video, write_audio) -> Task:
    write_video(tmp_path / "clip.mp4")
    write_audio(tmp_path / "talk.wav")
    Image.new("RGB", (300, 200), (200, 30, 30)).save(tmp_path / "photo.jpg")
    return Task(id="m", question="?", base_dir=str(tmp_path), assets=[
        Asset(id="clip", type="video", path="clip.mp4"), Asset(id="talk", type="audio", path="talk.wav"),
        Asset(id="photo", type="image", path="photo.jpg")])


def service(spec: PerceptionSpec, answer: str = "a gray frame") -> tuple[OpenAIPerception, VLLMValidatingEndpoint]:
    endpoint = VLLMValidatingEndpoint(spec, answer)
    return OpenAIPerception(spec, backend=endpoint), endpoint


SPEC = PerceptionSpec(base_url="http://127.0.0.1:1/v1", model="vlm", inputs=["image", "audio"])


def call(name: str, args: dict, task: Task, svc) -> object:
    return asyncio.run(run_tool(name, args, build_tool_context(task, {"media": svc})))


def test_frame_confirmation_sends_the_frames_decoded_at_the_asked_times(media):
    svc, endpoint = service(SPEC)
    obs = call("frame_confirmation", {"query": "a gray square", "asset_id": "clip", "start": 0.5, "end": 2.0}, media,
               svc)
    assert obs.ok and obs.text == "a gray frame" and obs.tool == "frame_confirmation"
    # three frames sampled in the window (0.75, 1.25, 1.75 s: the first frame at or after each), decoded by PyAV,
    # sent as image_url data URIs and decoded again by vLLM
    assert [gray(i) for i in endpoint.images] == [8, 13, 18]
    assert obs.fields["frames"] == [0.8, 1.3, 1.8]
    assert (obs.source.asset_id, obs.source.start, obs.source.end) == ("clip", 0.8, 1.8)
    request = endpoint.requests[0]
    assert request.model == "vlm" and request.messages[0]["role"] == "system"
    text = request.messages[1]["content"][0]["text"]
    assert "0.80s, 1.30s, 1.80s" in text and "a gray square" in text


def test_answers_are_cached_by_asset_window_tool_and_query(media):
    svc, endpoint = service(SPEC)
    args = {"query": "gray", "asset_id": "clip", "t": 1.0}
    first, second = call("frame_confirmation", args, media, svc), call("frame_confirmation", args, media, svc)
    assert first.text == second.text and second.fields["cached"] is True and len(endpoint.requests) == 1
    call("frame_confirmation", {**args, "query": "white"}, media, svc)  # another query: another request
    call("frame_confirmation", {**args, "t": 2.0}, media, svc)  # another time: another request
    call("clip_grounding", {"query": "gray", "asset_id": "clip", "frames": 2}, media, svc)  # another tool
    assert len(endpoint.requests) == 4


def test_audio_scouting_sends_the_window_as_input_audio(media):
    svc, endpoint = service(SPEC, "a steady tone")
    obs = call("audio_scouting", {"query": "tone", "asset_id": "talk", "start": 2.0, "end": 3.0}, media, svc)
    assert obs.ok and (obs.source.asset_id, obs.source.start, obs.source.end) == ("talk", 2.0, 3.0)
    samples, rate = endpoint.audio[0]
    assert rate == 16000 and abs(len(samples) / rate - 1.0) < 0.08  # one second, resampled to 16 kHz mono
    values = np.asarray(samples, dtype=np.float64)
    if np.abs(values).max() > 1.5:  # vLLM's PyAV fallback returns 16-bit sample values
        values = values / 32768
    rms = float(np.sqrt(np.mean(values**2)))
    assert rms == pytest.approx(0.3 / np.sqrt(2), rel=0.1)  # second 2 of the file: amplitude 0.3


def test_image_assets_go_as_one_image(media):
    svc, endpoint = service(PerceptionSpec(base_url="http://x/v1", model="vlm", frame_max_side=128))
    obs = call("frame_confirmation", {"query": "red", "asset_id": "photo"}, media, svc)
    assert obs.ok and endpoint.images[0].size == (128, 85)
    assert endpoint.images[0].getpixel((60, 40))[0] > 150  # the red photo


def test_an_endpoint_without_audio_declines_and_the_tool_says_so(media):
    svc, endpoint = service(PerceptionSpec(base_url="http://x/v1", model="vlm", inputs=["image"]))
    obs = call("audio_scouting", {"query": "tone", "asset_id": "talk"}, media, svc)
    assert not obs.ok and "talk" in obs.error and endpoint.requests == []


def test_video_url_when_the_endpoint_takes_video(media):
    spec = PerceptionSpec(base_url="http://x/v1", model="omni", inputs=["video"])
    svc, endpoint = service(spec, "a fade from black to white")
    asset = media.assets[0].model_copy(update={"path": str(Path(media.base_dir) / "clip.mp4")})
    obs = asyncio.run(svc.perceive("clip_grounding", asset, "fade", 0.0, 2.0))
    assert obs.ok and endpoint.videos[0].startswith("data:video/mp4;base64,")
    sent = base64.b64decode(endpoint.videos[0].split(",", 1)[1])
    assert sent == (Path(media.base_dir) / "clip.mp4").read_bytes()


def test_pyav_audio_segment_window_and_errors(media):
    path = Path(media.base_dir) / "talk.wav"
    wav, lo, hi = audio_segment_wav(path, 1.0, None, max_s=1.5)
    assert (lo, hi) == (1.0, 2.5)
    with wave.open(io.BytesIO(wav)) as w:
        assert (w.getframerate(), w.getnchannels()) == (16000, 1)
        assert abs(w.getnframes() / 16000 - 1.5) < 0.08
    with pytest.raises(Exception, match="no audio between"):
        audio_segment_wav(path, 10.0, 12.0)


def test_a_dead_endpoint_is_a_failed_observation_with_the_window(media):
    class Dead:
        async def chat(self, request):
            raise BackendError("ConnectError talking to http://gpu:8001/v1")

    svc = OpenAIPerception(SPEC, backend=Dead())
    obs = call("frame_confirmation", {"query": "x", "asset_id": "clip", "t": 1.0}, media, svc)
    assert not obs.ok and "perception endpoint: ConnectError" in obs.error
    assert (obs.source.asset_id, obs.source.start) == ("clip", 1.0)


def test_router_picks_the_tools_endpoint_else_the_default():
    router = PerceptionRouter({"default": PerceptionSpec(base_url="http://a/v1", model="vl"),
                               "audio_scouting": PerceptionSpec(base_url="http://b/v1", model="omni",
                                                                inputs=["audio"])})
    assert router.service("audio_scouting").spec.model == "omni"
    assert router.service("clip_grounding").spec.model == "vl" == router.service("frame_confirmation").spec.model
    with pytest.raises(ValueError, match="unknown tool"):
        PerceptionRouter({"frames": PerceptionSpec()})


def test_subtitle_grounding_without_a_subtitle_file_asks_the_endpoint_to_listen(media):
    svc, endpoint = service(SPEC, "hello and welcome")
    obs = call("subtitle_grounding", {"query": "welcome", "asset_id": "talk", "end": 2.0}, media, svc)
    assert obs.ok and obs.text == "hello and welcome" and len(endpoint.audio) == 1
    assert (obs.source.tool, obs.source.asset_id, obs.source.start, obs.source.end) == ("subtitle_grounding", "talk",
                                                                                        0.0, 2.0)
    obs = call("subtitle_grounding", {"query": "welcome", "asset_id": "talk"}, media, None)  # no service: as before
    assert not obs.ok and "has no subtitles" in obs.error


def test_a_video_only_endpoint_gets_the_window_as_video_url_from_the_frame_tools(media):
    svc, endpoint = service(PerceptionSpec(base_url="http://x/v1", model="omni", inputs=["video"]), "a fade")
    obs = call("clip_grounding", {"query": "fade", "asset_id": "clip", "start": 0.5, "end": 2.5}, media, svc)
    assert obs.ok and endpoint.images == [] and len(endpoint.videos) == 1
    assert (obs.source.start, obs.source.end) == (0.5, 2.5)
    assert "Look at 0.50s to 2.50s" in endpoint.requests[0].messages[1]["content"][0]["text"]
