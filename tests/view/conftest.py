"""Fixtures of the viewer tests: real runs made by the project's own commands, and a real headless Chromium.

The runs come from `omnidecision tasks synth`, `collect` and `eval` (scripted teacher, offline), plus a few runs of
the real agent loop whose planner's first decision targets a blocked need (the loop rejects it). The browser is
the distribution's chromium (installed by `make browser`, which `.ci/run` calls) driven by playwright's Python
API; where it is missing the browser tests skip locally and FAIL under CI (CI=true).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.protocol.chat import ChatRequest, ChatResponse, Usage

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("OMNIDECISION_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "view"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def cli(*args: str) -> str:
    """Run an `omnidecision` command in-process; returns its output (stdout and stderr), fails the test on error."""
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, f"omnidecision {' '.join(args)} exited {result.exit_code}:\n{result.output}"
    return result.output


class BlockedFirst:
    """The scripted teacher as every role, except that the planner's first decision targets a need that is not
    actionable (a blocked one, else an unknown index): the loop must reject it with its reason."""

    def __init__(self) -> None:
        from omnidecision.backends.teacher import TeacherBackend

        self.teacher = TeacherBackend(noise=0.0, seed=0)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        from omnidecision.ledger import blocked_need_indices

        ledger = request.context.get("ledger")
        if request.role == "planner" and ledger is not None and ledger.step == 0:
            blocked = blocked_need_indices(ledger)
            need = blocked[0] if blocked else len(ledger.needs)
            text = json.dumps({"action": "call", "need": need})
            return ChatResponse(text=text, usage=Usage(), model="blocked-first")
        return await self.teacher.chat(request)


@dataclass
class Runs:
    synth: Path
    collection: Path  # a collect folder (teacher with noise, 2 samples)
    ledger_eval: Path  # an eval folder (report.json, plots)
    react_eval: Path  # the same tasks in react mode
    rejected: Path  # a JSONL file whose runs each start with a rejected decision

    @property
    def all(self) -> list[Path]:
        return [self.ledger_eval, self.react_eval, self.collection, self.rejected]


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    base = tmp_path_factory.mktemp("view-runs")
    synth, coll, ev_a, ev_b = base / "synth", base / "collect", base / "eval-ledger", base / "eval-react"
    cli("tasks", "synth", "--n", "16", "--seed", "5", "--out", str(synth))
    cli("collect", "--config", str(ROOT / "configs/collect/synthetic-teacher.yaml"), "--tasks.path", str(synth),
        "--out", str(coll), "--backends.default.options.noise", "0.3", "--no-progress")
    eval_cfg = str(ROOT / "configs/eval/synthetic-teacher.yaml")
    cli("eval", "--config", eval_cfg, "--tasks.path", str(synth), "--backends.default.options.noise", "0.3",
        "--out", str(ev_a), "--no-progress")
    cli("eval", "--config", eval_cfg, "--tasks.path", str(synth), "--agent.mode", "react",
        "--name", "react", "--out", str(ev_b), "--no-progress")
    # -- runs of the real loop whose first decision is rejected
    from omnidecision.agent.config import AgentConfig
    from omnidecision.agent.loop import run_task
    from omnidecision.tasks.synth import load_suite

    tasks = load_suite(synth)[:4]
    backends = {"default": BlockedFirst()}

    async def run_all():
        return await asyncio.gather(*[run_task(t, AgentConfig(), backends) for t in tasks])

    rejected = base / "rejected.jsonl"
    rejected.write_text("".join(r.model_dump_json() + "\n" for r in asyncio.run(run_all())), "utf-8")
    return Runs(synth, coll, ev_a, ev_b, rejected)


@pytest.fixture(scope="session")
def site(runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The view of all four sources, written by the CLI."""
    out = tmp_path_factory.mktemp("site")
    cli("view", *map(str, runs.all), "--out", str(out))
    return out


def _chromium() -> str | None:
    return os.environ.get("OMNIDECISION_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why}: CI must run the browser tests "
                    "(`make browser` installs chromium, `make install` playwright)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (the distribution's binary) driven by playwright; nothing is downloaded. One per module:
    playwright's sync API refuses to start while another is open, so a session-long one would fail every later test
    that drives its own (tests/docs/test_site.py, when it runs after these)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed")
    exe = _chromium()
    if exe is None:
        _missing("no chromium binary on PATH")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@dataclass
class Page:
    """A browser page that records console errors, page errors and every request it made."""

    page: object
    errors: list[str]
    requests: list[str]


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    requests: list[str] = []
    pg.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning")
          else None)
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    pg.on("request", lambda r: requests.append(r.url))
    yield Page(pg, errors, requests)
    context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
