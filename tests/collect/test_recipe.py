"""Recipes: every shipped recipe parses, overrides reach any field, bad recipes name the file and the field."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from omnidecision.rollout.recipe import RecipeError, load_recipe, parse_shard
from omnidecision.rollout.selection import select_tasks
from omnidecision.rollout.services import build_services

from .conftest import CLI

CONFIGS = sorted(Path(__file__).resolve().parents[2].joinpath("configs", "collect").glob("*.yaml"))


# What the live recipes need from the environment (no defaults: endpoints, media and benchmark files are the
# user's); test_live_env.py checks that leaving them unset names each one.
LIVE_VARS = {"OD_BASE_URL": "http://127.0.0.1:8000/v1", "OD_MODEL": "planner", "OD_MEDIA_ROOT": "/data/media",
             "OD_PERCEPTION_URL": "http://127.0.0.1:8001/v1", "OD_PERCEPTION_MODEL": "omni",
             "OD_SEARXNG_URL": "http://127.0.0.1:8888", "OD_WORLDSENSE": "/data/worldsense/worldsense_qa.json"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_recipes_parse(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "-live" in path.name:
        for k, v in LIVE_VARS.items():
            monkeypatch.setenv(k, v)
    recipe = load_recipe(path)
    assert recipe.backends and recipe.tasks.path
    if "-live" in path.name:
        assert recipe.environment.kind == "live" and recipe.environment.media_root == "/data/media"
        assert recipe.environment.perception["default"].base_url == "http://127.0.0.1:8001/v1"


def test_synthetic_teacher_recipe_uses_the_teacher_for_every_role() -> None:
    recipe = load_recipe(Path(CONFIGS[0]).with_name("synthetic-teacher.yaml"))
    assert set(recipe.backends) == {"default"} and recipe.backends["default"].kind == "teacher"


def test_overrides_reach_nested_fields(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text("tasks: {path: x}\nbackends: {default: {kind: teacher}}\n", encoding="utf-8")
    r = load_recipe(f, ["agent.step_budget=7", "backends.planner.kind=openai", "backends.planner.model=m",
                        "tasks.limit=3", "shard=1/4", "environment.kind=replay"])
    assert (r.agent.step_budget, r.backends["planner"].model, r.tasks.limit, r.shard_index) == (7, "m", 3, (1, 4))


def test_env_vars_expand_with_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "r.yaml"
    f.write_text("tasks: {path: x}\nbackends: {default: {base_url: '${OD_T_URL:-http://h/v1}', "
                 "model: '${OD_T_A:-${OD_T_B:-fallback}}'}}\n", encoding="utf-8")
    r = load_recipe(f)
    assert (r.backends["default"].base_url, r.backends["default"].model) == ("http://h/v1", "fallback")
    monkeypatch.setenv("OD_T_B", "b")
    assert load_recipe(f).backends["default"].model == "b"
    f.write_text("tasks: {path: x}\nbackends: {default: {model: '${OD_T_UNSET_VAR}'}}\n", encoding="utf-8")
    with pytest.raises(RecipeError, match=r"r\.yaml: backends\.default\.model: environment variable OD_T_UNSET_VAR"):
        load_recipe(f)


@pytest.mark.parametrize(("text", "pattern"), [
    ("tasks: {path: x}\nbackends: {default: {kind: teacher, temprature: 1}}\n", r"backends\.default\.temprature"),
    ("tasks: {path: x}\nbackends: {default: {kind: teacher}}\nagent: {step_budget: 0}\n", r"agent\.step_budget"),
    ("tasks: {path: x}\nbackends: {default: {kind: teacher}}\nshard: 4/4\n", r"shard"),
    ("backends: {default: {kind: teacher}}\n", r"tasks"),
    ("tasks: {path: x}\nbackends: {default: {kind: teacher}}\nconcurrency: many\n", r"concurrency"),
    ("tasks: [unclosed\n", r"r\.yaml:\d+: not valid YAML"),
])
def test_bad_recipe_names_file_and_field(tmp_path: Path, text: str, pattern: str) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(RecipeError, match=r"r\.yaml") as info:
        load_recipe(f)
    assert pytest.importorskip("re").search(pattern, str(info.value)), str(info.value)


def test_parse_shard_rejects_nonsense() -> None:
    for bad in ("1", "2/2", "-1/3", "a/b", "0/0"):
        with pytest.raises(ValueError):
            parse_shard(bad)


def test_cli_bad_recipe_exits_2_with_the_field(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text("tasks: {path: x}\nbackends: {default: {kind: teacher}}\n", encoding="utf-8")
    proc = subprocess.run([*CLI, "collect", "--config", str(f), "--agent.mode", "chaos", "--no-progress"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "r.yaml" in proc.stderr and "agent.mode" in proc.stderr


def test_omnigaia_replay_recipe_builds_per_task_replay_services() -> None:
    small = Path(__file__).resolve().parents[1] / "data" / "omnigaia_small.json"
    recipe = load_recipe(Path(CONFIGS[0]).with_name("omnigaia-replay-api.yaml"), [f"tasks.path={small}"])
    tasks, selected = select_tasks(recipe)
    services = build_services(recipe, selected)
    assert callable(services) and tasks
    svc = services(tasks[0])
    assert svc["replay"] is True and {"search", "media"} <= set(svc)


def test_cli_collect_takes_a_suites_tasks_file_as_its_folder(tmp_path: Path) -> None:
    from omnidecision.tasks.synth import write_suite

    write_suite(3, 1, tmp_path / "synth")
    recipe = str(Path(CONFIGS[0]).with_name("synthetic-teacher.yaml"))
    run = [*CLI, "collect", "--config", recipe, "--no-progress", "--tasks.limit", "2"]
    proc = subprocess.run([*run, "--tasks.path", str(tmp_path / "synth" / "tasks.jsonl"), "--out",
                           str(tmp_path / "a")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "4 new runs" in proc.stdout  # 2 tasks x the recipe's 2 samples
    proc = subprocess.run([*run, "--tasks.path", str(tmp_path / "synth" / "corpus.jsonl"), "--out",
                           str(tmp_path / "b")], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert f"{tmp_path / 'synth' / 'corpus.jsonl'}: a synthetic suite is a folder holding tasks.jsonl" in proc.stderr
    assert "pass that folder" in proc.stderr and "Traceback" not in proc.stderr
