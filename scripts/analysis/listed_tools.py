"""The same trained planners in the loop with every allowed tool and with each need's listed tools only.

`AgentConfig.constrain_tools: listed` (agent/action_space.py) leaves a need's call only the tools of its listed
sources. Its effect is measured with the weights fixed: each planner of a finished start (`MODELS` under
START/models) is evaluated in-process on the start's test tasks twice, `--agent.constrain_tools allowed` and
`listed`, one thread each, two side by side; an evaluation whose report exists is kept. The result file holds,
per planner and scope, the accuracy, the per-family table, the decision diagnostics (repeat after an empty
return, finish while advanceable) and every decision against the rule planner's, by kind.

    python scripts/analysis/listed_tools.py runs/exp/seed-2 --models oracle_sft sft --out runs/listed \
        --results docs/results/listed-tools.json        # the measured run (start 2 of the experiment's recipe)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "analysis"))

from oracle_capacity import error_kinds  # noqa: E402

from omnidecision.pipeline.scheduler import cpu_model, step_env  # noqa: E402
from omnidecision.provenance import git_revision  # noqa: E402

SCOPES = ("allowed", "listed")


def evaluate(start: Path, model: str, scope: str, out: Path, core: int, tasks: int) -> Path:
    """One in-process evaluation of START/models/MODEL under `scope` (kept when its report exists)."""
    folder = out / f"{model}-{scope}"
    if not (folder / "report.json").exists():
        argv = ["taskset", "-c", str(core), sys.executable, "-m", "omnidecision.cli", "eval",
                "--config", str(ROOT / "configs/eval/synthetic-tiny-local.yaml"), "--name", f"{model}-{scope}",
                "--tasks.path", str(start / "tasks-test"), "--tasks.limit", str(tasks),
                "--backends.planner.model", str(start / "models" / model), "--agent.constrain_tools", scope,
                "--out", str(folder), "--no-progress"]
        with (out / f"{model}-{scope}.log").open("w") as log:
            subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=step_env(1), check=True, cwd=ROOT)
    return folder


def summary(folder: Path) -> dict[str, Any]:
    report = json.loads((folder / "report.json").read_text())
    kinds = error_kinds(folder)
    return {"accuracy": report["accuracy"], "n": report["n"], "outcomes": report["outcomes"],
            "by_category": {k: {"n": v["n"], "accuracy": v["accuracy"]} for k, v in report["by_category"].items()},
            "decisions": {k: report["decisions"][k] for k in ("repeat_after_empty", "premature_finish")},
            "against_rule": {"wrong": kinds["wrong"], "states": kinds["states"], "kinds": kinds["kinds"]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("start", type=Path, help="a finished start folder (models/, tasks-test/)")
    ap.add_argument("--models", nargs="+", default=["oracle_sft", "sft"])
    ap.add_argument("--out", type=Path, default=Path("runs/listed"))
    ap.add_argument("--tasks", type=int, default=120)
    ap.add_argument("--results", type=Path, default=None)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(m, s) for m in args.models for s in SCOPES]
    with ThreadPoolExecutor(2) as pool:
        folders = list(pool.map(lambda js: evaluate(args.start.resolve(), *js[1], args.out, js[0] % 2, args.tasks),
                                enumerate(jobs)))
    result: dict[str, Any] = {
        "start": str(args.start), "tasks": args.tasks, "git_revision": git_revision(),
        "cpu": cpu_model(),
        "weights_sha256": {m: hashlib.sha256((args.start / "models" / m / "model.safetensors").read_bytes())
                           .hexdigest() for m in args.models},
        "planners": {m: {s: summary(f) for (mm, s), f in zip(jobs, folders, strict=True) if mm == m}
                     for m in args.models},
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.results:
        args.results.write_text(text + "\n")


if __name__ == "__main__":
    main()
