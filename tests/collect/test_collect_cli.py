"""The `collect` command line: `collect merge` is a real subcommand (its own --help, its own options), the flags that
repeat a `--key.path` override say so in --help (the old shortcuts of overrides are hidden), and options and
overrides mix in any order. The run loop takes one options object built from the recipe.

    .venv/bin/pytest tests/collect/test_collect_cli.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.recipe import load_recipe
from omnidecision.rollout.store import read_records

ROOT = Path(__file__).resolve().parents[2]
TEACHER = ROOT / "configs" / "collect" / "synthetic-teacher.yaml"


def _invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def test_collect_merge_has_its_own_help():
    res = _invoke(["collect", "merge", "--help"])
    assert res.exit_code == 0, res.output
    assert "--out" in res.output and "shard files" in res.output
    assert "--concurrency" not in res.output  # the collect options are not merge's


def test_collect_help_lists_merge_and_the_aliases():
    res = _invoke(["collect", "--help"])
    assert res.exit_code == 0, res.output
    assert "merge" in res.output and "--key.path" in res.output
    for alias in ("--progress false", "--retry_errors false"):
        assert f"alias of {alias}" in res.output, alias
    # the old shortcuts of --tasks.path, --tasks.format, --tasks.limit, --agent.mode work but are not shown
    # (CHANGELOG.md, "Deprecated"; tests/architecture/test_flag_spelling.py runs them)
    for old in ("--tasks ", "--format", "--limit", "--mode"):
        assert old not in res.output, old


def test_collect_merge_merges_and_names_what_is_missing(teacher_runs, tmp_path):
    res = _invoke(["collect", "merge", str(teacher_runs)])
    assert res.exit_code == 2 and "--out" in res.output
    merged = tmp_path / "merged.jsonl"
    res = _invoke(["collect", "merge", str(teacher_runs), "--out", str(merged)])
    assert res.exit_code == 0, res.output
    n = len(list(read_records(shard_path(teacher_runs, 0, 1))))
    assert f"merged {n} records" in res.output and len(list(read_records(merged))) == n


def test_options_and_overrides_mix_in_any_order(tmp_path):
    res = _invoke(["collect", "--config", str(TEACHER), "--agent.step_budget", "7", "--concurrency", "3",
                   "--out", str(tmp_path / "o"), "--no-progress", "--samples", "2", "--dry-run"])
    report = json.loads(res.stdout[res.stdout.index("{"):])
    resolved = report["resolved"]
    assert resolved["agent"]["step_budget"] == 7 and resolved["concurrency"] == 3 and resolved["samples"] == 2
    assert resolved["progress"] is False and resolved["out"] == str(tmp_path / "o")


def test_options_come_from_the_recipe(tmp_path):
    recipe = load_recipe(TEACHER, [f"out={tmp_path}", "shard=1/3", "samples=2", "concurrency=5",
                                   "retry_errors=false", "judge.scorer=gaia", "breaker.requeue=0"])
    options = RolloutOptions.from_recipe(recipe)
    assert options.out_file == shard_path(tmp_path, 1, 3) and options.desc == "collect 1/3"
    assert (options.samples, options.concurrency, options.retry_errors, options.judge_scorer) == (2, 5, False, "gaia")
    assert options.breaker.requeue == 0 and options.judge is recipe.judge.enabled
    assert RolloutOptions.from_recipe(recipe, out_file=tmp_path / "x.jsonl", progress=False).out_file == \
        tmp_path / "x.jsonl"
