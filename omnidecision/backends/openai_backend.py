"""An OpenAI-compatible chat backend (vLLM, OpenAI, Gemini's OpenAI endpoint) behind `ChatBackend`.

Retries with exponential backoff (tenacity) on connection errors, timeouts, 429 and 5xx — not on other 4xx;
a concurrency semaphore; token usage and cost captured; `response_format: json_schema` when the spec asks for
structured output; `chat_template_kwargs.enable_thinking` sent to vLLM (train/serve parity).

    python -c "import asyncio; from omnidecision.backends.openai_backend import OpenAIBackend; \
from omnidecision.protocol.chat import BackendSpec, ChatRequest; \
b = OpenAIBackend(BackendSpec(base_url='http://localhost:8000/v1', model='planner')); \
print(asyncio.run(b.chat(ChatRequest(role='planner', messages=[{'role': 'user', 'content': 'hi'}]))))"
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import Any

import openai
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from omnidecision.backends.factory import register_backend
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatRequest, ChatResponse, Usage

logger = logging.getLogger(__name__)


def is_retryable(exc: BaseException) -> bool:
    """Connection problems, timeouts, rate limits, server errors and garbled (non-JSON) bodies are worth
    retrying; other 4xx are not."""
    if isinstance(exc, json.JSONDecodeError):  # a proxy's error page or a worker that died mid-reply
        return True
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def _reason(exc: BaseException, base_url: str | None) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code} from {base_url}: {str(exc.message)[:300]}"
    if isinstance(exc, json.JSONDecodeError):
        return f"non-JSON reply from {base_url}: {exc}"
    cause = exc.__cause__ or exc.__context__
    detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
    return f"{type(exc).__name__} talking to {base_url}: {exc}{detail}"[:500]


@register_backend("openai")
class OpenAIBackend:
    """`ChatBackend` over `openai.AsyncOpenAI`. The API key comes from the env var `spec.api_key_env`
    (default "EMPTY" when unset, which is what a local vLLM server accepts)."""

    def __init__(self, spec: BackendSpec, *, retry_wait_s: float = 0.5, retry_max_wait_s: float = 8.0) -> None:
        self.spec = spec
        self.retry_wait_s, self.retry_max_wait_s = retry_wait_s, retry_max_wait_s
        api_key = os.environ.get(spec.api_key_env) or "EMPTY"
        # Retries are ours (tenacity, with the policy above); the client's own retries are switched off.
        self.client = openai.AsyncOpenAI(base_url=spec.base_url, api_key=api_key, timeout=spec.timeout_s,
                                         max_retries=0)
        self._semaphore: asyncio.Semaphore | None = None

    @property
    def semaphore(self) -> asyncio.Semaphore:
        if self._semaphore is None:  # created lazily, inside the running event loop
            self._semaphore = asyncio.Semaphore(self.spec.max_concurrency)
        return self._semaphore

    def request_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        spec = self.spec
        kwargs: dict[str, Any] = {
            "model": spec.model,
            "messages": request.messages,
            "temperature": spec.temperature,
            "top_p": spec.top_p,
            "max_tokens": spec.max_tokens,
        }
        if spec.structured_output and request.json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema},
            }
        extra = dict(spec.options.get("extra_body", {}))
        extra.setdefault("chat_template_kwargs", {"enable_thinking": spec.enable_thinking})
        kwargs["extra_body"] = extra
        return kwargs

    def cost(self, usage: Usage) -> float | None:
        p, c = self.spec.price_per_1k_prompt, self.spec.price_per_1k_completion
        if p is None and c is None:
            return None
        return (usage.prompt_tokens * (p or 0.0) + usage.completion_tokens * (c or 0.0)) / 1000.0

    async def chat(self, request: ChatRequest) -> ChatResponse:
        kwargs = self.request_kwargs(request)
        t0 = time.perf_counter()
        try:
            async with self.semaphore:
                async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(self.spec.max_retries + 1),
                    wait=wait_exponential(multiplier=self.retry_wait_s, max=self.retry_max_wait_s),
                    retry=retry_if_exception(is_retryable),
                    reraise=True,
                ):
                    with attempt:
                        completion = await self.client.chat.completions.create(**kwargs)
        except (openai.OpenAIError, json.JSONDecodeError) as exc:
            raise BackendError(_reason(exc, self.spec.base_url)) from exc
        if not completion.choices:
            raise BackendError(f"no choices in the reply from {self.spec.base_url}")
        text = completion.choices[0].message.content or ""
        usage = Usage()
        if completion.usage is not None:
            usage = Usage(prompt_tokens=completion.usage.prompt_tokens or 0,
                          completion_tokens=completion.usage.completion_tokens or 0)
        return ChatResponse(text=text, usage=usage, latency_s=time.perf_counter() - t0,
                            model=completion.model or self.spec.model, cost=self.cost(usage))

    async def aclose(self) -> None:
        await self.client.close()
