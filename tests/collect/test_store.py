"""The trajectory store: stable shards, torn-tail repair, one writer, errors that name file:line."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omnidecision.protocol.records import RunRecord
from omnidecision.rollout.store import (
    RecordWriter,
    TrajectoryFileError,
    finished_keys,
    merge,
    read_records,
    repair_tail,
    shard_of,
)


def _rec(task: str, sample: int = 0, **kw: object) -> RunRecord:
    return RunRecord(run_id=f"{task}-s{sample}", task_id=task, sample=sample, outcome="accepted", **kw)


@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=60, unique=True), st.integers(1, 9))
def test_shards_partition_the_task_ids(ids: list[str], n: int) -> None:
    parts = [[t for t in ids if shard_of(t, n) == i] for i in range(n)]
    assert sorted(t for p in parts for t in p) == sorted(ids)  # every id in exactly one shard
    assert all(0 <= shard_of(t, n) < n for t in ids)


SHARD_IDS = [f"synth-{i:04d}" for i in range(64)] + ["t1", "omnigaia-35", "ünïcode-id", "x" * 300]
SHARD_PINNED = [1, 2, 1, 1, 1, 3, 1, 1]


@pytest.mark.parametrize("seed", ["0", "1", "4242"])
def test_shard_hash_is_stable_across_processes_and_hash_seeds(seed: str) -> None:
    """Other Python processes, each with its own PYTHONHASHSEED (as on other nodes), shard every id the same way."""
    code = ("import json, sys; from omnidecision.rollout.store import shard_of; "
            "print(json.dumps([shard_of(t, n) for t in json.loads(sys.argv[1]) for n in (2, 4, 7)]))")
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(SHARD_IDS)], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout
    assert json.loads(out) == [shard_of(t, n) for t in SHARD_IDS for n in (2, 4, 7)]
    assert {shard_of(t, 4) for t in SHARD_IDS} == {0, 1, 2, 3}


def test_shard_values_are_pinned() -> None:
    # the values written into shard file names must never move between releases either
    assert [shard_of(f"synth-{i:04d}", 4) for i in range(8)] == SHARD_PINNED


def test_torn_last_line_is_cut_and_complete_lines_kept(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    good = [_rec(f"t{i}").model_dump_json() for i in range(3)]
    torn = _rec("t9").model_dump_json()[:37]
    f.write_text("\n".join(good) + "\n" + torn, encoding="utf-8")
    assert finished_keys(f) == {("t0", 0), ("t1", 0), ("t2", 0)}  # reading ignores the torn tail
    dropped = repair_tail(f)
    assert dropped == len(torn)
    assert f.read_text(encoding="utf-8") == "\n".join(good) + "\n"
    assert repair_tail(f) == 0  # idempotent; never touches complete lines


def test_torn_file_without_any_newline_is_emptied(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"run_id": "x", "task', encoding="utf-8")
    repair_tail(f)
    assert f.read_bytes() == b""


def test_single_writer_never_interleaves(tmp_path: Path) -> None:
    f = tmp_path / "w.jsonl"
    big = "x" * 200_000  # larger than any pipe/page buffer: one record spans many write syscalls

    async def main() -> None:
        async with RecordWriter(f) as w:
            await asyncio.gather(*(w.put(_rec(f"t{i}", answer=big if i % 3 == 0 else str(i))) for i in range(60)))

    asyncio.run(main())
    recs = [r for _, r in read_records(f)]
    assert sorted(r.task_id for r in recs) == sorted(f"t{i}" for i in range(60))


def test_malformed_line_names_file_line_and_field(tmp_path: Path) -> None:
    f = tmp_path / "bad.jsonl"
    ok = _rec("t0").model_dump_json()
    wrong_type = json.loads(_rec("t1").model_dump_json())
    wrong_type["steps"] = [{"step": "zero", "planner_messages": []}]
    f.write_text(ok + "\n" + "{not json\n" + json.dumps(wrong_type) + "\n", encoding="utf-8")
    with pytest.raises(TrajectoryFileError, match=r"bad\.jsonl:2: not valid JSON"):
        list(read_records(f))
    f.write_text(ok + "\n" + json.dumps(wrong_type) + "\n", encoding="utf-8")
    with pytest.raises(TrajectoryFileError, match=r"bad\.jsonl:2: field steps\.0\.step"):
        list(read_records(f))
    bad: list[str] = []
    assert [r.task_id for _, r in read_records(f, skip_bad=True, bad=bad)] == ["t0"]
    assert len(bad) == 1 and "bad.jsonl:2" in bad[0]


def test_merge_keeps_one_record_per_task_sample(tmp_path: Path) -> None:
    a, b = tmp_path / "trajectories.shard-0-of-2.jsonl", tmp_path / "trajectories.shard-1-of-2.jsonl"
    a.write_text("".join(_rec(f"t{i}").model_dump_json() + "\n" for i in range(3)), encoding="utf-8")
    b.write_text("".join(_rec(f"t{i}").model_dump_json() + "\n" for i in range(2, 5)), encoding="utf-8")
    written, dup = merge([tmp_path], tmp_path / "merged" / "all.jsonl")
    assert (written, dup) == (5, 1)
    assert finished_keys(tmp_path / "merged" / "all.jsonl") == {(f"t{i}", 0) for i in range(5)}
