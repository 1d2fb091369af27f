"""Slow SFT checks: two-process `accelerate launch` on CPU (gloo), and exported checkpoints served by vLLM.

    .venv/bin/pytest tests/sft/test_slow.py -q -m slow
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import sft_args

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_accelerate_launch_two_cpu_processes(tmp_path, tiny_model, sft_data):
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
        "-m", "omnidecision.sft.train", "--config", str(ROOT / "configs/sft/tiny-cpu.yaml"),
        "--model_name_or_path", str(tiny_model), "--dataset_name", str(sft_data), "--output_dir", str(out),
        "--max_steps", "3", "--per_device_train_batch_size", "2", "--eval_strategy", "no",
        "--save_strategy", "no", "--disable_tqdm", "true", "--logging_steps", "1",
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    finished = set(re.findall(r"rank (\d+)/2: trained 3 steps", log))
    assert finished == {"0", "1"}, log[-4000:]
    assert (out / "log_history.json").exists() and (out / "model.safetensors").exists()


def _lora_export(tmp_path, tiny_model, sft_data, merge: bool):
    from omnidecision.export import export
    from omnidecision.sft.train import main

    out = tmp_path / "lora"
    main(*sft_args(tiny_model, sft_data, out, "--max_steps", "3", "--use_peft", "true", "--lora_r", "4",
                   "--lora_alpha", "8", "--lora_target_modules", "all-linear"))
    return export(out, tmp_path / ("merged" if merge else "adapter"), merge=merge)


def _chat(base_url: str, model: str) -> dict:
    import random

    import httpx

    from omnidecision.protocol.prompts import render_planner_messages
    from omnidecision.synthetic.states import random_ledger

    messages = render_planner_messages(random_ledger(random.Random(5)))
    r = httpx.post(f"{base_url}/chat/completions", timeout=120,
                   json={"model": model, "messages": messages, "max_tokens": 16, "temperature": 0.0})
    assert r.status_code == 200, r.text
    return r.json()


needs_vllm = pytest.mark.requires("vllm")


@pytest.mark.slow
@pytest.mark.vllm
@needs_vllm
def test_merged_export_serves_in_vllm(tmp_path, tiny_model, sft_data):
    from omnidecision.serving.vllm_server import VLLMServer

    merged = _lora_export(tmp_path, tiny_model, sft_data, merge=True)
    with VLLMServer(merged, served_name="planner", max_model_len=2048) as server:
        body = _chat(server.base_url, "planner")
    choice = body["choices"][0]
    assert isinstance(choice["message"]["content"], str)
    assert body["usage"]["completion_tokens"] >= 1 and body["usage"]["prompt_tokens"] > 100


@pytest.mark.slow
@pytest.mark.vllm
@needs_vllm
def test_adapter_export_serves_as_vllm_lora(tmp_path, tiny_model, sft_data):
    from omnidecision.serving.vllm_server import VLLMServer

    adapter = _lora_export(tmp_path, tiny_model, sft_data, merge=False)
    with VLLMServer(tiny_model, served_name="base", lora_modules={"planner": str(adapter)},
                    max_model_len=2048, max_lora_rank=8) as server:
        body = _chat(server.base_url, "planner")
    assert body["model"] == "planner" and isinstance(body["choices"][0]["message"]["content"], str)
