"""The live environment of a recipe: `collect --dry-run` names every unset variable, endpoint that does not answer
and media file that is missing (instead of failing mid-run), a collection refuses to start until they are there,
the WorldSense recipe's tasks exclude the web tools (visible in the digest), and the two OmniGAIA defaults are
relative to the recipe (no machine path)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from omnidecision.agent.ledger_loop import task_context
from omnidecision.ledger import InitLedger, Ledger, NeedSpec, reduce, render_digest
from omnidecision.rollout.engine import run_rollouts
from omnidecision.rollout.live import build_live_services, live_problems
from omnidecision.rollout.plan import plan_rollouts
from omnidecision.rollout.recipe import RecipeError, load_recipe
from omnidecision.rollout.selection import select_tasks

from .conftest import CLI

ROOT = Path(__file__).resolve().parents[2]
LIVE = ROOT / "configs" / "collect" / "omnigaia-live.yaml"
WORLDSENSE = ROOT / "configs" / "collect" / "worldsense-live.yaml"
DEV = ROOT / "tests" / "data" / "omnigaia_dev" / "dev_metadata.json"
VARS = ("OD_BASE_URL", "OD_MODEL", "OD_MEDIA_ROOT", "OD_PERCEPTION_URL", "OD_PERCEPTION_MODEL", "OD_SEARXNG_URL",
        "OD_OMNIGAIA", "OD_WORLDSENSE", "OD_CRITIC_BASE_URL", "OD_CRITIC_MODEL", "OD_JUDGE_BASE_URL",
        "OD_JUDGE_MODEL")


def dry_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in VARS}
    return subprocess.run([*CLI, "collect", "--dry-run", *args], capture_output=True, text=True, timeout=300,
                          env={**clean, **(env or {})}, cwd=ROOT)


def live_env(media_root: Path, dead: str) -> dict[str, str]:
    """Every variable set; the endpoints point at a port nothing listens on."""
    return {"OD_BASE_URL": f"{dead}/v1", "OD_MODEL": "planner", "OD_MEDIA_ROOT": str(media_root),
            "OD_PERCEPTION_URL": f"{dead}/v1", "OD_PERCEPTION_MODEL": "omni", "OD_SEARXNG_URL": dead}


@pytest.fixture
def dead_url() -> str:
    from omnidecision.serving.vllm_server import free_port

    return f"http://127.0.0.1:{free_port()}"


def test_dry_run_names_every_unset_variable_with_its_field():
    proc = dry_run("--config", str(LIVE))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    for field, var in [("backends.default.base_url", "OD_BASE_URL"), ("backends.default.model", "OD_MODEL"),
                       ("environment.media_root", "OD_MEDIA_ROOT"),
                       ("environment.perception.default.base_url", "OD_PERCEPTION_URL"),
                       ("environment.perception.default.model", "OD_PERCEPTION_MODEL"),
                       ("environment.search.base_url", "OD_SEARXNG_URL")]:
        assert f"{field}: environment variable {var} is not set" in proc.stderr, (field, proc.stderr)


def test_dry_run_names_dead_endpoints_and_each_missing_media_file(tmp_path, dead_url):
    # the media root holds the files of the dev subset's first record only
    (tmp_path / "images").mkdir()
    (tmp_path / "audios").mkdir()
    (tmp_path / "images" / "000000081303.jpg").write_bytes(b"jpeg")
    (tmp_path / "audios" / "4_Eh16C9Qgg.wav").write_bytes(b"wav")
    proc = dry_run("--config", str(LIVE), "--tasks.limit", "3", env=live_env(tmp_path, dead_url))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    err = proc.stderr
    assert f"backends.default: {dead_url}/v1/models does not answer" in err
    assert f"environment.perception.default: {dead_url}/v1/models does not answer" in err
    assert f"environment.search: {dead_url} does not answer" in err
    assert err.count(f"{dead_url}/v1/models does not answer") == 4  # planner, critic, judge, perception: once each
    assert f"task 10: media file images/000000084313.jpg not found under {tmp_path}" in err
    assert f"task 15: media file videos/NpYUxd1vUUE.mp4 not found under {tmp_path}" in err
    assert "task 5:" not in err  # its files are there
    assert "runs 3 x 1 samples" in proc.stdout


def test_a_live_collection_refuses_to_start_while_something_is_missing(tmp_path, dead_url, monkeypatch):
    for k, v in live_env(tmp_path, dead_url).items():
        monkeypatch.setenv(k, v)
    recipe = load_recipe(LIVE, ["tasks.limit=2", f"out={tmp_path / 'out'}", "progress=false"])

    # the run refuses on its plan's checklist, in the dry run's first error line (the dry run lists them all, above)
    plan = plan_rollouts(recipe, probe=False)
    errors = [c for c in plan.checks if c.status == "error"]
    first = errors[0]
    assert first.what == "environment" and first.detail.startswith("task 5: media file"), first
    assert len(errors) > 1  # the other task's media: counted, not dropped
    with pytest.raises(RecipeError) as refused:
        asyncio.run(run_rollouts(recipe))
    assert str(refused.value) == (f"environment: {first.detail} (and {len(errors) - 1} more failed checks: "
                                  "--dry-run lists them)")
    assert not (tmp_path / "out").exists()  # nothing written: no folder, no manifest, no run


def test_worldsense_live_tasks_exclude_the_web_tools(tmp_path, monkeypatch, write_video_file):
    data = ROOT / "tests" / "data" / "worldsense"
    media = tmp_path / "media"
    media.mkdir()
    write_video_file(media / "vidA.mp4")
    for k, v in {"OD_WORLDSENSE": str(data / "worldsense_qa.json"), "OD_MEDIA_ROOT": str(media),
                 "OD_PERCEPTION_URL": "http://127.0.0.1:1/v1", "OD_PERCEPTION_MODEL": "omni",
                 "OD_BASE_URL": "http://127.0.0.1:1/v1", "OD_MODEL": "planner"}.items():
        monkeypatch.setenv(k, v)
    recipe = load_recipe(WORLDSENSE)
    tasks, _ = select_tasks(recipe)
    assert {t.id for t in tasks} == {"vidA-task0", "vidA-task1", "vidB-task0"}
    for t in tasks:
        assert t.tools == ["subtitle_grounding", "audio_scouting", "clip_grounding", "frame_confirmation",
                           "code_executor"]
    vid_a = next(t for t in tasks if t.id == "vidA-task0")
    assert vid_a.assets[0].duration == 12.5 and vid_a.assets[0].path == str((media / "vidA.mp4").resolve())
    problems = live_problems(recipe, tasks)
    assert not any("search" in p for p in problems)  # no task may search: no search API is asked for
    assert any(p.startswith("task vidB-task0: media file vidB{.mp4") for p in problems)
    # the digest's R0 shows the tool set and the options
    digest = render_digest(reduce(Ledger(), InitLedger(question=vid_a.question, context=task_context(vid_a),
                                                       needs=[NeedSpec(description="x")])))
    assert "TOOLS: subtitle_grounding, audio_scouting, clip_grounding, frame_confirmation, code_executor" in digest
    assert "OPTIONS: A. Run | B. Stop | C. Jump | D. Sit" in digest and "ASSETS: vidA (video 12.5s)" in digest
    services = build_live_services(recipe.environment)
    assert services["live"] is True and services["search"].engine is None and "media" in services


def test_omnigaia_recipes_default_to_the_dev_subset_relative_to_the_recipe(monkeypatch):
    monkeypatch.delenv("OD_OMNIGAIA", raising=False)
    for name in ("configs/collect/omnigaia-replay-api.yaml", "configs/eval/omnigaia-replay.yaml"):
        text = (ROOT / name).read_text("utf-8")
        assert "shared/" not in text and "/work" not in text
    from omnidecision.eval.runner import load_eval_recipe

    for recipe in (load_recipe(ROOT / "configs/collect/omnigaia-replay-api.yaml"),
                   load_eval_recipe(ROOT / "configs/eval/omnigaia-replay.yaml")):
        assert Path(recipe.tasks.path).resolve() == DEV.resolve()
    monkeypatch.setenv("OD_OMNIGAIA", "/data/omnigaia/test_metadata.json")
    assert load_recipe(ROOT / "configs/collect/omnigaia-replay-api.yaml").tasks.path == \
        "/data/omnigaia/test_metadata.json"
