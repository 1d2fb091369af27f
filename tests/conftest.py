"""Shared fixtures: the OmniGAIA dev subset (in the repository), a session-scoped tiny planner checkpoint and a
session-scoped vLLM server serving it; the one policy for skips; and the worker scopes of `make test` (pytest-xdist,
`worker_scope`: a folder's tests on one worker, the server's test files on one).

Skips: a test that needs an optional dependency says so with `@pytest.mark.requires("trl", ...)` (or a module's
`pytestmark`); without it the test skips on a developer's machine. Under CI=true (`.ci/run`) every skip fails the
run instead, whatever raised it (this marker, `pytest.skip` in a fixture, `skipif`, a module-level
`importorskip`), unless the test is marked `gpu` or `slow`: CI is where a broken import or a missing tool must not
make tests vanish silently. Tests that use `vllm_server` are marked `vllm` and `requires("vllm")` automatically.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Generator
from functools import cache
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
# Markers whose tests may skip even in CI: a GPU-only test on a CPU runner (or a CPU-path check on a GPU machine),
# and slow tests (their own target, `make slow-test`, decides what they need).
SKIP_ALLOWED_MARKERS = ("gpu", "slow")

# A copy of ../shared/data/omnigaia/dev_metadata.json kept in the repository (tests/data/omnigaia_dev/README.md):
# a checkout anywhere runs the tests that need it.
TESTS = Path(__file__).resolve().parent
OMNIGAIA_DEV = TESTS / "data" / "omnigaia_dev" / "dev_metadata.json"

# vLLM-CPU's attention kernels do not support head_dim 16 (the builder's 64x2 default with 4 heads):
# 64 hidden / 2 heads = head_dim 32 serves and trains the same.
TINY_KWARGS = {"hidden": 64, "layers": 2, "heads": 2}


def pytest_configure(config: pytest.Config) -> None:
    # registered here, next to the hook that reads them (tests/test_ci_skips.py runs this file on its own)
    config.addinivalue_line("markers", "requires(*modules): the test needs these importable modules; it skips "
                                       "without them, and fails under CI=true")
    config.addinivalue_line("markers", "gpu: depends on the machine's GPU (needs one, or checks the CPU path); "
                                       "may skip under CI=true")


def worker_scope(nodeid: str, rootpath: Path) -> str:
    """The worker scope of a test under `make test` (pytest-xdist, `--dist loadscope`, widened here): "vllm" for every
    test file with a test or fixture that takes the session's `vllm_server` (one server, on one worker), else the
    test's folder under tests/ (its session fixtures, the tiny models and collections its tests share, built once; its
    tests in their order). From the test id alone: the scheduler sees ids, not tests."""
    file = (rootpath / nodeid.split("::", 1)[0]).resolve()
    if _takes_the_server(file):
        return "vllm"
    parts = file.relative_to(TESTS).parts if file.is_relative_to(TESTS) else ()
    return parts[0] if len(parts) > 1 else "tests"


@cache
def _takes_the_server(file: Path) -> bool:
    try:
        text = file.read_text("utf-8")
    except OSError:
        return False
    return re.search(r"def \w+\([^)]*\bvllm_server\b", text) is not None


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own; a run without pytest-xdist never calls it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getvalue("dist") != "loadscope":
        return None
    # pytest-xdist is there when this hook is called; a plain `pytest` may run without it installed
    from xdist.scheduler import LoadScopeScheduling

    class FolderScheduling(LoadScopeScheduling):
        """xdist's scope scheduling (whole scopes to a worker, in order) with `worker_scope` as the scope."""

        def _split_scope(self, nodeid: str) -> str:
            return worker_scope(nodeid, config.rootpath)

    return FolderScheduling(config, log)  # type: ignore[arg-type]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "vllm_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.vllm)
            item.add_marker(pytest.mark.requires("vllm"))


@cache
def _import_error(module: str) -> str | None:
    """Why `module` cannot be imported, or None. A real import, not `find_spec`: a missing package it needs counts.
    Only a missing module is a reason to skip (as `importorskip`); any other import error is the test's error."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        return f"{type(e).__name__}: {e}"
    return None


@pytest.hookimpl(tryfirst=True)  # before the fixtures are set up: a missing vllm never starts a server
def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("requires"):
        for module in marker.args:
            if (why := _import_error(module)) is not None:
                pytest.skip(f"missing dependency {module!r} ({why}): make install")


def _skip_allowed(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in SKIP_ALLOWED_MARKERS)


def _ci_failure(reason: object) -> str:
    text = reason[2] if isinstance(reason, tuple) and len(reason) == 3 else str(reason)
    return (f"CI=true: this skip fails the run (install what is missing: make install; or mark the test gpu/slow "
            f"if skipping is legitimate): {text}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator[None, object, None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if IN_CI and report.skipped and not hasattr(report, "wasxfail") and not _skip_allowed(item):
        report.outcome, report.longrepr = "failed", _ci_failure(report.longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, object, None]:
    """A module- or folder-level skip (`importorskip` at import time) hides every test in it: under CI it fails.
    No marker can allow it (the module never finished importing): such guards belong in `requires`."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if IN_CI and report.skipped:
        report.outcome, report.longrepr = "failed", _ci_failure(report.longrepr)


@pytest.fixture
def hub_unreachable(monkeypatch):
    """A login node that cannot ask the hub: HF_HUB_OFFLINE unset and HF_ENDPOINT a closed port on this machine (no
    request leaves it), so a hub id that is not cached is reported "not checked" (a warning), as on a cluster's
    login node without network; with HF_HUB_OFFLINE=1 (CI, .ci/run) it would be an error (omnidecision/inputs.py)."""
    from omnidecision.inputs import on_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    on_hub.cache_clear()
    yield
    on_hub.cache_clear()


@pytest.fixture(scope="session")
def omnigaia_dev() -> Path:
    """The OmniGAIA dev subset (72 records). Missing, it fails: a test that needs it never skips."""
    if not OMNIGAIA_DEV.is_file():
        pytest.fail(f"{OMNIGAIA_DEV} is missing: restore it from git (tests/data/omnigaia_dev)")
    return OMNIGAIA_DEV


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A from-scratch tiny Qwen3 planner (HF checkpoint + tokenizer with a chat template), built once."""
    from omnidecision.synthetic.tiny import build_tiny_planner

    return build_tiny_planner(tmp_path_factory.mktemp("tiny") / "planner", **TINY_KWARGS)


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir):
    """A vLLM OpenAI-compatible server (vllm-cpu here) serving the tiny planner as model `planner`. Its tests carry
    `requires("vllm")` (pytest_collection_modifyitems), checked before this fixture starts anything."""
    from omnidecision.serving.vllm_server import VLLMServer

    with VLLMServer(tiny_model_dir, served_name="planner", max_model_len=4096) as server:
        yield server
