"""One SLURM job of a plan run with `--executor slurm` (pipeline/slurm.py): run step STEP of OUT/plan.json with the
local runner's own `Runner.execute` (the same environment, thread count and records as the local executor), then
write OUT/steps/STEP.json (its wall time and record) for the waiting runner.

    python -m omnidecision.pipeline.slurm_job OUT STEP
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omnidecision.outputs import write_json_atomic
from omnidecision.pipeline.plan import Step
from omnidecision.pipeline.scheduler import Runner


def run_job(out: Path, name: str) -> None:
    """Run step `name` of OUT/plan.json; record its wall time and record in OUT/steps/NAME.json."""
    spec = json.loads((out / "plan.json").read_text("utf-8"))
    plan = [Step(**{**s, "budget_of": tuple(s["budget_of"])}) for s in spec["steps"]]
    runner = Runner(out, spec["threads"], plan)
    runner.execute(next(s for s in plan if s.name == name))
    write_json_atomic(out / "steps" / f"{name}.json", {"seconds": runner.times[name], "record": runner.records[name]})


if __name__ == "__main__":
    run_job(Path(sys.argv[1]), sys.argv[2])
