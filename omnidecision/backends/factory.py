"""Build the per-role backends of a run from `BackendSpec`s (the `backends:` part of a recipe).

A backend kind is registered once, next to its code, with `@register_backend("kind")` on a function (or class)
that takes the `BackendSpec` and returns a `ChatBackend`: "openai" (`backends.openai_backend`), "first-actionable"
(`backends.first_actionable`), "replay" (`backends.replay`), "local" (`backends.local`), "teacher" (below). The
modules of this package are imported the first time a kind is looked up. Specs that are equal share one backend
object (one client, one concurrency semaphore). A kind may register its spec check with it
(`register_backend(kind, check=...)`: why a spec cannot be built, found without loading weights or opening a
connection); `backend_problem` asks it, and `build_backend` refuses a spec in its words, so a dry run that asks
`backend_problem` says what the run would refuse.

    >>> from omnidecision.protocol.chat import BackendSpec
    >>> b = build_backends({"planner": BackendSpec(base_url="http://localhost:8000/v1", model="p")})
    >>> type(b["planner"]).__name__
    'OpenAIBackend'
    >>> sorted(BACKEND_KINDS)
    ['first-actionable', 'local', 'openai', 'replay', 'teacher']
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omnidecision.backends.teacher import TeacherBackend, teacher_problem
from omnidecision.protocol.chat import BackendSpec, ChatBackend
from omnidecision.protocol.registry import Registry, UnknownName

logger = logging.getLogger(__name__)

BackendBuilder = Callable[[BackendSpec], ChatBackend]
SpecCheck = Callable[[BackendSpec], str | None]  # why a spec cannot be built (no weights loaded), or None
BACKEND_KINDS: Registry[BackendBuilder] = Registry("backend kind", package="omnidecision.backends")
SPEC_CHECKS: dict[str, SpecCheck] = {}  # kind -> its spec check (filled by `register_backend(kind, check=...)`)


def register_backend(kind: str, check: SpecCheck | None = None) -> Callable[[Any], Any]:
    """Decorator: `@register_backend("kind")` on a callable `BackendSpec -> ChatBackend`; `check`: the kind's spec
    check (`backend_problem` asks it; `build_backend` refuses in its words)."""
    if check is not None:
        SPEC_CHECKS[kind] = check
    return BACKEND_KINDS.register(kind)


@register_backend("teacher", check=teacher_problem)
def build_teacher(spec: BackendSpec) -> ChatBackend:
    """The scripted teacher, `TeacherBackend(**spec.options)`."""
    return TeacherBackend(**spec.options)


def backend_problem(spec: BackendSpec) -> str | None:
    """Why `build_backend(spec)` would refuse `spec`, found without loading weights or opening a connection: an
    unknown kind (the registry's error, listing the registered ones), else what the kind's registered check says (a
    local planner folder without a checkpoint, a teacher option it does not take); None when it would build."""
    try:
        BACKEND_KINDS[spec.kind]  # the first lookup imports the package's modules: their checks register with them
    except UnknownName as exc:
        return str(exc)
    check = SPEC_CHECKS.get(spec.kind)
    return check(spec) if check is not None else None


def build_backend(spec: BackendSpec) -> ChatBackend:
    """The backend of one spec; an unknown kind raises `UnknownName` (a ValueError) listing the registered ones, a
    spec its kind's check refuses a ValueError in `backend_problem`'s words."""
    builder = BACKEND_KINDS[spec.kind]
    if (problem := backend_problem(spec)) is not None:
        raise ValueError(problem)
    return builder(spec)


def build_backends(specs: dict[str, BackendSpec]) -> dict[str, ChatBackend]:
    """One backend per role name; identical specs share an instance."""
    built: dict[str, ChatBackend] = {}
    shared: dict[str, ChatBackend] = {}
    for role, spec in specs.items():
        key = spec.model_dump_json()
        if key not in shared:
            shared[key] = build_backend(spec)
        built[role] = shared[key]
    return built


def load_backend_specs(path: str | Path) -> dict[str, BackendSpec]:
    """Read role → BackendSpec from a YAML file: either a mapping of roles, or a mapping with a `backends:` key.
    Errors name the file and the role."""
    import yaml
    from pydantic import ValidationError

    p = Path(path)
    try:
        data: Any = yaml.safe_load(p.read_text("utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{p}: cannot read backends YAML: {exc}") from exc
    if isinstance(data, dict) and "backends" in data:
        data = data["backends"]
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{p}: expected a mapping of role -> backend spec")
    specs = {}
    for role, raw in data.items():
        try:
            specs[str(role)] = BackendSpec.model_validate(raw or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(x) for x in first.get("loc", ()))
            raise ValueError(f"{p}: backends.{role}.{loc}: {first.get('msg')}") from exc
    return specs
