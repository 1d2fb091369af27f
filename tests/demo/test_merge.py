"""Pooling the starts of earlier result files with a new run's (pipeline/merge.py, `experiment --pool-with`): the
same result as pooling every start at once, and a clear refusal where the protocol differs (fast: no training)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from omnidecision.pipeline.arms import ARMS, planners
from omnidecision.pipeline.experiment import ExperimentRecipe, pool
from omnidecision.pipeline.merge import MergeError, merge_results, read_result

FAMILIES = ("conflict", "source_switch", "tight_budget")
RECIPE = ExperimentRecipe(starts=[0, 1, 2], replicates=2, test_tasks=12, planned=["grpo_judge-sft", "grpo-sft"])


def _summary(seed: int, rng: random.Random) -> dict:
    """A start's summary.json as summarise writes it, with random outcomes: what pool reads of it."""
    tasks = [f"syn-{seed}-{i:03d}" for i in range(12)]
    family = {t: FAMILIES[i % len(FAMILIES)] for i, t in enumerate(tasks)}
    planners_out, nested = {}, {}
    for n in planners(ARMS):
        reps = {f"r{k}": {t: float(rng.random() < 0.6) for t in tasks} for k in range(1 if n == "sft" else 2)}
        nested[n] = {str(seed): reps}
        acc = {r: sum(v.values()) / len(v) for r, v in reps.items()}
        by_family = {f: {"n": 4, "accuracy": sum(sum(v[t] for t in tasks if family[t] == f) / 4
                                                 for v in reps.values()) / len(reps)} for f in FAMILIES}
        decisions = {kind: {"replicates": {r: rng.random() for r in reps}, "states": rng.randint(5, 20),
                            "events": rng.randint(0, 5)} for kind in ("repeat_after_empty", "premature_finish")}
        decisions["by_family"] = {f: {kind: {"states": 3, "events": rng.randint(0, 3)}
                                      for kind in ("repeat_after_empty", "premature_finish")} for f in FAMILIES}
        planners_out[n] = {"accuracy": sum(acc.values()) / len(acc), "replicates": acc, "by_family": by_family,
                           "decisions": decisions}
    return {"seed": seed, "planners": planners_out, "outcomes_by_replicate": nested, "paired_in_loop": [],
            "judge_eval": {"n": 10}, "total_wall_s": 100.0 + seed, "budget": {"sft": {"rows": 1}},
            "provenance": {"cpu": f"cpu-{seed}"}, "serving_parity": None}


def _result(summaries: list[dict], recipe: ExperimentRecipe) -> dict:
    res = pool(summaries, [], recipe.model_copy(update={"starts": [s["seed"] for s in summaries]}))
    res["test_tasks_per_seed"] = recipe.test_tasks
    return json.loads(json.dumps(res))  # as read back from the file


def test_pooling_a_later_start_with_an_earlier_file_equals_pooling_every_start_at_once():
    rng = random.Random(7)
    summaries = [_summary(s, rng) for s in (0, 1, 2)]
    whole = _result(summaries, RECIPE)
    merged = json.loads(json.dumps(merge_results([("a.json", _result(summaries[:2], RECIPE)),
                                                  ("b.json", _result(summaries[2:], RECIPE))], RECIPE)))
    for key in ("seeds", "per_seed_accuracy", "pooled_accuracy", "pooled_n", "pooled_paired", "outcomes",
                "per_replicate_accuracy", "wall_s", "provenance", "budget", "recipe"):
        assert merged[key] == whole[key], key
    assert merged["contrasts"]["planned"] == whole["contrasts"]["planned"]
    assert merged["contrasts"]["exploratory"] == whole["contrasts"]["exploratory"]
    for fam, cells in whole["pooled_by_family"].items():
        assert merged["pooled_by_family"][fam] == pytest.approx(cells, abs=1e-4), fam
    for n, d in whole["decisions"].items():
        for kind in ("repeat_after_empty", "premature_finish"):
            got, want = merged["decisions"][n][kind], d[kind]
            assert got["replicates"] == want["replicates"] and got["rate"] == pytest.approx(want["rate"], abs=1e-4)
            assert (got["states"], got["events"]) == (want["states"], want["events"]), (n, kind)
        assert merged["decisions"][n]["by_family"] == d["by_family"], n
    assert [p["file"] for p in merged["pooled_from"]] == ["a.json", "b.json"]
    assert merged["pooled_from"][1] == {"file": "b.json", "starts": [2], "git_revision": None, "cpu": ["cpu-2"]}
    # pooled again with a later start, the merged file keeps its two sources
    later = _result([_summary(3, rng)], RECIPE)
    again = merge_results([("merged.json", merged), ("c.json", later)], RECIPE)
    assert [p["file"] for p in again["pooled_from"]] == ["a.json", "b.json", "c.json"]


def test_files_that_share_a_start_or_differ_in_protocol_are_refused_by_name():
    rng = random.Random(3)
    a = _result([_summary(0, rng)], RECIPE)
    with pytest.raises(MergeError, match="start 0 is also in a.json"):
        merge_results([("a.json", a), ("b.json", _result([_summary(0, rng)], RECIPE))], RECIPE)
    other = RECIPE.model_copy(update={"grpo_steps": 99})
    with pytest.raises(MergeError, match=r"b.json: its recipe differs from a.json's in grpo_steps: 30 vs 99"):
        merge_results([("a.json", a), ("b.json", _result([_summary(1, rng)], other))], RECIPE)


def test_a_recipe_field_added_later_reads_as_its_default_in_an_older_file():
    """A file written before `oracle_switch_copies` existed ran without copies: it pools with a recipe that says 1
    and is refused beside one that says 4."""
    rng = random.Random(5)
    old = _result([_summary(0, rng)], RECIPE)
    del old["recipe"]["oracle_switch_copies"]
    merged = merge_results([("old.json", old), ("new.json", _result([_summary(1, rng)], RECIPE))], RECIPE)
    assert merged["seeds"] == [0, 1]
    four = RECIPE.model_copy(update={"oracle_switch_copies": 4})
    with pytest.raises(MergeError, match="oracle_switch_copies: 1 vs 4"):
        merge_results([("old.json", old), ("four.json", _result([_summary(2, rng)], four))], RECIPE)


@pytest.mark.parametrize(("text", "needle"), [("{not json", "not JSON (line 1"), ('{"seeds": [0]}', "no recipe"),
                                              ("[1, 2]", "not an experiment result")])
def test_a_broken_result_file_is_named_with_what_is_wrong(tmp_path, text, needle):
    bad = tmp_path / "old.json"
    bad.write_text(text)
    with pytest.raises(MergeError, match="old.json") as err:
        read_result(bad)
    assert needle in str(err.value)


def test_the_cli_refuses_a_bad_pool_with_file_before_anything_runs(tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text("{}")
    proc = subprocess.run([sys.executable, "-m", "omnidecision.cli", "experiment", "--out", str(tmp_path / "out"),
                           "--pool-with", str(bad)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "300"})  # rich wraps the error box at 80 otherwise
    assert proc.returncode == 2 and "old.json: not an experiment result" in proc.stderr
    assert not (tmp_path / "out").exists()  # refused before a start ran
