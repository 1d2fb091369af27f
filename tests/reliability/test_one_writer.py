"""One writer per output (issue 65, "Data lost or doubled"): two `omnidecision collect` processes on one `--out` leave
every run once, the second stopping with one line naming the holder; error records are never superseded under a
running appender; a shard that is not UTF-8 JSONL is refused before a byte of it is cut.

    .venv/bin/pytest -q tests/reliability/test_one_writer.py
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.records import run_key
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.runner import run_tasks
from omnidecision.rollout.store import read_records, supersede_errors
from omnidecision.tasks.synth import write_suite

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "collect" / "synthetic-teacher.yaml"
CLI = [sys.executable, "-m", "omnidecision.cli"]


def _collect(tasks, out: Path) -> None:
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"seed": 0})})
    asyncio.run(run_tasks(tasks, AgentConfig(), backends, RolloutOptions(
        out_file=shard_path(out, 0, 1), samples=1, concurrency=4, progress=False)))


@pytest.fixture(scope="module")
def finished(synth_tasks, tmp_path_factory) -> Path:
    """A finished shard of the 12-task suite (one sample each)."""
    out = tmp_path_factory.mktemp("finished")
    _collect(synth_tasks, out)
    return shard_path(out, 0, 1)


def _binary() -> bytes:
    # 4,096 bytes of noise with newlines in it (the cut the issue saw: 4,096 -> 3,282 bytes)
    return bytes((i * 131 + 7) % 256 for i in range(4096))


def _utf16(finished: Path) -> bytes:
    return finished.read_text("utf-8").encode("utf-16")


@pytest.mark.parametrize("kind", ["binary", "binary-no-newline", "utf-16", "utf-16-torn"])
def test_resume_refuses_a_file_it_cannot_read_untouched(kind, synth_tasks, finished, tmp_path) -> None:
    """A restart over a shard that is not UTF-8 JSONL refuses it naming the file, and the file keeps every byte
    (it used to be cut back to its last newline first, then refused)."""
    data = {"binary": _binary(), "binary-no-newline": _binary().replace(b"\n", b"x"), "utf-16": _utf16(finished),
            "utf-16-torn": _utf16(finished)[:-301]}[kind]
    shard = shard_path(tmp_path, 0, 1)
    shard.write_bytes(data)
    with pytest.raises(ValueError, match=str(shard.name)):
        _collect(synth_tasks, tmp_path)
    assert shard.read_bytes() == data


def test_a_torn_utf8_tail_is_still_cut(synth_tasks, finished, tmp_path) -> None:
    """What the check must keep: a run killed mid-write (its line cut inside a multi-byte character) is repaired and
    the collection goes on."""
    shard = shard_path(tmp_path, 0, 1)
    good = finished.read_bytes()
    shard.write_bytes(good + '{"run_id": "x", "question": "caf\u00e9'.encode()[:-1])
    _collect(synth_tasks, tmp_path)
    assert shard.read_bytes() == good  # nothing new to run; the torn bytes gone


HOLD = ("import sys, time\nfrom omnidecision.outputs import exclusive\n"
        "with exclusive(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)\n")


def test_superseding_errors_never_races_an_appender(finished, tmp_path) -> None:
    """While another process holds the shard (an appender), moving its error records aside is refused, naming the
    holder's pid, and the shard is untouched (a rename under an appender loses the appender's lines)."""
    shard = tmp_path / finished.name
    lines = finished.read_text("utf-8").splitlines(keepends=True)
    recs = [rec for _, rec in read_records(finished)]
    recs[0] = recs[0].model_copy(update={"outcome": "error", "answer": None})
    shard.write_text(recs[0].model_dump_json() + "\n" + "".join(lines[1:]), encoding="utf-8")
    before = shard.read_bytes()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(shard)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=rf"another process is writing .*pid {holder.pid}"):
            supersede_errors(shard)
        assert shard.read_bytes() == before
    finally:
        holder.kill()
        holder.wait()
    assert supersede_errors(shard) == 1  # the holder gone: the lock is free again


def _collect_cmd(tasks: Path, out: Path) -> list[str]:
    return [*CLI, "collect", "--config", str(RECIPE), "--tasks.path", str(tasks), "--out", str(out),
            "--no-progress"]


def test_two_collect_processes_on_one_out(tmp_path) -> None:
    """The same collect started twice on one --out (a re-submitted array task), as real processes: every (task,
    sample) has one record, one process exits 0, the other exits 2 with one line naming host, pid and since."""
    tasks = write_suite(60, 3, tmp_path / "synth")
    out = tmp_path / "runs"
    first = subprocess.Popen(_collect_cmd(tasks, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    second = subprocess.Popen(_collect_cmd(tasks, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = [(p.wait(timeout=300), *p.communicate()) for p in (first, second)]
    keys = Counter(run_key(rec) for _, rec in read_records(shard_path(out, 0, 1)))
    assert len(keys) == 60 * 2 and set(keys.values()) == {1}, "a run written twice, or lost"
    assert sorted(rc for rc, _, _ in done) == [0, 2], [err[-2000:] for _, _, err in done]
    refused = next(err for rc, _, err in done if rc == 2).strip().splitlines()
    assert len(refused) == 1 and "Traceback" not in refused[0], refused
    assert "another process is writing" in refused[0] and " pid " in refused[0] and "since " in refused[0]


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> Path:
    """The shard `omnidecision collect` writes (with its manifest.json) over 6 synthetic tasks."""
    root = tmp_path_factory.mktemp("branch")
    tasks = write_suite(6, 5, root / "synth")
    done = subprocess.run([*_collect_cmd(tasks, root / "runs"), "--samples", "1"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return shard_path(root / "runs", 0, 1)


def _branch(collected: Path, out: Path):
    from typer.testing import CliRunner

    from omnidecision.cli import app

    parent = next(r for _, r in read_records(collected) if len(r.steps) >= 2)
    return CliRunner().invoke(app, ["branch", "--trajectories", str(collected), "--run-id", parent.run_id, "--step",
                                    "1", "--decision", '{"action": "finish"}', "--policy", "teacher", "--out",
                                    str(out)])


def test_branch_appends_under_the_lock(collected, tmp_path) -> None:
    """`branch --out FILE` is an appender too: while another process holds FILE it stops with one line naming the
    holder; a FILE that is not UTF-8 JSONL is refused untouched (it used to get a line glued to its bytes)."""
    out = tmp_path / "branches.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        res = _branch(collected, out)
        assert res.exit_code == 2 and f"pid {holder.pid}" in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1 and not out.exists()
    finally:
        holder.kill()
        holder.wait()
    out.write_bytes(_binary())
    res = _branch(collected, out)
    assert res.exit_code == 2 and out.name in res.output and out.read_bytes() == _binary(), res.output
    out.unlink()
    res = _branch(collected, out)
    assert res.exit_code == 0, res.output
    assert len(list(read_records(out))) == 1
