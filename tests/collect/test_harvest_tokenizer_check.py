"""`harvest --dry-run` loads the tokenizer its run counts tokens with, by the run's own function
(`harvest.load_tokenizer`): `--tokenizer`, else the tokenizer of the planner the collection served (its
manifest.json's `recipe.serve.model`). One that does not load is the dry run's error and the run's refusal, in the
same words, and nothing is written; a local tokenizer that loads is ok.

    .venv/bin/pytest -q tests/collect/test_harvest_tokenizer_check.py
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.collect.dryrun import harvest_dry_run
from omnidecision.collect.harvest import HarvestError, HarvestOptions, run_harvest
from omnidecision.preflight import Check, DryRunReport
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.runner import run_tasks
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.synth import write_suite


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small teacher collection (4 tasks, one run each), without a manifest.json."""
    root = tmp_path_factory.mktemp("tok-runs")
    tasks = load_tasks(write_suite(4, 3, root / "synth"), "synthetic")
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"seed": 0})})
    out = root / "runs"
    asyncio.run(run_tasks(tasks, AgentConfig(), backends, RolloutOptions(
        out_file=shard_path(out, 0, 1), samples=1, concurrency=4, progress=False)))
    return out


def _tokenizer(report: DryRunReport) -> Check:
    [check] = [c for c in report.checks if c.what == "tokenizer"]
    return check


def _refused_alike(paths: list[str], out: Path, opts: HarvestOptions) -> Check:
    """The dry run's tokenizer error, once the run has refused in its words and written nothing."""
    error = _tokenizer(harvest_dry_run(paths, out, opts))
    assert error.status == "error", error
    with pytest.raises(HarvestError) as refused:
        run_harvest(paths, out, opts)
    assert str(refused.value) == error.detail
    assert not out.exists() and not list(out.parent.glob(f".{out.name}*"))
    return error


def test_a_tokenizer_flag_that_does_not_load_is_refused_by_both(runs: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tok"
    folder.mkdir()
    error = _refused_alike([str(runs)], tmp_path / "h", HarvestOptions(tokenizer=str(folder)))
    assert error.detail.startswith(f"--tokenizer {folder}: its tokenizer does not load")


def test_the_served_planners_tokenizer_is_checked_as_the_run_reads_it(runs: Path, tmp_path: Path) -> None:
    """No --tokenizer: the collection's manifest names the served planner, whose folder holds a tokenizer config
    that does not load."""
    planner = tmp_path / "planner"
    planner.mkdir()
    (planner / "tokenizer_config.json").write_text("{}")
    copy = tmp_path / "runs"
    copy.mkdir()
    shard = shard_path(runs, 0, 1)
    (copy / shard.name).write_bytes(shard.read_bytes())
    (copy / "manifest.json").write_text(json.dumps({"recipe": {"serve": {"model": str(planner)}}}))
    error = _refused_alike([str(copy)], tmp_path / "h", HarvestOptions())
    assert error.detail.startswith(f"the planner the collection served {planner}: its tokenizer does not load")


def test_a_tokenizer_that_loads_is_ok_and_none_counts_characters(runs: Path, tmp_path: Path,
                                                                  tiny_model_dir: Path) -> None:
    ok = _tokenizer(harvest_dry_run([str(runs)], tmp_path / "h", HarvestOptions(tokenizer=str(tiny_model_dir))))
    assert ok.status == "ok" and "loads" in ok.detail, ok
    none = _tokenizer(harvest_dry_run([str(runs)], tmp_path / "h", HarvestOptions()))
    assert none.status == "ok" and "characters" in none.detail
    assert not (tmp_path / "h").exists()
