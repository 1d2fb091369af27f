"""omnidecision.node_launch: accelerate's single-process launch, exec'd, so a SIGTERM reaches the trainer alone.

    .venv/bin/pytest -q tests/cluster/test_node_launch.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omnidecision.node_launch import NodeLaunchError, main, node_command

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# what each launcher's child writes: its arguments, environment and pid
DUMP = """import json, os, sys
json.dump({"argv": sys.argv[1:], "env": dict(os.environ), "pid": os.getpid()}, open(sys.argv[1], "w"))
"""

# a trainer whose step in flight and SIGTERM checkpoint take SAVE_S seconds after the signal, longer than the 5 s
# `accelerate launch` leaves its child
SLOW_SAVE = """import signal, sys, time
asked = []
signal.signal(signal.SIGTERM, lambda *_: asked.append(time.monotonic()))
print("trainer: started", flush=True)
while not asked:
    time.sleep(0.05)
time.sleep(float(sys.argv[1]))
print("trainer: saved", flush=True)
sys.exit(143)
"""

NODE = ["--config_file", str(ROOT / "configs" / "accelerate" / "cpu.yaml"), "--cpu", "--num_machines", "2",
        "--num_processes", "2", "--machine_rank", "1", "--main_process_ip", "127.0.0.1",
        "--main_process_port", "29555"]


def _changed(env: dict[str, str]) -> dict[str, str]:
    """What a launcher set for its child: the variables not in, or not equal to, this process's environment.
    Left out: `_` (the shell's last command), and what imports in the `accelerate` console script set in its own
    process: the terminal's size (COLUMNS, LINES) and torch's default TORCHINDUCTOR_CACHE_DIR."""
    return {k: v for k, v in env.items()
            if os.environ.get(k) != v and k not in ("_", "COLUMNS", "LINES", "TORCHINDUCTOR_CACHE_DIR")}


def test_the_trainer_gets_the_command_and_environment_accelerate_launch_gives_its_child(tmp_path: Path):
    script, out = tmp_path / "dump.py", tmp_path / "child.json"
    script.write_text(DUMP)
    subprocess.run([str(BIN / "accelerate"), "launch", *NODE, str(script), str(out), "--flag", "a b"], check=True,
                   cwd=ROOT, capture_output=True, timeout=120)
    child = json.loads(out.read_text())
    cmd, env = node_command([*NODE, str(script), str(out), "--flag", "a b"])
    assert cmd == [sys.executable, str(script), str(out), "--flag", "a b"]
    assert child["argv"] == cmd[2:]  # the script's own arguments, spaces kept
    accelerate = _changed(child["env"])
    assert accelerate["ACCELERATE_USE_CPU"] == "True" and accelerate["MASTER_PORT"] == "29555"  # what it sets
    assert _changed(env) == accelerate


@pytest.mark.long  # 8 s of waiting on a signal; tests/cluster/test_multinode.py holds the scripts' CPU lines to it
def test_a_sigterm_reaches_the_trainer_alone_and_it_finishes_its_save(tmp_path: Path):
    """The launcher becomes the trainer (one pid), so nothing kills it 5 s after the signal."""
    script = tmp_path / "slow_save.py"
    script.write_text(SLOW_SAVE)
    log = tmp_path / "trainer.log"
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "omnidecision.node_launch", "--cpu", "--num_machines", "1",
                                 str(script), "6.5"], cwd=ROOT, stdout=sink, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while "started" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert str(script).encode() in cmdline and b"omnidecision.node_launch" not in cmdline  # exec'd: the trainer
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
    assert log.read_text().splitlines() == ["trainer: started", "trainer: saved"]


@pytest.mark.parametrize("flags,launcher", [(["--multi_gpu", "--num_processes", "2"], "multi-GPU"),
                                            (["--use_deepspeed"], "DeepSpeed")])
def test_a_launch_for_gpu_nodes_is_refused_in_one_line(capsys, flags: list[str], launcher: str):
    with pytest.raises(SystemExit) as stop:
        main([*flags, "train.py"])  # refused before anything is exec'd
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith(
        f"node_launch: error: these arguments select accelerate's {launcher} launcher")
    with pytest.raises(NodeLaunchError):
        node_command([*flags, "train.py"])


@pytest.mark.long  # two launches that wait on a signal
def test_torchruns_agent_gives_its_workers_the_shutdown_timeout_the_gpu_scripts_set(tmp_path: Path):
    """The GPU path (`accelerate launch --multi_gpu`, torchrun's agent; on CPU here over gloo) SIGKILLs its workers
    TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds after a SIGTERM: a 6 s save is cut at 2 s and kept at 15 s. The SLURM
    scripts set it to the cluster's KillWait (tests/cluster/test_multinode.py)."""
    script = tmp_path / "slow_save.py"
    script.write_text(SLOW_SAVE)
    saved = {}
    for timeout in ("2", "15"):
        log = tmp_path / f"workers-{timeout}.log"
        with log.open("w") as sink:
            proc = subprocess.Popen([str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
                                     "--num_machines", "1", "--main_process_port", "0", str(script), "6"], cwd=ROOT,
                                    stdout=sink, stderr=subprocess.DEVNULL,
                                    env={**os.environ, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": timeout})
        try:
            deadline = time.monotonic() + 120
            while log.read_text().count("started") < 2:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        saved[timeout] = log.read_text().count("trainer: saved")
    assert saved == {"2": 0, "15": 2}, saved
