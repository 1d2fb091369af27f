"""Secrets hidden by value in everything the project prints, logs or writes.

`protocol.secrets` refuses a key pasted into a field whose *name* says key; a key also travels where no name says so
(a `Cookie` header, a `--api-key` argument of vLLM, a server's error body that echoes what it was sent). This module
hides the *values*: a process-wide registry of the values to hide, and `redact_text`, which replaces each of them,
also in its base64, URL-encoded and JSON-escaped forms, by `***`.

What is hidden (`secret_values()`):
- the value of every credential variable: the variables a recipe or spec names in an `*_env` field (`api_key_env`),
  the well-known ones (`KNOWN_CREDENTIAL_VARS`: HF_TOKEN, OPENAI_API_KEY, WANDB_API_KEY, ...) and any set variable
  whose name says it holds one (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, `*_KEY`: noted when the CLI
  starts or a recipe is loaded, `scan_environment`); their values are read at each redaction;
- what `register_in(data)` finds in a recipe or spec (called where one is loaded): a URL's userinfo, its query and
  fragment parameters named like a credential (api_key, key, token, access_token, sig, ...), every value of a header
  mapping (`default_headers`, any `*headers` field) but for harmless headers (Accept, User-Agent, ...), every option
  named like a credential, every value shaped like a provider key (sk-..., hf_..., ghp_..., Bearer ..., a JWT), and
  the value of a credential flag in an argument list (`serve.extra_args: [--api-key, X]` or `--api-key=X`).

Where it applies, once per kind of writer: the JSON and JSONL writers of collect and eval (`collect.store`: records,
manifest.json; eval's report, recipe.yaml and progress audit), the dry-run printer (`preflight.emit`), the vLLM
command line (`serving.vllm_server.VLLMServer.display_command`), and, installed by the CLI (`install()`), every log
record (a log-record factory, so handlers added later and pytest's caplog see the redacted text) and the process's
stdout and stderr (printed errors, tracebacks, progress bars).

    python -c "from omnidecision.protocol.redaction import register, redact_text; register(['sk-abcdef123']); \
print(redact_text('HTTP 500: bad key sk-abcdef123 (c2stYWJjZGVmMTIz)'))"
"""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from omnidecision.protocol.secrets import CREDENTIAL_PARAM, ENV_NAME, MIN_SECRET_CHARS, REDACTED, SHAPED, encoded_forms

# Variables that hold a credential whatever a recipe says (the hub, the trackers, the API providers).
KNOWN_CREDENTIAL_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN", "OPENAI_API_KEY",
                         "WANDB_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "VLLM_API_KEY",
                         "TAVILY_API_KEY", "BRAVE_API_KEY", "SERPER_API_KEY", "PERCEPTION_API_KEY", "GITHUB_TOKEN")
# any other set variable named like one; `*_KEY` too (the tests' own OD_..._KEY), not TOKENIZERS_PARALLELISM
CREDENTIAL_VAR = re.compile(r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|ACCESS_KEY)($|_)", re.I)
HEADERS_FIELD = re.compile(r"(^|_)headers$", re.I)
# request headers that never carry a credential: their values stay readable
HARMLESS_HEADERS = frozenset({"accept", "accept-encoding", "accept-language", "content-type", "content-language",
                              "user-agent", "cache-control", "connection", "pragma", "openai-beta"})
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey"})

_REGISTERED: set[str] = set()
_CREDENTIAL_NAMES: set[str] = set(KNOWN_CREDENTIAL_VARS)
_LOCK = threading.Lock()


# ---------------------------------------------------------------- the registry


def register(values: Iterable[str | None]) -> None:
    """Hide these values from now on (shorter than `MIN_SECRET_CHARS`: ignored, they would mangle plain text)."""
    keep = {v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_CHARS}
    if keep:
        with _LOCK:
            _REGISTERED.update(v.strip() for v in keep)


def register_in(data: Any) -> None:
    """Register every credential found in a recipe, a spec (a pydantic model) or a plain tree (`credentials_in`)."""
    if hasattr(data, "model_dump"):
        data = data.model_dump(mode="json")
    scan_environment()
    register(credentials_in(data))


def _random_looking(value: str) -> bool:
    """A value worth hiding although only its variable's name says it is a key: long, one token, not a path or a
    word (an ordinary value would be scrubbed out of every text, JSON keys included)."""
    if len(value) < 8 or any(c.isspace() for c in value) or os.path.exists(value):
        return False
    return any(c.isdigit() for c in value) or (value.lower() != value and value.upper() != value) or \
        any(c in "-_+/=.:" for c in value)


def scan_environment() -> None:
    """Note the names of the set variables that look like credential variables (`CREDENTIAL_VAR`); their values are
    read at each redaction. Run by `install()` and `register_in()`: a scan of the whole environment per printed line
    would cost more than the redaction itself."""
    names = {name for name in os.environ if CREDENTIAL_VAR.search(name)}
    with _LOCK:
        _CREDENTIAL_NAMES.update(names)


def env_secrets() -> set[str]:
    """The current values of the credential variables: the well-known ones, and those `scan_environment` noted."""
    with _LOCK:
        names = set(_CREDENTIAL_NAMES)
    out = set()
    environ = os.environ
    for name in names:
        value = environ[name] if name in environ else None  # no KeyError raised per unset name: cheaper
        if not value:
            continue
        if name in KNOWN_CREDENTIAL_VARS and len(value) >= MIN_SECRET_CHARS:
            out.add(value)
        elif _random_looking(value):
            out.add(value)
    return out


def secret_values() -> frozenset[str]:
    """Everything `redact_text` hides now: the registered values and the credential variables' values."""
    with _LOCK:
        registered = set(_REGISTERED)
    return frozenset(registered | env_secrets())


@functools.lru_cache(maxsize=8)
def _forms(secrets: frozenset[str]) -> tuple[str, ...]:
    """Every form of every secret, longest first (a form that holds a shorter one goes whole)."""
    return tuple(sorted({f for s in secrets for f in encoded_forms(s)}, key=len, reverse=True))


def redact_text(text: str) -> str:
    """`text` with every secret (`secret_values()`) and its encoded forms replaced by ***.

    >>> register(["tok-4f9a1c2e"])
    >>> redact_text("Cookie: session=tok-4f9a1c2e; b64 dG9rLTRmOWExYzJl, url tok-4f9a1c2e")
    'Cookie: session=***; b64 ***, url ***'
    """
    if not text:
        return text
    # `in` first: a scan per form is ~10x faster than one regex alternation over a 100 KB record
    for form in _forms(secret_values()):
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def redact_tree(value: Any) -> Any:
    """A tree of mappings and lists with every string through `redact_text` (keys kept).

    >>> register(["pw-81f3c0de"])
    >>> redact_tree({"url": "http://h/?sig=pw-81f3c0de", "n": [1, "pw-81f3c0de"]})
    {'url': 'http://h/?sig=***', 'n': [1, '***']}
    """
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v) for v in value]
    return value


def redact_bytes(data: bytes) -> bytes:
    """`redact_text` for UTF-8 bytes (a child process's output relayed as it comes)."""
    if not data:
        return data
    for form in _forms(secret_values()):
        raw = form.encode("utf-8")
        if raw in data:
            data = data.replace(raw, REDACTED.encode())
    return data


def redact_args(args: Sequence[str]) -> list[str]:
    """A command line with the value of every credential flag hidden (`--api-key X`, `--api-key=X`, `--hf-token X`),
    registered or not; other values through `redact_text`.

    >>> redact_args(["vllm", "--port", "8000", "--api-key", "abc123456", "--hf-token=hf_secret1"])
    ['vllm', '--port', '8000', '--api-key', '***', '--hf-token=***']
    """
    out, hide_next = [], False
    for arg in args:
        if hide_next and not arg.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        flag, eq, _ = arg.partition("=")
        if arg.startswith("-") and CREDENTIAL_PARAM.search(flag.lstrip("-")):
            if eq:
                out.append(f"{flag}={REDACTED}")
                continue
            out.append(arg)
            hide_next = True
            continue
        out.append(redact_text(arg))
    return out


# ---------------------------------------------------------------- finding credentials in a recipe


def _value_parts(value: str) -> set[str]:
    """A credential value and the parts of it that are credentials on their own: `Bearer X` → X, a cookie
    `a=X; b=Y` → X and Y."""
    out = {value}
    pairs = [p for p in re.split(r"[;,\s]+", value) if p]
    if "=" in value:
        out |= {p.partition("=")[2] for p in pairs if "=" in p}
    else:
        out |= {p for p in pairs if p.lower() not in _AUTH_SCHEMES}
    return out


def url_credentials(url: str) -> set[str]:
    """The credentials a URL carries: userinfo, query and fragment parameters named like one, key-shaped values.

    >>> sorted(url_credentials("https://u:pw123456@h/v1?api_key=k1234567&page=2#access_token=t7654321"))
    ['k1234567', 'pw123456', 't7654321']
    """
    if "://" not in url:
        return set()
    try:
        parts = urlsplit(url.strip())
        password, username = parts.password, parts.username
    except ValueError:
        return set()
    out = {password} if password else set()
    if username and (not password or SHAPED.search(username)):
        out.add(username)  # `https://TOKEN@host` carries the token as the user name
    for section in (parts.query, parts.fragment):
        for name, value in parse_qsl(section, keep_blank_values=True):
            if value and (CREDENTIAL_PARAM.search(name) or SHAPED.search(value)):
                out |= _value_parts(value)
    return {s for s in out if s}


def credential_args(args: Sequence[Any]) -> set[str]:
    """The values of credential flags in an argument list (`[--api-key, X]`, `--api-key=X`)."""
    out = set()
    items = [a for a in args if isinstance(a, str)]
    for i, arg in enumerate(items):
        if not arg.startswith("-"):
            continue
        flag, eq, value = arg.partition("=")
        if CREDENTIAL_PARAM.search(flag.lstrip("-")):
            if eq:
                out.add(value)
            elif i + 1 < len(items) and not items[i + 1].startswith("-"):
                out.add(items[i + 1])  # a flag alone (`--return-tokens-as-token-ids`) hides nothing
    return out


def credentials_in(data: Any, name: str = "") -> set[str]:
    """Every credential in a tree of mappings, lists and strings (a recipe's `model_dump`); see the module
    docstring. An `*_env` field is a variable's name: its value is looked up, the name itself is not hidden.

    >>> sorted(credentials_in({"api_key_env": "NOT_SET_VARIABLE", "options": {"default_headers": {
    ...     "Cookie": "session=c00kie-123", "Accept": "application/json"}}, "extra_args": ["--api-key", "v11m-key"]}))
    ['c00kie-123', 'session=c00kie-123', 'v11m-key']
    """
    out: set[str] = set()
    if isinstance(data, Mapping):
        for key, value in data.items():
            key = str(key)
            if key.endswith("_env") and isinstance(value, str):
                if ENV_NAME.fullmatch(value) and os.environ.get(value):
                    out.add(os.environ[value])
                continue
            if HEADERS_FIELD.search(key) and isinstance(value, Mapping):
                for header, text in value.items():
                    if isinstance(text, str) and str(header).lower() not in HARMLESS_HEADERS:
                        out |= _value_parts(text)
            out |= credentials_in(value, key)
    elif isinstance(data, (list, tuple)):
        out |= credential_args(data)
        for value in data:
            out |= credentials_in(value, name)
    elif isinstance(data, str):
        if name and CREDENTIAL_PARAM.search(name):
            out |= _value_parts(data)
        out |= url_credentials(data)
        out |= {m.group(0) for m in SHAPED.finditer(data)}
    return {s for s in out if len(s) >= MIN_SECRET_CHARS}


# ---------------------------------------------------------------- logs and printed output


class RedactingStream:
    """A text stream (stdout, stderr) that writes through `redact_text`; its `buffer` through `redact_bytes`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: Any) -> int:
        if not isinstance(text, str):
            return self._inner.write(text)  # bytes: the inner stream's own TypeError (click probes with b"")
        self._inner.write(redact_text(text))
        return len(text)  # what the caller gave: a shorter count would read as a partial write

    def writelines(self, lines: Iterable[Any]) -> None:
        for line in lines:
            self.write(line)

    @property
    def buffer(self) -> Any:
        return _RedactingBuffer(self._inner.buffer)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, ...
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


class _RedactingBuffer:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, data: Any) -> int:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            return self._inner.write(data)
        self._inner.write(redact_bytes(bytes(data)))
        return len(data)

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


def _redacting_factory(previous: Any) -> Any:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:
            return record  # a broken format string: logging reports it itself
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            trace = logging.Formatter().formatException(record.exc_info)
            if (clean := redact_text(trace)) != trace:
                record.exc_text = clean  # formatters use the cached text instead of formatting the traceback again
        return record

    factory._omnidecision_redacts = True  # type: ignore[attr-defined]
    return factory


def install() -> None:
    """Redact every log record of this process from now on, and what it prints on stdout and stderr (idempotent).
    Called by the CLI before any command runs."""
    scan_environment()
    current = logging.getLogRecordFactory()
    if not getattr(current, "_omnidecision_redacts", False):
        logging.setLogRecordFactory(_redacting_factory(current))
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
