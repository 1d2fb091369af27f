"""A plan step's SLURM job body (omnidecision/pipeline/slurm_job.py) on SIGTERM: it passes the signal to its step and
waits for the step to exit, so a step that saves after the signal finishes while its job is still there (and SLURM's
SIGKILL after KillWait still reaches it: no orphan).

The job body is the real `run_job`; its step is a stand-in process (the interpreter the runner starts is pointed at
it) that saves for SAVE_S seconds after SIGTERM, as a training step finishes its step in flight and checkpoint.

    .venv/bin/pytest -q tests/demo/test_slurm_job.py
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from omnidecision.pipeline.plan import Step

SAVE_S = 2.0
STEP = f"""import pathlib, signal, sys, time
asked = []
signal.signal(signal.SIGTERM, lambda *_: asked.append(1))
pathlib.Path(sys.argv[1]).touch()  # started (the runner's log is written through a buffer)
while not asked:
    time.sleep(0.05)
time.sleep({SAVE_S})
print(f"step: saved {{time.time()}}", flush=True)
sys.exit(143)
"""
# the job body as the sbatch line runs it, with the runner's interpreter pointed at the stand-in step
DRIVER = """import sys, time
from pathlib import Path
sys.executable = sys.argv[3]
from omnidecision.pipeline.slurm_job import run_job
try:
    run_job(Path(sys.argv[1]), sys.argv[2])
finally:
    print(f"job: ended {time.time()}", flush=True)
"""


def test_the_job_passes_sigterm_to_its_step_and_ends_after_it(tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    step = tmp_path / "step.py"
    step.write_text(STEP)
    interpreter = tmp_path / "python"  # what `python -m omnidecision.cli ARGV` becomes for this step
    started = tmp_path / "started"
    interpreter.write_text(f"#!/bin/sh\nexec {sys.executable} {step} {started}\n")
    interpreter.chmod(0o755)
    plan = [Step(name="train", argv=["sft", "--config", "x.yaml"], reads=[], writes=[])]
    (out / "plan.json").write_text(json.dumps({"threads": 1, "steps": [dataclasses.asdict(s) for s in plan]}))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    job = subprocess.Popen([sys.executable, str(driver), str(out), "train", str(interpreter)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert job.poll() is None and time.monotonic() < deadline, job.stdout.read() if job.stdout else ""
            time.sleep(0.05)
        job.send_signal(signal.SIGTERM)  # to the job alone: passing it on is the job's part
        printed, _ = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    saved = [float(line.split()[-1]) for line in printed.splitlines() if line.startswith("step: saved")]
    ended = [float(line.split()[-1]) for line in printed.splitlines() if line.startswith("job: ended")]
    assert saved and ended, printed
    assert ended[0] >= saved[0], (saved, ended)  # the job was there until its step had saved
    assert job.returncode != 0 and "exit 143" in printed, printed  # the step did not finish: no record of it
    assert not (out / "steps" / "train.json").exists()
