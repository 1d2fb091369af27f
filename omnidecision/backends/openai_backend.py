"""An OpenAI-compatible chat backend (vLLM, OpenAI, Gemini's OpenAI endpoint) behind `ChatBackend`.

Retries with exponential backoff (tenacity) on connection errors, timeouts, 429 and 5xx — not on other 4xx;
a concurrency semaphore; token usage and cost captured; `response_format: json_schema` when the spec asks for
structured output; `chat_template_kwargs.enable_thinking` sent to vLLM (train/serve parity).

Request fields beyond OpenAI's schema go only to endpoints that take them (`BackendSpec.endpoint_kind`): OpenAI
answers 400 to an unknown field, and a 400 is not retried. "vllm": `chat_template_kwargs` is added and every
`options.extra_body` key is sent; "openai": only OpenAI's own request fields (read from the `openai` package's
types) are sent, other extra_body keys are dropped with one warning; "auto" (default): api.openai.com, Azure
OpenAI and Gemini's endpoint are "openai", any other endpoint is asked once for `GET /models` — vLLM lists its
models with `owned_by: "vllm"` — and is "vllm" when it says so, else "openai". A 400 names the refused field.

`options.default_headers` are sent with every request; their values, like the key, are hidden wherever the project
prints, logs or writes (protocol/redaction.py).

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
import re
import time
import typing
from functools import cache
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from omnidecision.backends.factory import register_backend
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatRequest, ChatResponse, Usage
from omnidecision.protocol.redaction import redact_text, register_in, secret_values
from omnidecision.protocol.secrets import redact, scrub_chain, secrets_from_env

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)


def is_retryable(exc: BaseException) -> bool:
    """Connection problems, timeouts, rate limits, server errors and garbled (non-JSON) bodies are worth
    retrying; other 4xx are not."""
    import openai  # the SDK takes 1-2 s to import: loaded by the first client, not by every importer

    if isinstance(exc, json.JSONDecodeError):  # a proxy's error page or a worker that died mid-reply
        return True
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


EndpointKind = Literal["vllm", "openai"]

# Endpoints known to take OpenAI's schema and nothing more (no probe); the openai client's default is the first.
OPENAI_SCHEMA_HOSTS = ("api.openai.com", "generativelanguage.googleapis.com")
OPENAI_SCHEMA_HOST_SUFFIXES = (".openai.azure.com",)


@cache
def openai_request_fields() -> frozenset[str]:
    """The request fields of OpenAI's chat-completions API, from the `openai` package's own request types (kept
    up to date by OpenAI), so the list is not ours to maintain.

    >>> {"messages", "response_format", "max_tokens", "stream"} <= openai_request_fields()
    True
    >>> "chat_template_kwargs" in openai_request_fields()
    False
    """
    from openai.types.chat import completion_create_params as params

    return frozenset(typing.get_type_hints(params.CompletionCreateParamsNonStreaming))


def known_endpoint_kind(base_url: str | None) -> EndpointKind | None:
    """"openai" for the hosts known to take only OpenAI's fields (no base_url: the client's default, OpenAI), None
    when only the endpoint can tell.

    >>> known_endpoint_kind("https://api.openai.com/v1"), known_endpoint_kind("http://node-a:8000/v1")
    ('openai', None)
    """
    if not base_url:
        return "openai"
    host = (urlparse(base_url).hostname or "").lower()
    if host in OPENAI_SCHEMA_HOSTS or host.endswith(OPENAI_SCHEMA_HOST_SUFFIXES):
        return "openai"
    return None


# OpenAI's wordings for a field it does not take (2023: "Unrecognized request argument supplied: X";
# now "Unknown parameter: 'X'." with `param`), and pydantic's (vLLM, other servers) "Extra inputs are not permitted".
_REFUSED_FIELD = re.compile(r"(?:Unrecognized request argument supplied|Unknown parameter|Unsupported parameter)"
                            r":?\s*'?([A-Za-z_][\w.]*)")


def refused_field(exc: openai.APIStatusError) -> str | None:
    """The request field a 400 reply names as refused, or None."""
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    error = error if isinstance(error, dict) else {}
    message = str(error.get("message") or exc.message)
    match = _REFUSED_FIELD.search(message)
    if match:
        return match.group(1)
    param = error.get("param")
    return str(param) if param and ("unknown" in str(error.get("code", "")) or "Extra inputs" in message) else None


def _reason(exc: BaseException, base_url: str | None, kind: str | None = None) -> str:
    import openai  # the SDK takes 1-2 s to import: loaded by the first client, not by every importer

    if isinstance(exc, openai.APIStatusError):
        field = refused_field(exc) if exc.status_code == 400 else None
        if field is not None:
            return (f"HTTP 400 from {base_url}: the endpoint refused the request field {field!r} (sent as "
                    f"endpoint_kind={kind}; an endpoint that takes only OpenAI's fields needs `endpoint_kind: openai` "
                    f"in this backend's spec): {str(exc.message)[:300]}")
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
        self._secrets = secrets_from_env([spec.api_key_env])  # scrubbed from every error text (a server may echo it)
        register_in(spec)  # the key and every header value: hidden wherever the project prints, logs or writes
        import openai  # the SDK takes 1-2 s to import: loaded by the first client, not by every importer

        headers = {str(k): str(v) for k, v in (spec.options.get("default_headers") or {}).items()}
        # Retries are ours (tenacity, with the policy above); the client's own retries are switched off.
        self.client = openai.AsyncOpenAI(base_url=spec.base_url, api_key=api_key, timeout=spec.timeout_s,
                                         max_retries=0, default_headers=headers or None)
        self._semaphore: asyncio.Semaphore | None = None
        self._kind: EndpointKind | None = None if spec.endpoint_kind == "auto" else spec.endpoint_kind
        self._warned_dropped: set[str] = set()

    @property
    def semaphore(self) -> asyncio.Semaphore:
        if self._semaphore is None:  # created lazily, inside the running event loop
            self._semaphore = asyncio.Semaphore(self.spec.max_concurrency)
        return self._semaphore

    async def endpoint_kind(self) -> EndpointKind:
        """The spec's endpoint_kind, or for "auto" the known host's or what `GET /models` says (asked once).
        A connection error propagates (the caller's retries apply); a status error means no vLLM behind it."""
        import openai  # the SDK takes 1-2 s to import: loaded by the first client, not by every importer

        if self._kind is not None:
            return self._kind
        kind = known_endpoint_kind(self.spec.base_url)
        how = "known host"
        if kind is None:
            try:
                page = await self.client.models.list()
            except openai.APIStatusError as exc:  # vLLM always serves /models: whatever does not, is not vLLM
                kind, how = "openai", f"GET /models answered HTTP {exc.status_code}"
            else:
                owners = sorted({str(getattr(m, "owned_by", "")) for m in page.data})
                kind, how = ("vllm" if "vllm" in owners else "openai"), f"/models owned_by={owners}"
        logger.info("endpoint %s: %s-compatible request fields (endpoint_kind auto: %s)", self.spec.base_url, kind,
                    how)
        self._kind = kind
        return kind

    def request_kwargs(self, request: ChatRequest, kind: EndpointKind | None = None) -> dict[str, Any]:
        """The arguments of `chat.completions.create` for `request` on an endpoint of `kind` (default: the resolved
        or configured kind; an "auto" endpoint not asked yet counts as vLLM unless its host is known)."""
        spec = self.spec
        kind = kind or self._kind or known_endpoint_kind(spec.base_url) or "vllm"
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
        if kind == "vllm":
            extra.setdefault("chat_template_kwargs", {"enable_thinking": spec.enable_thinking})
        else:
            dropped = sorted(set(extra) - openai_request_fields())
            if dropped and not set(dropped) <= self._warned_dropped:
                self._warned_dropped.update(dropped)
                logger.warning("endpoint %s takes only OpenAI's request fields: not sending extra_body %s (set "
                               "endpoint_kind: vllm if it is a vLLM server)", spec.base_url, dropped)
            extra = {k: v for k, v in extra.items() if k not in dropped}
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def cost(self, usage: Usage) -> float | None:
        p, c = self.spec.price_per_1k_prompt, self.spec.price_per_1k_completion
        if p is None and c is None:
            return None
        return (usage.prompt_tokens * (p or 0.0) + usage.completion_tokens * (c or 0.0)) / 1000.0

    async def chat(self, request: ChatRequest) -> ChatResponse:
        import openai  # the SDK takes 1-2 s to import: loaded by the first client, not by every importer

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
                        kwargs = self.request_kwargs(request, await self.endpoint_kind())
                        completion = await self.client.chat.completions.create(**kwargs)
        except (openai.OpenAIError, json.JSONDecodeError) as exc:
            keys = [*self._secrets, *secret_values()]  # a server may echo a header value too (a Cookie)
            scrub_chain(exc, keys)  # a traceback logged further up shows no key either
            raise BackendError(redact_text(redact(_reason(exc, self.spec.base_url, self._kind), keys))) from exc
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
