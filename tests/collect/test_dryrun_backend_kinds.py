"""The dry run's backend check reads the backend registry: an in-process kind (replay, first-actionable) is fine,
an unknown kind is an error that lists the registered ones."""

from __future__ import annotations

from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.checks import backend_check


def _status(kind: str) -> tuple[str, str]:
    check = backend_check("backend planner", BackendSpec(kind=kind, model="m"))
    return check.status, check.detail


def test_registered_in_process_kinds_pass():
    for kind in ("replay", "first-actionable", "teacher"):
        status, detail = _status(kind)
        assert status == "ok", (kind, detail)


def test_an_unknown_kind_is_an_error_naming_the_registered_ones():
    status, detail = _status("nope")
    assert status == "error"
    assert "'nope'" in detail and "replay" in detail and "openai" in detail
