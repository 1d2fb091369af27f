"""One SLURM job of a plan run with `--executor slurm` (pipeline/slurm.py): run step STEP of OUT/plan.json with the
local runner's own `Runner.execute` (the same environment, thread count and records as the local executor), then
write OUT/steps/STEP.json (its wall time and record) for the waiting runner.

On SIGTERM (a requeue, a preemption, `scancel`) the job passes the signal to its step's process group and waits
for the step to exit: a training step saves after the step in flight (omnidecision/preemption.py) while its job is
still there to be waited for, and SLURM's SIGKILL after KillWait still reaches it. A job that ended at once left its
step running untracked (an orphan that SLURM's linuxproc tracking neither waits for nor kills).

    python -m omnidecision.pipeline.slurm_job OUT STEP
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from omnidecision.outputs import write_json_atomic
from omnidecision.pipeline.plan import Step
from omnidecision.pipeline.scheduler import Runner


def pass_on(running: dict[str, Any], signum: int) -> None:
    """Send `signum` to the process group of every step running (`Runner.running`: step → its group), and return:
    the runner goes on waiting for them. A group already gone is skipped."""
    for pgid in list(running.values()):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pgid), signum)


def run_job(out: Path, name: str) -> None:
    """Run step `name` of OUT/plan.json; record its wall time and record in OUT/steps/NAME.json."""
    spec = json.loads((out / "plan.json").read_text("utf-8"))
    plan = [Step(**{**s, "budget_of": tuple(s["budget_of"])}) for s in spec["steps"]]
    runner = Runner(out, spec["threads"], plan)
    signal.signal(signal.SIGTERM, lambda signum, frame: pass_on(runner.running, signum))
    runner.execute(next(s for s in plan if s.name == name))
    write_json_atomic(out / "steps" / f"{name}.json", {"seconds": runner.times[name], "record": runner.records[name]})


if __name__ == "__main__":
    run_job(Path(sys.argv[1]), sys.argv[2])
