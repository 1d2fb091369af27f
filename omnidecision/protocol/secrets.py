"""Keys stay in environment variables: recipe fields that name one must look like a variable name, no credential rides
in a URL (userinfo, query string, fragment) or a backend option, and error text from an endpoint is scrubbed of the
key before it reaches a log, a warning or a trajectory record. A refusal names the field, never the value. What gets
through these checks by name is hidden by value where the project prints, logs or writes: `protocol.redaction`.

    python -c "from omnidecision.protocol.secrets import check_env_name; check_env_name('sk-123', 'api_key_env')"

Each check refuses by naming the field and the reason, never the value:

    >>> for check, value, field in ((check_env_name, "sk-abc123", "api_key_env"),
    ...                             (check_url, "https://search.local/v1?api_key=abc123secret", "base_url"),
    ...                             (check_options, {"api_key": "sk-abc123"}, "options")):
    ...     try:
    ...         check(value, field)
    ...     except ValueError as exc:
    ...         print("abc123" in str(exc), str(exc).split(" (")[0])
    False api_key_env must name an environment variable
    False base_url must not carry credentials in its query string
    False options.api_key looks like a credential
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# option names that hold a credential, and values that look like one (API keys of the common providers, bearer
# tokens, JWTs): refused in backend options, which are written to manifest.json
SECRET_NAME = re.compile(r"(^|[_-])(api[_-]?key|apikey|key|secret|token|passw(or)?d|authorization|auth|bearer|"
                         r"credentials?)($|[_-])", re.I)
SECRET_VALUE = re.compile(r"^(sk-|sk_|hf_|ghp_|gho_|xox[abp]-|AIza|tvly-|gsk_|(?-i:AKIA|ASIA)[0-9A-Z]{16}|Bearer\s|"
                          r"Basic\s|eyJ[\w-]+\.)", re.I)
# query/fragment parameters and CLI flags that carry a credential: the option names above plus
# the signed-URL and session spellings
CREDENTIAL_PARAM = re.compile(r"(^|[_-])(api[_-]?key|apikey|key|secret|token|passw(or)?d|pwd|authorization|auth|"
                              r"bearer|credentials?|access[_-]?token|client[_-]?secret|sig|signature|"
                              r"session(id)?|sid|jwt|x-amz-signature|x-amz-credential|x-goog-signature)($|[_-])", re.I)
# key-shaped values anywhere in a string: provider prefixes (OpenAI/Anthropic sk-, Hugging Face hf_, GitHub, Slack,
# Google AIza, Tavily tvly-, Groq gsk_), an AWS access key id (AKIA/ASIA + 16 capitals or digits, case-sensitive),
# a bearer/basic credential, a JWT
SHAPED = re.compile(r"(?<![\w-])(?:(?:sk-|sk_|hf_|ghp_|gho_|ghs_|github_pat_|xox[abp]-|AIza|tvly-|gsk_)[\w-]{6,}"
                    r"|(?-i:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"
                    r"|eyJ[\w-]{4,}\.[\w-]{4,}\.[\w-]*)"
                    r"|(?<=Bearer )[^\s\"',;]{6,}|(?<=Basic )[A-Za-z0-9+/=]{6,}", re.I)
REDACTED = "***"
MIN_SECRET_CHARS = 6  # shorter values (e.g. vLLM's "EMPTY") are not scrubbed: they would mangle ordinary text


def check_env_name(value: str | None, field: str) -> str | None:
    """`value` when it is an environment variable name (or None); else ValueError naming `field` (not the value).

    >>> check_env_name("OPENAI_API_KEY", "api_key_env")
    'OPENAI_API_KEY'
    """
    if value is None or ENV_NAME.fullmatch(value):
        return value
    raise ValueError(f"{field} must name an environment variable (like OPENAI_API_KEY: capitals, digits, _), not "
                     f"hold a key: got a value of {len(value)} characters that is not a variable name (not shown)")


def check_url(value: str | None, field: str) -> str | None:
    """`value` when it carries no credentials; else ValueError naming `field` and the reason, never the value:
    userinfo (`user:password@host`), or a query or fragment parameter named like a credential (api_key, key, token,
    access_token, sig, ...) or holding a key-shaped value. Refused rather than moved to a header: which header an
    endpoint reads is the endpoint's business, and a URL is written to manifest.json and printed by --dry-run.

    >>> check_url("http://node-a:8000/v1?api-version=2024-06-01", "base_url")
    'http://node-a:8000/v1?api-version=2024-06-01'
    """
    if value is None:
        return value
    try:
        parts = urlsplit(value)
        has_userinfo = parts.username is not None or parts.password is not None
    except ValueError:
        return value  # not a URL at all: the field's own check says so
    if has_userinfo:
        raise ValueError(f"{field} must not carry credentials (user:password@ in the URL; not shown): they would be "
                         "written to manifest.json and sent as Basic auth. Put the key in an environment variable "
                         "and name it in api_key_env")
    for where, section in (("query string", parts.query), ("fragment", parts.fragment)):
        for name, text in parse_qsl(section, keep_blank_values=True):
            if text and (CREDENTIAL_PARAM.search(name) or SHAPED.search(text)):
                raise ValueError(f"{field} must not carry credentials in its {where} (parameter {name!r}; value not "
                                 "shown): a URL is written to manifest.json and printed by --dry-run, and the "
                                 "endpoint check would send it on. Put the key in an environment variable and name "
                                 "it in api_key_env (sent as `Authorization: Bearer`)")
    return value


def endpoint_url(base_url: str, path: str) -> str:
    """`path` under `base_url`, joined on the URL's path (its query, if any, kept where it belongs) rather than
    appended to the string.

    >>> endpoint_url("http://node-a:8000/v1/?x=1", "models")
    'http://node-a:8000/v1/models?x=1'
    """
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + path.lstrip("/")))


def check_options(options: Mapping[str, Any], field: str) -> None:
    """ValueError naming the option (`field.a.b`) when a backend option holds a credential: by its name, or by a
    value that looks like a key. Nested mappings and lists (e.g. `extra_body`) are searched too."""
    for name, value in options.items():
        where = f"{field}.{name}"
        if isinstance(value, Mapping):
            check_options(value, where)
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, Mapping):
                check_options(v, where)
            elif isinstance(v, str) and v and (SECRET_NAME.search(str(name)) or SECRET_VALUE.match(v)):
                raise ValueError(f"{where} looks like a credential (not shown): options are written to "
                                 "manifest.json. Put the key in an environment variable and name it in api_key_env")


def secrets_from_env(names: Iterable[str | None]) -> list[str]:
    """The values of the named environment variables that are long enough to scrub."""
    out = []
    for name in names:
        value = os.environ.get(name) if name else None
        if value and len(value) >= MIN_SECRET_CHARS:
            out.append(value)
    return out


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret, in any of its `encoded_forms`, replaced by ***.

    >>> redact("HTTP 500: invalid key sk-abcdef123 (c2stYWJjZGVmMTIz)", ["sk-abcdef123"])
    'HTTP 500: invalid key *** (***)'
    """
    keys = {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}
    for form in sorted({f for s in keys for f in encoded_forms(s)}, key=len, reverse=True):
        text = text.replace(form, REDACTED)
    return text


def encoded_forms(secret: str) -> set[str]:
    """The spellings of `secret` a text may carry: itself, URL-encoded, JSON-escaped, and base64 (standard and
    URL-safe, padded or not), also inside a longer base64 string (`user:key` of Basic auth): for each of the three
    alignments the run of whole base64 groups that only the secret's bytes decide.

    >>> sorted(f for f in encoded_forms("sk-abc/def") if "%" in f or "=" in f)
    ['c2stYWJjL2RlZg==', 'sk-abc%2Fdef']
    """
    raw = secret.encode("utf-8")
    out = {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1],
           json.dumps(secret, ensure_ascii=False)[1:-1]}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        out |= {whole, whole.rstrip("=")}
        for skip in range(3):
            part = raw[skip:skip + 3 * ((len(raw) - skip) // 3)]
            if len(part) >= MIN_SECRET_CHARS:
                out.add(encode(part).decode("ascii"))
    return {f for f in out if len(f) >= MIN_SECRET_CHARS}


def scrub_chain(exc: BaseException, secrets: Iterable[str]) -> None:
    """Redact the secrets from an exception and its causes in place (their args and `message`), keeping their types
    (callers classify failures by them); a traceback logged later shows no key."""
    keys = list(secrets)
    if not keys:
        return
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.args = tuple(redact(a, keys) if isinstance(a, str) else a for a in e.args)
        if isinstance(getattr(e, "message", None), str):
            try:
                e.message = redact(e.message, keys)  # type: ignore[attr-defined]
            except AttributeError:
                pass
        if isinstance(getattr(e, "body", None), (dict, str)):
            try:
                e.body = redact(e.body, keys) if isinstance(e.body, str) else _redact_obj(e.body, keys)  # type: ignore
            except AttributeError:
                pass
        e = e.__cause__ or e.__context__


def _redact_obj(value: Any, keys: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, keys)
    if isinstance(value, dict):
        return {k: _redact_obj(v, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_obj(v, keys) for v in value]
    return value


class EndpointSecrets(BaseModel):
    """The checks every endpoint spec (chat backends, perception, search) runs on the fields a user pastes a key into:
    `api_key_env` must be a variable name, `base_url` carries no userinfo, and `options` / `extra_body` hold no
    credential. A spec inherits them; a field it lacks is skipped (`check_fields=False`)."""

    # a refused value is never echoed back (pydantic would print `input_value=...` in the error)
    model_config = ConfigDict(hide_input_in_errors=True)

    @field_validator("api_key_env", check_fields=False)
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return check_env_name(value, "api_key_env")

    @field_validator("base_url", check_fields=False)
    @classmethod
    def _no_userinfo(cls, value: str | None) -> str | None:
        return check_url(value, "base_url")

    @field_validator("options", "extra_body", check_fields=False)
    @classmethod
    def _no_credentials(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        check_options(value, info.field_name or "options")
        return value
