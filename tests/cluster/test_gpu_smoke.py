"""scripts/gpu_smoke.sh on a CPU: `--dry-run` resolves every stage through the stage's own `--dry-run` and starts
nothing; the summary it writes reads tokens/s and peak memory from what the stages leave behind.

The fast test runs the script in bash with a recording `omnidecision` shim: a call with `--dry-run` is recorded
(and exits 0), any other call (the CPU inputs: `tasks synth`, the tiny planner) runs the real CLI. Each recorded
dry run is then replayed in this process through the CLI, in order, against the folder the script left (its inputs
and stand-ins): exit 0 and no failed check. The slow test runs the script as a user would, every dry run a real
`omnidecision` process.

    .venv/bin/pytest tests/cluster/test_gpu_smoke.py -q
    .venv/bin/pytest tests/cluster/test_gpu_smoke.py -q -m slow
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("trl")  # skips without it; fails under CI=true (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_smoke.sh"
STAGES = ("tiny-sft", "tiny-export", "tiny-grpo", "real-build", "real-sft", "real-export", "serve", "eval")
# the commands that train, build a real-size model, serve or evaluate: never run for real in a dry run
GPU_COMMANDS = {"sft", "grpo", "export", "serve", "eval"}

_SHIM = """#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
with open(os.path.join(os.environ["SMOKE_RECORD_DIR"], f"{{time.time_ns()}}.json"), "w") as fh:
    json.dump({{"args": args, "cwd": os.getcwd()}}, fh)
if "--dry-run" in args:
    sys.exit(0)  # replayed in the test process
sys.exit(subprocess.call([sys.executable, "-c", "from omnidecision.cli import app; app()", *args]))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMNIDECISION_", "CUDA_VISIBLE"))}
    env.update(PYTHON=sys.executable, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
               **extra)
    return env


def test_script_parses() -> None:
    res = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    res = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and "--dry-run" in res.stdout
    res = subprocess.run(["bash", str(SCRIPT), "--no-such-flag"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "unknown argument" in res.stderr


@pytest.mark.long  # 14 s on 2 cores (every stage's dry run in turn); the script's parse, summary and export
# checks stay in make test
def test_dry_run_resolves_every_stage(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from omnidecision.cli import app

    records = tmp_path / "records"
    records.mkdir()
    shim = tmp_path / "bin" / "omnidecision"
    shim.parent.mkdir()
    shim.write_text(_SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    work = tmp_path / "work"
    res = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--work", str(work)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, env=_env(OD=str(shim), SMOKE_RECORD_DIR=str(records)))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    calls = [json.loads(p.read_text()) for p in sorted(records.glob("*.json"))]

    # nothing that trains, builds the real-size model, serves or evaluates ran for real
    real = [c["args"] for c in calls if "--dry-run" not in c["args"]]
    assert all(a[0] not in GPU_COMMANDS for a in real), real
    assert all("--shape" not in a for a in real), real
    dry = [c for c in calls if "--dry-run" in c["args"]]
    assert [c["args"][0] for c in dry] == ["sft", "export", "grpo", "tiny-planner", "sft", "export", "serve", "eval"]

    # each recorded dry run, replayed through the CLI where the script ran it: exit 0, no failed check
    reports = []
    for call in dry:
        monkeypatch.chdir(call["cwd"])
        out = CliRunner().invoke(app, call["args"])
        assert out.exit_code == 0, f"omnidecision {' '.join(call['args'])}: exit {out.exit_code}\n{out.output[-3000:]}"
        report = json.loads(out.stdout[out.stdout.index("{"):])
        failed = [c for c in report["checks"] if c["status"] == "error"]
        assert not failed, f"omnidecision {' '.join(call['args'])}: {failed}"
        assert report["command"] == call["args"][0]
        reports.append(report)
    by_stage = dict(zip(STAGES, reports, strict=True))
    # the stages are wired to each other: what one writes is what the next reads
    assert by_stage["tiny-sft"]["extra"]["output_dir"] == str(work / "tiny" / "sft")
    assert by_stage["tiny-grpo"]["resolved"]["model"]["model_name_or_path"] == str(work / "tiny" / "sft-merged")
    assert by_stage["tiny-grpo"]["resolved"]["training"]["use_vllm"] is True
    assert any(c["what"] == "use_vllm" and "vllm_mode=colocate" in c["detail"]
               for c in by_stage["tiny-grpo"]["checks"])
    assert by_stage["real-sft"]["resolved"]["model"]["model_name_or_path"] == str(work / "real" / "base")
    assert by_stage["real-sft"]["resolved"]["model"]["use_peft"] is True
    assert 1.6e9 < by_stage["real-build"]["extra"]["parameters"] < 1.8e9  # the Qwen3-1.7B shape
    assert "--model " + str(work / "real" / "merged") in by_stage["serve"]["would_run"][0]
    planner = by_stage["eval"]["resolved"]["backends"]["planner"]
    assert planner["base_url"] == "http://127.0.0.1:8011/v1"
    assert by_stage["serve"]["extra"]["served_names"][0] == planner["model"]

    summary = json.loads((work / "gpu_smoke.json").read_text())
    assert summary["dry_run"] is True and summary["ok"] is True
    assert [s for s in summary["stages"] if s != "prep"] == list(STAGES)
    assert {s["status"] for name, s in summary["stages"].items() if name != "prep"} == {"dry-run"}


def test_summary_reads_the_stage_outputs(tmp_path) -> None:
    """tokens/s and peak memory per stage, from files laid out as the stages write them."""
    from omnidecision.smoke import summarize

    (tmp_path / "run.json").write_text(json.dumps({"dry_run": False, "shape": "qwen3-1.7b", "device": "H200"}))
    sft = tmp_path / "tiny" / "sft"
    sft.mkdir(parents=True)
    (sft / "log_history.json").write_text(json.dumps([
        {"loss": 2.0, "num_tokens": 1000.0, "step": 1}, {"loss": 1.5, "num_tokens": 3000.0, "step": 2},
        {"train_runtime": 1.5, "step": 2}]))
    (tmp_path / "serve").mkdir()
    (tmp_path / "serve" / "probe.json").write_text(json.dumps(
        {"requests": 4, "wall_s": 2.0, "completion_tokens": 512, "completion_tokens_per_s": 256.0}))
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "report.json").write_text(json.dumps(
        {"n": 10, "accuracy": 0.0, "tokens_per_question": {"total": 300.0}, "wall_time": {"eval_s": 6.0}}))
    gpu = tmp_path / "gpu"
    gpu.mkdir()
    (gpu / "tiny-sft.jsonl").write_text(json.dumps({"max_memory_allocated": 3 * 2**30}) + "\n" +
                                        json.dumps({"max_memory_allocated": None}) + "\n{cut")
    (gpu / "serve.smi").write_text("1200\n80500\n79000\n")
    lines = [
        {"stage": "tiny-sft", "kind": "sft", "status": "ok", "rc": 0, "wall_s": 20,
         "outputs": {"output_dir": "tiny/sft"}},
        {"stage": "serve", "kind": "serve", "status": "ok", "rc": 0, "wall_s": 90,
         "outputs": {"probe": "serve/probe.json"}},
        {"stage": "eval", "kind": "eval", "status": "failed: exit 2", "rc": 2, "wall_s": 5,
         "outputs": {"out": "eval"}},
    ]
    (tmp_path / "stages.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = summarize(tmp_path)
    sft_s, serve_s, eval_s = (out["stages"][k] for k in ("tiny-sft", "serve", "eval"))
    assert sft_s["tokens_per_s"] == 2000.0  # 3000 tokens / 1.5 s
    assert sft_s["peak_memory_allocated_gib"] == 3.0 and sft_s["device_peak_used_mib"] is None
    assert serve_s["tokens_per_s"] == 256.0 and serve_s["device_peak_used_mib"] == 80500.0
    assert serve_s["peak_memory_allocated_bytes"] is None
    assert eval_s["tokens_per_s"] == 500.0  # 10 questions x 300 tokens / 6 s
    assert out["ok"] is False and out["total_wall_s"] == 115.0 and out["device"] == "H200"


def test_gpu_stats_record_at_exit(tmp_path) -> None:
    """OMNIDECISION_GPU_STATS: one line per command at exit; null memory when CUDA was never used (this CPU)."""
    target = tmp_path / "gpu.jsonl"
    cmd = [sys.executable, "-c", "from omnidecision.cli import app; app()", "version"]
    subprocess.run(cmd, check=True, capture_output=True, env=_env(OMNIDECISION_GPU_STATS=str(target)), timeout=60)
    subprocess.run(cmd, check=True, capture_output=True, env=_env(OMNIDECISION_GPU_STATS=str(target)), timeout=60)
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(records) == 2 and records[0]["argv"][-1] == "version"
    assert records[0]["max_memory_allocated"] is None and records[0]["wall_s"] >= 0
    # without the variable nothing is recorded: not in the earlier file (it would be the natural default), not in
    # the command's working folder
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    subprocess.run(cmd, check=True, capture_output=True, env=_env(), timeout=60, cwd=quiet)
    assert len(target.read_text().splitlines()) == 2
    assert list(quiet.iterdir()) == []
    subprocess.run(cmd, check=True, capture_output=True, env=_env(OMNIDECISION_GPU_STATS=""), timeout=60, cwd=quiet)
    assert len(target.read_text().splitlines()) == 2 and list(quiet.iterdir()) == []


def test_export_dry_run_checks_the_checkpoint(tmp_path) -> None:
    from omnidecision.export import export_dry_run

    missing = export_dry_run(tmp_path / "nope", tmp_path / "out", merge=True)
    assert [c.status for c in missing.checks] == ["error"]
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tmp_path / "gone")}))
    report = export_dry_run(adapter, tmp_path / "out", merge=True)
    assert any(c.what == "checkpoint" and c.status == "error" for c in report.checks)  # its base is missing
    base = tmp_path / "gone"
    base.mkdir()
    (base / "config.json").write_text("{}")  # what the check looks for in a model folder
    report = export_dry_run(adapter, tmp_path / "out", merge=True)
    assert not report.errors and report.extra["mode"] == "merged"
    assert export_dry_run(adapter, tmp_path / "out").extra["mode"] == "adapter"
    assert export_dry_run(adapter, adapter).errors  # --out must differ from the checkpoint


@pytest.mark.slow
def test_dry_run_as_a_user_runs_it(tmp_path) -> None:
    """Every dry run a real `omnidecision` process, as on a login node."""
    cli = tmp_path / "bin" / "omnidecision"
    cli.parent.mkdir()
    cli.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'from omnidecision.cli import app; app()' \"$@\"\n")
    cli.chmod(0o755)
    res = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--work", str(tmp_path / "work")], capture_output=True,
                         text=True, timeout=900, env=_env(OD=str(cli)))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = json.loads((tmp_path / "work" / "gpu_smoke.json").read_text())
    assert summary["ok"] and set(STAGES) <= set(summary["stages"])
