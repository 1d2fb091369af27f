"""The CPU server serves the dtype a checkpoint holds (vLLM's "auto" picks bf16 on CPUs with bf16 instructions).

    pytest -q tests/serving/test_cpu_dtype.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnidecision.serving.vllm_server import VLLMServer, checkpoint_dtype


def _checkpoint(tmp_path: Path, **config: str) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3", **config}), "utf-8")
    return folder


def _dtype_args(cmd: list[str]) -> list[str]:
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--dtype"]


@pytest.mark.parametrize("key", ["dtype", "torch_dtype"])
def test_float32_checkpoint_is_served_in_float32_on_cpu(tmp_path: Path, key: str) -> None:
    model = _checkpoint(tmp_path, **{key: "float32"})
    assert checkpoint_dtype(model) == "float32"
    assert _dtype_args(VLLMServer(model, port=1, cpu=True).command()) == ["float32"]


def test_bf16_checkpoint_gpu_and_user_choice_are_left_alone(tmp_path: Path) -> None:
    bf16 = _checkpoint(tmp_path, dtype="bfloat16")
    assert _dtype_args(VLLMServer(bf16, port=1, cpu=True).command()) == []
    fp32 = tmp_path / "fp32"
    fp32.mkdir()
    (fp32 / "config.json").write_text(json.dumps({"dtype": "float32"}), "utf-8")
    assert _dtype_args(VLLMServer(fp32, port=1, cpu=False).command()) == []  # a GPU keeps vLLM's own choice
    user = VLLMServer(fp32, port=1, cpu=True, extra_args=["--dtype", "bfloat16"]).command()
    assert _dtype_args(user) == ["bfloat16"]  # the user's flag wins, and is not doubled
    assert checkpoint_dtype("Qwen/Qwen3-8B") is None  # a hub id: nothing to read
