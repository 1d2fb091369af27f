"""`omnidecision serve` refuses, before it starts any process, what `serve --dry-run` refuses, in the same words:
both ask `VLLMServer.checks()` (the run through `check()`, called first thing by `start()`). Before, only the dry
run refused a model folder that is a LoRA adapter and ran vLLM's argument parser; the run started vLLM, which
failed later. A witness interpreter (`python=`, a script that leaves a file when run) shows that nothing starts.

    .venv/bin/pytest -q -p no:cacheprovider tests/serving/test_serve_run_refuses.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.serving.vllm_server import VLLMServer, VLLMServerError


def _witness(tmp_path: Path) -> tuple[Path, Path]:
    """An 'interpreter' that leaves `started` behind if the server is ever launched with it."""
    started = tmp_path / "started"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ntouch {started}\nexit 1\n", "utf-8")
    python.chmod(0o755)
    return python, started


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


@pytest.fixture
def adapter(tmp_path: Path) -> Path:
    """A LoRA adapter folder (its base a hub id: no base to read, nothing looked up)."""
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "Qwen/Qwen3-8B", "r": 8}))
    return folder


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3", "dtype": "float32"}))
    return folder


def test_an_adapter_served_as_the_model_is_refused_before_anything_starts(tmp_path: Path, adapter: Path) -> None:
    dry = CliRunner().invoke(app, ["serve", str(adapter), "--dry-run"])
    real = CliRunner().invoke(app, ["serve", str(adapter), "--startup-timeout", "5"])
    assert dry.exit_code == 2 and real.exit_code == 1, (dry.output, real.output)
    assert _error_lines(dry.stderr) == _error_lines(real.stderr), (dry.stderr, real.stderr)
    assert "is a LoRA adapter: serve its base with --lora" in real.stderr
    python, started = _witness(tmp_path)
    server = VLLMServer(adapter, python=str(python), cpu=True, warmup=False, startup_timeout_s=5)
    with pytest.raises(VLLMServerError, match="model: .* is a LoRA adapter"):
        server.start()
    assert server.proc is None and server.workdir is None and not started.exists()


@pytest.mark.requires("vllm")
def test_arguments_vllm_refuses_are_refused_before_anything_starts(tmp_path: Path, model: Path) -> None:
    args = ["serve", str(model), "--vllm-args", "--no-such-vllm-flag 3"]
    dry = CliRunner().invoke(app, [*args, "--dry-run"])
    real = CliRunner().invoke(app, [*args, "--startup-timeout", "5"])
    assert dry.exit_code == 2 and real.exit_code == 1, (dry.output, real.output)
    assert _error_lines(dry.stderr) == _error_lines(real.stderr), (dry.stderr, real.stderr)
    assert "error: vllm arguments: " in real.stderr and "--no-such-vllm-flag" in real.stderr
    python, started = _witness(tmp_path)
    server = VLLMServer(model, extra_args=["--no-such-vllm-flag", "3"], python=str(python), cpu=True, warmup=False,
                        startup_timeout_s=5)
    with pytest.raises(VLLMServerError, match="vllm arguments: .*--no-such-vllm-flag"):
        server.start()
    assert server.proc is None and server.workdir is None and not started.exists()


def test_a_servable_model_passes_the_checks_and_is_launched(tmp_path: Path, model: Path) -> None:
    """The checks refuse only what fails: a good folder reaches the launch (the witness runs, and exits)."""
    python, started = _witness(tmp_path)
    server = VLLMServer(model, python=str(python), cpu=True, warmup=False, startup_timeout_s=5, fresh_cache=True)
    with pytest.raises(VLLMServerError, match="exited with code 1 before serving"):
        server.start()
    assert started.exists()
    server.stop()  # a failed start keeps its folder, for its log
