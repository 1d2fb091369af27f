"""`omnidecision serve`: argument errors (fast) and a real vLLM server stopped by SIGTERM (vllm, slow)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.rollout.recipe import cli_overrides as passthrough_overrides


def test_serve_rejects_bad_lora(tmp_path):
    res = CliRunner().invoke(app, ["serve", str(tmp_path), "--lora", "no-equals-sign"])
    assert res.exit_code == 2 and "expected NAME=DIR" in res.output
    res = CliRunner().invoke(app, ["serve", str(tmp_path), "--lora", f"x={tmp_path / 'missing'}"])
    assert res.exit_code == 2 and "is not a folder" in res.output


def test_passthrough_overrides():
    assert passthrough_overrides(["--serve.model", "m", "--samples=3", "--plots"]) == [
        "serve.model=m", "samples=3", "plots=true"]
    with pytest.raises(ValueError, match="unexpected argument"):
        passthrough_overrides(["stray"])


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.requires("vllm")
def test_serve_then_sigterm(tmp_path):
    from omnidecision.serving.vllm_server import free_port
    from omnidecision.synthetic.tiny import build_tiny_planner

    model = build_tiny_planner(tmp_path / "tiny", hidden=64, layers=2, heads=2)
    port = free_port()
    cli = [sys.executable, "-c", "from omnidecision.cli import app; app()"]
    proc = subprocess.Popen([*cli, "serve", str(model), "--port", str(port), "--max-model-len", "1024"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()  # printed once /v1/models answers
        assert line.startswith("serving tiny at http://127.0.0.1:"), line
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["tiny"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)


@pytest.mark.long  # two dry runs import vLLM's argument parser: ~30 s
@pytest.mark.requires("vllm")
def test_serve_passes_vllm_args_through(tmp_path):
    """`--vllm-args` reaches the vLLM command verbatim (as an eval recipe's serve.extra_args), and the dry run checks
    them with vLLM's own parser: an argument vLLM does not know fails it."""
    import json

    from omnidecision.synthetic.tiny import build_tiny_planner

    model = build_tiny_planner(tmp_path / "tiny", hidden=64, layers=2, heads=2)
    extra = "--gpu-memory-utilization 0.85 --max-num-seqs 8"
    res = CliRunner().invoke(app, ["serve", str(model), "--vllm-args", extra, "--dry-run"])
    assert res.exit_code == 0, res.output
    command = json.loads(res.stdout)["extra"]["vllm_command"]
    assert command[-4:] == ["--gpu-memory-utilization", "0.85", "--max-num-seqs", "8"]
    res = CliRunner().invoke(app, ["serve", str(model), "--vllm-args", "--no-such-flag 1", "--dry-run"])
    assert res.exit_code == 2 and "--no-such-flag" in res.stdout
