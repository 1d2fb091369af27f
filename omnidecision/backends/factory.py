"""Build the per-role backends of a run from `BackendSpec`s (the `backends:` part of a recipe).

kind "openai" → `OpenAIBackend`; kind "teacher" → `omnidecision.backends.teacher.TeacherBackend(**spec.options)`;
kind "first-actionable" → the copy-rule baseline planner (`backends.first_actionable`); imported lazily.
Specs that are equal share one backend object (one client, one concurrency semaphore).

    >>> from omnidecision.protocol.chat import BackendSpec
    >>> b = build_backends({"planner": BackendSpec(base_url="http://localhost:8000/v1", model="p")})
    >>> type(b["planner"]).__name__
    'OpenAIBackend'
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omnidecision.protocol.chat import BackendSpec, ChatBackend

logger = logging.getLogger(__name__)


def build_backend(spec: BackendSpec) -> ChatBackend:
    if spec.kind == "openai":
        from omnidecision.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(spec)
    if spec.kind == "teacher":
        from omnidecision.backends.teacher import TeacherBackend

        return TeacherBackend(**spec.options)
    if spec.kind == "first-actionable":
        from omnidecision.backends.first_actionable import FirstActionableBackend

        return FirstActionableBackend(**spec.options)
    raise ValueError(f"unknown backend kind {spec.kind!r} (known: openai, teacher, first-actionable)")


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
