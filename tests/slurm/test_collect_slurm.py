"""scripts/slurm/collect.slurm submitted for real to the local two-node cluster: an array over both nodes, then the
one merge + harvest job; the same records as `omnidecision collect` run without SLURM; a requeued array task loses
and doubles nothing and queues no second merge; a request no node can hold is refused by the dry run.

    make slurm-test     # or: .venv/bin/pytest -q -m slurm tests/slurm/test_collect_slurm.py
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.slurm.conftest import ROOT, VENV_BIN, Cluster

pytestmark = pytest.mark.slurm

RECIPE = "configs/collect/synthetic-teacher.yaml"
SCRIPT = "scripts/slurm/collect.slurm"
# what differs between two runs of the same decisions: timings and the sandbox's throwaway uid
VOLATILE = {"latency_s", "wall_s", "isolation"}


def synth(tmp: Path, n: int) -> Path:
    out = tmp / f"synth-{n}"
    subprocess.run([str(VENV_BIN / "omnidecision"), "tasks", "synth", "--n", str(n), "--seed", "0", "--out", str(out)],
                   check=True, capture_output=True, cwd=ROOT)
    return out


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob("trajectories*.jsonl")) for line in f.open()]


def stable(value):
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def keyed(recs: list[dict]) -> dict[tuple[str, int], dict]:
    return {(r["task_id"], r["sample"]): stable(r) for r in recs}


def test_collect_array_on_two_nodes_equals_a_local_run(slurm_cluster: Cluster, tmp_path: Path, slurm_results: dict):
    tasks = synth(tmp_path, 24)
    out = tmp_path / "col"
    start = time.monotonic()
    # one array task a node: 2 CPUs each (the local nodes' size)
    array = slurm_cluster.sbatch("--array=0-1", "--cpus-per-task=2", "--mem=2G", f"--output={tmp_path}/%x-%A_%a.out",
                                 SCRIPT, RECIPE, str(out), "--tasks.path", str(tasks))
    tasks_done = slurm_cluster.wait(array, timeout=300)
    assert [t["JobState"] for t in tasks_done] == ["COMPLETED", "COMPLETED"], tasks_done
    assert {t["NodeList"] for t in tasks_done} == {"n1", "n2"}  # spread over both nodes
    merge_id = (out / f".merge-job-{array}").read_text().strip()
    merged = slurm_cluster.wait(merge_id, timeout=300)
    assert merged[0]["JobState"] == "COMPLETED", merged
    slurm_s = time.monotonic() - start

    local = tmp_path / "local"
    start = time.monotonic()
    subprocess.run([str(VENV_BIN / "omnidecision"), "collect", "--config", RECIPE, "--out", str(local), "--tasks.path",
                    str(tasks), "--no-progress"], check=True, capture_output=True, cwd=ROOT)
    local_s = time.monotonic() - start
    on_slurm, here = records(out), records(local)
    assert len(on_slurm) == len(here) == 48
    assert keyed(on_slurm) == keyed(here)  # the same records, order aside
    merged_file = [json.loads(line) for line in (out / "merged" / "trajectories.jsonl").open()]
    assert keyed(merged_file) == keyed(here)
    card = json.loads((Path(f"{out}-harvest") / "data_card.json").read_text())
    assert card, "the harvest wrote its data card"
    slurm_results["collect_array"] = {
        "what": "24 tasks x 2 samples: array of 2 (one a node) + merge + harvest, against one local collect",
        "records": len(on_slurm), "equal_records": True, "slurm_wall_s": round(slurm_s, 1),
        "local_wall_s": round(local_s, 1), "local_collect_only": True}


def test_requeued_collect_task_loses_and_doubles_nothing_and_queues_one_merge(slurm_cluster: Cluster, tmp_path: Path,
                                                                             slurm_results: dict):
    tasks = synth(tmp_path, 400)
    out = tmp_path / "col"
    array = slurm_cluster.sbatch("--array=0-1", "--cpus-per-task=2", "--mem=2G", f"--output={tmp_path}/%x-%A_%a.out",
                                 "--open-mode=append", SCRIPT, RECIPE, str(out), "--tasks.path", str(tasks),
                                 "--concurrency", "2")
    shard0 = out / "trajectories.shard-0-of-2.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (not shard0.exists() or shard0.read_bytes().count(b"\n") < 20):
        time.sleep(0.2)
    written_before = shard0.read_bytes().count(b"\n")
    assert 20 <= written_before < 400, "the task was requeued mid-run"
    slurm_cluster.requeue(f"{array}_0")
    done = slurm_cluster.wait(array, timeout=600)
    assert [t["JobState"] for t in done] == ["COMPLETED", "COMPLETED"], done
    task0 = next(t for t in done if t["ArrayTaskId"] == "0")
    assert task0["Restarts"] == "1"
    log0 = (tmp_path / f"od-collect-{array}_0.out").read_text()
    assert "already done" in log0 and "CANCELLED" in log0 and "DUE TO JOB REQUEUE" in log0

    merge_id = (out / f".merge-job-{array}").read_text().strip()
    assert slurm_cluster.wait(merge_id, timeout=300)[0]["JobState"] == "COMPLETED"
    # a second requeue of the finished task 0: it finds every run done and the merge job there
    slurm_cluster.requeue(f"{array}_0")
    slurm_cluster.wait(f"{array}_0", timeout=300, until={"COMPLETED"})
    assert "is already queued" in (tmp_path / f"od-collect-{array}_0.out").read_text()

    recs = records(out)
    keys = [(r["task_id"], r["sample"]) for r in recs]
    assert len(keys) == len(set(keys)), "no record twice"
    assert set(keys) == {(t, s) for t in {json.loads(line)["id"] for line in (tasks / "tasks.jsonl").open()}
                         for s in range(2)}, "no record lost"
    # every merge job of this array, by the tag collect.slurm gives it (the controller keeps finished jobs an hour)
    merges = {j["JobId"] for j in slurm_cluster.jobs("") if j.get("Comment") == f"array:{array}"}
    assert merges == {merge_id}, merges
    slurm_results["collect_requeue"] = {
        "what": "400 tasks x 2 samples, array of 2; task 0 requeued mid-run, then again after it finished",
        "records_before_requeue": written_before, "records": len(keys), "duplicated": len(keys) - len(set(keys)),
        "lost": 800 - len(set(keys)), "merge_jobs": len(merges), "restarts": 2}


def test_dry_run_refuses_a_request_no_node_can_hold(slurm_cluster: Cluster, tmp_path: Path):
    tasks = synth(tmp_path, 4)
    cmd = ["bash", SCRIPT, RECIPE, str(tmp_path / "col"), "--tasks.path", str(tasks), "--dry-run"]
    too_big = slurm_cluster.run(*cmd, check=False)  # the script's own default: 8 CPUs and 32 GB a task
    assert too_big.returncode == 2, too_big.stderr
    assert "would never start this request" in too_big.stderr and "2 nodes" in too_big.stderr
    fits = subprocess.run(cmd, cwd=ROOT, env=dict(slurm_cluster.env, OD_SBATCH_ARGS="--cpus-per-task=1 --mem=2G"),
        capture_output=True, text=True, timeout=120)
    assert fits.returncode == 0, fits.stderr
    assert "resources ok" in fits.stderr
    assert not (tmp_path / "col").exists(), "a dry run writes nothing"
