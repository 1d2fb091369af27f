"""`scripts/serve_planner.sh BASE NAME=ADAPTER` / `omnidecision serve`: vLLM's --max-lora-rank comes from the
adapters' adapter_config.json (or an explicit option) and the dry run checks it; a real vLLM CPU server serves a
tiny base + an r=64 adapter (the SFT recipe's rank) through the script and the agent loop calls it (vllm, slow).

    .venv/bin/pytest tests/eval/test_serve_lora_rank.py            # add -m vllm for the real server only
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "serve_planner.sh"


@pytest.fixture(scope="module")
def r64_adapter(tiny_model_dir, tmp_path_factory) -> Path:
    """An r=64 LoRA adapter (lora_r of configs/sft/qwen3-8b-lora.yaml) over the session's tiny Qwen3, non-zero B so
    it changes the model."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    folder = tmp_path_factory.mktemp("r64") / "adapter"
    config = LoraConfig(r=64, lora_alpha=128, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                        init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)), config).save_pretrained(folder)
    return folder


def _cli(tmp_path: Path) -> Path:
    """`OMNIDECISION` for the script: this interpreter's omnidecision (the tree under test)."""
    cli = tmp_path / "omnidecision"
    cli.write_text(f'#!/bin/sh\nexec {sys.executable} -m omnidecision.cli "$@"\n')
    cli.chmod(0o755)
    return cli


def _script(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMNIDECISION": str(_cli(tmp_path)), **env})


def _check(report: dict, what: str) -> dict:
    return next(c for c in report["checks"] if c["what"] == what)


def _base(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """The session's tiny model under the folder name "base" (the adapter is served as "planner")."""
    base = tmp_path / "base"
    base.symlink_to(tiny_model_dir)
    return base


def test_rank_comes_from_the_adapter(tiny_model_dir, r64_adapter, tmp_path):
    res = _script([str(_base(tiny_model_dir, tmp_path)), f"planner={r64_adapter}", "--dry-run"], tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    cmd = report["extra"]["vllm_command"]
    assert cmd[cmd.index("--max-lora-rank") + 1] == "64"
    assert _check(report, "lora rank")["status"] == "ok" and "planner r=64" in _check(report, "lora rank")["detail"]


def test_script_passes_the_rank_option(tmp_path):
    """serve_planner.sh turns MAX_LORA_RANK / --max-lora-rank N / --max-lora-rank=N into `serve --max-lora-rank N`
    (a stand-in CLI prints what it was given) and refuses other options."""
    echo = tmp_path / "echo-cli"
    echo.write_text('#!/bin/sh\necho "$@"\n')
    echo.chmod(0o755)
    env = {**os.environ, "OMNIDECISION": str(echo)}
    for args, extra in (([], {"MAX_LORA_RANK": "16"}), (["--max-lora-rank", "32"], {}), (["--max-lora-rank=8"], {})):
        res = subprocess.run(["bash", str(SCRIPT), "base", "planner=adapter", *args, "--dry-run"],
                             env={**env, **extra}, capture_output=True, text=True, timeout=30)
        rank = extra.get("MAX_LORA_RANK") or args[-1].split("=")[-1]
        called = res.stdout.split()
        assert called[:2] == ["serve", "base"] and called.count("--max-lora-rank") == 1, called
        assert called[called.index("--max-lora-rank") + 1] == rank and "planner=adapter" in called
    res = subprocess.run(["bash", str(SCRIPT), "base", "--max-lora-rnk", "8"], env=env, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 2 and "unknown option --max-lora-rnk" in res.stderr


def test_too_small_an_explicit_rank_fails_the_dry_run(tiny_model_dir, r64_adapter, tmp_path):
    from typer.testing import CliRunner

    from omnidecision.cli import app

    base = _base(tiny_model_dir, tmp_path)
    res = CliRunner().invoke(app, ["serve", str(base), "--lora", f"planner={r64_adapter}", "--max-lora-rank", "32",
                                   "--dry-run"])
    assert res.exit_code == 2, res.output
    detail = _check(json.loads(res.stdout[res.stdout.index("{"):]), "lora rank")["detail"]
    assert "below the rank of adapter(s) planner (r=64)" in detail, detail
    # the session model's folder is named "planner": an adapter of that name would clash with the base
    res = CliRunner().invoke(app, ["serve", str(tiny_model_dir), "--lora", f"planner={r64_adapter}", "--dry-run"])
    assert res.exit_code == 2 and "also the base model's served name" in res.stdout


def test_rank_rounds_up_to_one_vllm_takes(tmp_path):
    from omnidecision.serving.vllm_server import VLLMServer, adapter_rank

    for name, r, pattern in (("a", 4, {}), ("b", 16, {"q_proj": 24})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "adapter_config.json").write_text(json.dumps({"r": r, "rank_pattern": pattern}))
    assert adapter_rank(tmp_path / "b") == 24
    server = VLLMServer("Qwen/Qwen3-8B", lora_modules={"a": str(tmp_path / "a"), "b": str(tmp_path / "b")})
    assert server.lora_rank() == 32 and server.lora_rank_problem() is None  # max(4, 24) -> 32
    (tmp_path / "a" / "adapter_config.json").write_text("{}")
    assert "a/adapter_config.json: cannot read the LoRA rank" in server.lora_rank_problem()


@pytest.mark.vllm
@pytest.mark.slow
def test_script_serves_an_r64_adapter_to_the_agent_loop(tiny_model_dir, r64_adapter, tmp_path):
    pytest.importorskip("vllm")
    from omnidecision.agent.config import AgentConfig
    from omnidecision.agent.loop import run_task
    from omnidecision.backends.factory import build_backends
    from omnidecision.protocol.chat import BackendSpec
    from omnidecision.serving.vllm_server import free_port
    from omnidecision.tasks.schema import Task

    base = _base(tiny_model_dir, tmp_path)
    port = free_port()
    proc = subprocess.Popen(["bash", str(SCRIPT), str(base), f"planner={r64_adapter}"],
                            env={**os.environ, "OMNIDECISION": str(_cli(tmp_path)), "PORT": str(port),
                                 "MAX_LEN": "2048"},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()  # printed once /v1/models answers
        assert line.startswith(f"serving base, planner at http://127.0.0.1:{port}/v1"), line
        spec = BackendSpec(base_url=f"http://127.0.0.1:{port}/v1", model="planner", max_tokens=48, timeout_s=120,
                           max_retries=1)
        record = asyncio.run(run_task(Task(id="r64", question="Who wrote the song played at 0:42?"),
                                      AgentConfig(step_budget=2, revision_budget=0),
                                      build_backends({"default": spec})))
        assert record.outcome != "error", record.error
        assert record.planner_model == "planner" and record.totals.completion_tokens > 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_compile_cache_persists_unless_fresh(tmp_path, monkeypatch):
    """VLLM_CACHE_ROOT survives the server (an 8B start reuses the last compile): $VLLM_CACHE_ROOT, else
    $XDG_CACHE_HOME/omnidecision/vllm; `fresh_cache` gives the old private folder."""
    from omnidecision.serving.vllm_server import VLLMServer

    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    work = tmp_path / "work"
    env = VLLMServer("Qwen/Qwen3-8B").environment_overrides(work)
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path / "xdg" / "omnidecision" / "vllm")
    assert env["TMPDIR"] == str(work / "tmp")  # sockets stay private
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "mine"))
    assert VLLMServer("Qwen/Qwen3-8B").environment_overrides(work)["VLLM_CACHE_ROOT"] == str(tmp_path / "mine")
    fresh = VLLMServer("Qwen/Qwen3-8B", fresh_cache=True).environment_overrides(work)
    assert fresh["VLLM_CACHE_ROOT"] == str(work / "cache")
