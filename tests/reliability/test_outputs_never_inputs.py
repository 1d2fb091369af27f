"""Outputs never overwrite inputs, and state files are never half-written (issue 65, "Data lost or doubled").

- `rft-select --dataset_name D/harvest --out D` (an --out holding its own input), as a real process: its dry run and
  its run refuse with one line, and D keeps every file (it used to be deleted, exit 0);
- harvest refuses an --out that is, holds or lies inside a collection it reads, and a non-empty folder it did not
  write (unless --replace); it replaces its own earlier output; `collect merge` refuses an --out that is one of the
  files it merges;
- the pipeline's restart state (stage_wall_s.json, steps.json): a reader never sees a half-written file, and a
  damaged one stops the restart with one line naming it (it used to be a JSONDecodeError traceback).

    .venv/bin/pytest -q tests/reliability/test_outputs_never_inputs.py
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.collect.harvest import run_harvest
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.runner import run_tasks
from omnidecision.rollout.store import merge

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "omnidecision.cli"]


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs(synth_tasks, tmp_path_factory) -> Path:
    """A finished collection folder (12 tasks, one sample each, the teacher)."""
    out = tmp_path_factory.mktemp("c") / "runs"
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"seed": 0})})
    asyncio.run(run_tasks(synth_tasks, AgentConfig(), backends, RolloutOptions(
        out_file=shard_path(out, 0, 1), samples=1, concurrency=4, progress=False)))
    return out


@pytest.mark.long  # an end-to-end repeat of a stage the fast suite covers: `make long-test` (CI runs it)
@pytest.mark.requires("trl")
def test_rft_select_refuses_an_out_that_holds_its_input(tmp_path) -> None:
    from omnidecision.rl.data import write_rl_dataset
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    model = build_tiny_planner(tmp_path / "model", texts=list(default_corpus(n=100)), hidden=32, layers=1, heads=2)
    d = tmp_path / "D"
    write_rl_dataset(d / "harvest", n_train=8, n_validation=4, seed=3)
    (d / "notes.txt").write_text("an unrelated file\n", encoding="utf-8")
    before = _tree(d)
    cmd = [*CLI, "rft-select", "--config", str(ROOT / "configs" / "grpo" / "tiny-cpu.yaml"), "--model_name_or_path",
           str(model), "--dataset_name", str(d / "harvest"), "--out", str(d), "--max_steps", "1", "--num_generations",
           "2", "--per_device_train_batch_size", "2", "--generation_batch_size", "2", "--max_completion_length", "8",
           "--max-states", "2", "--checkpoint_policy", "final"]
    dry = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, timeout=600)
    assert dry.returncode == 2, dry.stdout[-2000:] + dry.stderr[-2000:]
    assert f"--out {d} contains the input {d / 'harvest'}" in dry.stdout + dry.stderr
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stderr[-2000:]
    lines = run.stderr.strip().splitlines()
    assert "Traceback" not in run.stderr and f"--out {d} contains the input" in lines[-1], lines[-5:]
    assert _tree(d) == before, "rft-select touched the folder holding its input"


def test_harvest_refuses_an_out_that_overlaps_a_collection(runs) -> None:
    before = _tree(runs)
    for out, how in ((runs, "is"), (runs.parent, "contains"), (runs / "data", "is inside")):
        with pytest.raises(ValueError, match=rf"--out {out} {how} the input {runs}"):
            run_harvest([str(runs)], out)
        assert _tree(runs) == before, f"harvest --out {out} changed the collection it reads"


def test_harvest_replaces_only_what_it_wrote_or_was_told_to(runs, tmp_path) -> None:
    mine = tmp_path / "h"
    run_harvest([str(runs)], mine)
    run_harvest([str(runs)], mine)  # its own earlier output (marked): replaced
    assert (mine / "stats.json").is_file() and not list(tmp_path.glob(".h.*")), "a temp folder left behind"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "thesis.tex").write_text("months of work\n", encoding="utf-8")
    with pytest.raises(ValueError, match="non-empty folder this project did not write"):
        run_harvest([str(runs)], theirs)
    assert (theirs / "thesis.tex").read_text(encoding="utf-8") == "months of work\n"
    run_harvest([str(runs)], theirs, replace=True)  # told to
    assert (theirs / "stats.json").is_file() and not (theirs / "thesis.tex").exists()


def test_merge_refuses_an_out_that_is_one_of_its_files(runs, tmp_path) -> None:
    shard = tmp_path / "one.jsonl"
    shard.write_bytes(shard_path(runs, 0, 1).read_bytes())
    before = shard.read_bytes()
    with pytest.raises(ValueError, match="is one of the files to merge"):
        merge([shard], shard)
    assert shard.read_bytes() == before


def test_a_damaged_restart_state_stops_with_one_line(tmp_path) -> None:
    """The experiment's restart over an emptied stage_wall_s.json (a kill of the old in-place write): one line naming
    the file, no traceback."""
    out = tmp_path / "demo"
    out.mkdir()
    (out / "stage_wall_s.json").write_text("", encoding="utf-8")
    done = subprocess.run([*CLI, "demo", "--quick", "--out", str(out), "--only", "synth-test"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "stage_wall_s.json" in lines[0] and "delete it" in lines[0]


def test_restart_state_is_never_seen_half_written(tmp_path, monkeypatch) -> None:
    """Every save of the plan's state replaces the file whole: a reader polling it while 300 steps finish never reads
    an empty or torn file (the in-place write truncated it first; a kill there left it empty)."""
    from omnidecision.pipeline import scheduler
    from omnidecision.pipeline.plan import Step

    def execute(self, step, quiet=False):  # a step that finishes at once: only the bookkeeping runs
        with self.lock:
            self.times[step.name] = 0.1
            self.records[step.name] = {"argv": step.argv, "pad": "x" * 2000}
            self.on_done()

    monkeypatch.setattr(scheduler.Runner, "execute", execute)
    out = tmp_path / "plan"
    out.mkdir()
    plan = [Step(name=f"s{i:03d}", argv=["noop"], reads=[], writes=[]) for i in range(300)]
    bad: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for name in ("stage_wall_s.json", "steps.json"):
                try:
                    json.loads((out / name).read_text("utf-8"))
                except FileNotFoundError:
                    pass
                except ValueError as exc:
                    bad.append(f"{name}: {exc}")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        scheduler.run_plan(plan, out, jobs=1)
    finally:
        stop.set()
        thread.join()
    assert not bad, bad[:3]
    assert len(json.loads((out / "stage_wall_s.json").read_text("utf-8"))) == 300


def test_export_refuses_an_out_that_holds_its_checkpoint(tmp_path) -> None:
    """`export RUN/checkpoint-N --out RUN` used to write the exported weights over the run's own final weights."""
    from omnidecision.export import export
    from omnidecision.preflight import PreflightError
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    run = tmp_path / "run"
    build_tiny_planner(run / "checkpoint-1", texts=list(default_corpus(n=50)), hidden=16, layers=1, heads=2)
    (run / "model.safetensors").write_bytes(b"the run's final weights")
    before = _tree(run)
    with pytest.raises(PreflightError, match=rf"--out {run} contains the input {run / 'checkpoint-1'}"):
        export(run / "checkpoint-1", run)
    assert _tree(run) == before
    out = export(run / "checkpoint-1", tmp_path / "exported")  # a folder of its own: written whole, marked
    assert (out / "provenance.json").is_file() and not list(tmp_path.glob(".exported.*"))
    export(run / "checkpoint-1", out)  # its own earlier export: replaced


def test_the_smollm2_converter_never_replaces_a_folder_it_did_not_write(tmp_path, monkeypatch) -> None:
    """`python -m omnidecision.synthetic.smollm2 --out DIR --force` removed DIR whatever it held before renaming the
    conversion into place; a non-empty folder without the converter's mark is now refused before any work."""
    from omnidecision.synthetic import smollm2

    monkeypatch.setattr(smollm2, "gguf_file", lambda: pytest.fail("refused only after reading the source"))
    (tmp_path / "notes.txt").write_text("keep me\n", encoding="utf-8")
    with pytest.raises(ValueError, match="a non-empty folder this converter did not write"):
        smollm2.convert(tmp_path, force=True)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "keep me\n"


@pytest.mark.requires("trl")
@pytest.mark.parametrize("stage", [["sft", "--config", "configs/sft/tiny-cpu.yaml"],
                                   ["grpo", "--config", "configs/grpo/tiny-cpu.yaml"],
                                   ["judge", "train", "--config", "configs/judge/tiny-cpu.yaml"]])
@pytest.mark.parametrize("where", ["model", "inside data"])
def test_a_trained_stage_refuses_an_output_dir_over_its_inputs(stage, where, tmp_path) -> None:
    """A trainer writes `output_dir` in place: over its start model it replaces the weights it starts from; inside
    its data folder its checkpoints become part of what the loader reads. Both are refused, dry run and run alike
    (the real run makes the same checks through `require`)."""
    from typer.testing import CliRunner

    from omnidecision.cli import app

    model, data = tmp_path / "model", tmp_path / "data"
    model.mkdir()
    data.mkdir()
    out = model if where == "model" else data / "run"
    argv = [*stage, "--model_name_or_path", str(model), "--dataset_name", str(data), "--output_dir", str(out),
            "--dry-run"]
    argv[argv.index("--config") + 1] = str(ROOT / argv[argv.index("--config") + 1])
    res = CliRunner().invoke(app, argv)
    report = json.loads(res.stdout[res.stdout.index("{"):])
    how = "is" if where == "model" else "is inside"
    assert any(c["what"] == "output_dir" and c["status"] == "error" and f"output_dir {out} {how} the input" in
               c["detail"] for c in report["checks"]), report["checks"]
    assert res.exit_code == 2
