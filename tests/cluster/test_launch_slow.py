"""`omnidecision sft|grpo --num-processes 2` runs two real processes through `accelerate launch` (CPU, gloo): the
documented one-node commands are multi-process, not one plain process.

    .venv/bin/pytest tests/cluster/test_launch_slow.py -q -m slow
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("trl")  # skips without it; fails under CI=true (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout: int = 600) -> str:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-m", "omnidecision.cli", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=timeout)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    return log


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    return build_tiny_planner(tmp_path_factory.mktemp("tiny") / "m", texts=list(default_corpus(n=100)), hidden=32,
                              layers=1, heads=2, vocab_size=1024)


@pytest.mark.slow
def test_sft_num_processes_runs_two_ranks(tiny, tmp_path):
    from omnidecision.synthetic.states import write_sft_dataset

    data = write_sft_dataset(tmp_path / "sft", n_train=16, n_validation=4, seed=0)
    log = _cli("sft", "--num-processes", "2", "--config", "configs/sft/tiny-cpu.yaml", "--model_name_or_path",
               str(tiny), "--dataset_name", str(data), "--output_dir", str(tmp_path / "out"), "--max_steps", "2",
               "--per_device_train_batch_size", "2", "--eval_strategy", "no", "--save_strategy", "no",
               "--load_best_model_at_end", "false", "--disable_tqdm", "true")
    assert "accelerate.commands.launch --multi_gpu --num_processes 2" in log
    assert set(re.findall(r"rank (\d)/2: trained 2 steps", log)) == {"0", "1"}, log[-3000:]
    assert (tmp_path / "out" / "model.safetensors").exists()


@pytest.fixture
def judge_url():
    """A reward-judge endpoint (the in-test stub of tests/rl: a score for every decision)."""
    import threading
    from http.server import ThreadingHTTPServer

    from tests.rl.test_judge_aggregation import _Judge

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    server.mode = "zero"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_grpo_num_processes_runs_two_ranks(tiny, tmp_path, judge_url):
    import json

    from omnidecision.rl.data import write_rl_dataset

    data = write_rl_dataset(tmp_path / "harvest", n_train=16, n_validation=4, seed=1)
    out = tmp_path / "grpo"
    log = _cli("grpo", "--num-processes", "2", "--config", "configs/grpo/tiny-cpu.yaml", "--model_name_or_path",
               str(tiny), "--dataset_name", str(data), "--output_dir", str(out), "--max_steps", "1",
               "--num_generations", "4", "--per_device_train_batch_size", "4", "--generation_batch_size", "8",
               "--max_completion_length", "16", "--eval_closure_n", "4", "--select_states", "all",
               "--weight_average", "false", "--judge_weight", "1.0", "--judge_base_url", judge_url,
               "--judge_model", "judge", "--judge_timeout_s", "10", "--logging_steps", "1")
    assert "accelerate.commands.launch --multi_gpu --num_processes 2" in log
    assert (out / "closure_eval.json").exists() and (out / "model.safetensors").exists()
    assert log.count("held-out closure reward (greedy, 4 states)") == 2  # start and trained, on rank 0 only
    # the judge's counters are both processes' (each scored its own share of the completions), and logged per step
    judge = json.loads((out / "closure_eval.json").read_text())["judge"]
    scored = judge["requests"] + judge["cache_hits"] + judge["skipped_invalid"]  # an untrained planner: mostly invalid
    assert judge["processes"] == 2 and scored >= 8, judge
    logged = {k for row in json.loads((out / "log_history.json").read_text()) for k in row}
    assert "judge/failures" in logged, sorted(logged)
    prov = json.loads((out / "provenance.json").read_text())  # written once, by the main process
    assert prov["stage"] == "grpo" and prov["lineage"]["start_model"] == str(tiny)
    assert json.loads((out / "tokenizer_config.json").read_text())  # one writer: a whole file
