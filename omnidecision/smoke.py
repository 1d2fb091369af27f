"""Bookkeeping of scripts/gpu_smoke.sh: wait for a server, measure its generation speed, and gather every stage's
tokens/s and peak GPU memory into one JSON. The GPU work itself is done by `omnidecision` commands; this module
only reads what they wrote and talks to a server that is already up.

    python -m omnidecision.smoke wait http://127.0.0.1:8011/v1 --timeout 300
    python -m omnidecision.smoke probe http://127.0.0.1:8011/v1 --model planner-smoke --out probe.json
    python -m omnidecision.smoke summarize runs/gpu-smoke --out runs/gpu-smoke/gpu_smoke.json

`summarize` reads WORK/stages.jsonl (one line per stage, written by the script: name, kind, status, wall_s,
outputs), WORK/gpu/STAGE.jsonl (OMNIDECISION_GPU_STATS records: torch.cuda.max_memory_allocated of the stage's
process) and WORK/gpu/STAGE.smi (nvidia-smi memory.used samples, MiB: the whole device, vLLM servers included).
Tokens/s per stage kind: sft/grpo = the trainer's last logged `num_tokens` / `train_runtime` (log_history.json);
probe = completion tokens / wall seconds; eval = questions x mean tokens per question / eval seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from omnidecision.modeling import CHAT_TEMPLATE_KWARGS
from omnidecision.synthetic.states import sft_rows


def wait_ready(base_url: str, timeout_s: float, interval_s: float = 2.0) -> float:
    """Poll `base_url`/models until it answers 200; returns the seconds waited. Raises TimeoutError."""
    import httpx

    start = time.monotonic()
    while True:
        try:
            if httpx.get(base_url.rstrip("/") + "/models", timeout=5.0).status_code == 200:
                return time.monotonic() - start
        except httpx.HTTPError:
            pass  # not listening yet
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"{base_url} did not answer within {timeout_s:.0f} s")
        time.sleep(interval_s)


def planner_prompts(n: int, seed: int = 0) -> list[list[dict[str, str]]]:
    """`n` real planner prompts (system + ledger digest) over random ledgers: what the served planner reads."""
    return [row["messages"][:-1] for row in sft_rows(n, seed)]


async def _probe(base_url: str, model: str, prompts: list[list[dict[str, str]]], max_tokens: int,
                 concurrency: int) -> dict[str, Any]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="EMPTY", timeout=120.0)
    gate = asyncio.Semaphore(concurrency)
    usage = {"prompt_tokens": 0, "completion_tokens": 0}

    async def one(messages: list[dict[str, str]]) -> None:
        async with gate:
            # ignore_eos (vLLM): a random-weight model may stop at once; generate max_tokens to measure decoding
            resp = await client.chat.completions.create(
                model=model, messages=messages, max_tokens=max_tokens, temperature=1.0,
                extra_body={"chat_template_kwargs": CHAT_TEMPLATE_KWARGS, "ignore_eos": True})
            usage["prompt_tokens"] += resp.usage.prompt_tokens
            usage["completion_tokens"] += resp.usage.completion_tokens

    start = time.perf_counter()
    try:
        await asyncio.gather(*(one(m) for m in prompts))
    finally:
        await client.close()
    wall = time.perf_counter() - start
    return {"requests": len(prompts), "concurrency": concurrency, "max_tokens": max_tokens, "wall_s": round(wall, 3),
            **usage, "completion_tokens_per_s": round(usage["completion_tokens"] / wall, 1) if wall else None}


def probe(base_url: str, model: str, *, n: int = 32, max_tokens: int = 128, concurrency: int = 16) -> dict[str, Any]:
    """Generation speed of a served planner: `n` planner prompts, `concurrency` at a time, `max_tokens` each."""
    return asyncio.run(_probe(base_url, model, planner_prompts(n), max_tokens, concurrency))


# ---------------------------------------------------------------- the summary


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a killed process: skip it, keep the others
    return out


def trainer_tokens_per_s(output_dir: Path) -> dict[str, Any] | None:
    """Tokens/s of a TRL run from its log_history.json: the last `num_tokens` over `train_runtime`."""
    history = _read_json(output_dir / "log_history.json")
    if not isinstance(history, list):
        return None
    tokens = next((e["num_tokens"] for e in reversed(history) if "num_tokens" in e), None)
    runtime = next((e["train_runtime"] for e in reversed(history) if "train_runtime" in e), None)
    if tokens is None or not runtime:
        return None
    return {"tokens": tokens, "seconds": runtime, "tokens_per_s": round(tokens / runtime, 1)}


def eval_tokens_per_s(out_dir: Path) -> dict[str, Any] | None:
    """Agent-loop tokens (all roles, prompt + completion) per second of an eval run, from its report.json."""
    report = _read_json(out_dir / "report.json")
    if not isinstance(report, dict):
        return None
    per_q = (report.get("tokens_per_question") or {}).get("total")
    seconds = (report.get("wall_time") or {}).get("eval_s")
    n = report.get("n")
    if per_q is None or not seconds or not n:
        return None
    return {"tokens": round(per_q * n), "seconds": seconds, "tokens_per_s": round(per_q * n / seconds, 1),
            "questions": n, "accuracy": report.get("accuracy"),
            "invalid_action_rate": report.get("invalid_action_rate")}


def smi_peak_mib(path: Path) -> float | None:
    """The largest `memory.used` sample (MiB, summed over devices per sample line block) nvidia-smi wrote."""
    peak = None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            value = float(line.strip().split(",")[0])
        except ValueError:
            continue
        peak = value if peak is None else max(peak, value)
    return peak


def stage_summary(work: Path, record: dict[str, Any]) -> dict[str, Any]:
    name, kind = record["stage"], record.get("kind", "")
    outputs = record.get("outputs") or {}
    throughput: dict[str, Any] | None = None
    if kind in ("sft", "grpo") and outputs.get("output_dir"):
        throughput = trainer_tokens_per_s(work / outputs["output_dir"])
    elif kind == "serve" and outputs.get("probe"):
        p = _read_json(work / outputs["probe"])
        if isinstance(p, dict) and p.get("completion_tokens_per_s") is not None:
            throughput = {"tokens": p["completion_tokens"], "seconds": p["wall_s"],
                          "tokens_per_s": p["completion_tokens_per_s"], "requests": p["requests"]}
    elif kind == "eval" and outputs.get("out"):
        throughput = eval_tokens_per_s(work / outputs["out"])
    stats = _jsonl(work / "gpu" / f"{name}.jsonl")
    allocated = [s["max_memory_allocated"] for s in stats if s.get("max_memory_allocated") is not None]
    smi = smi_peak_mib(work / "gpu" / f"{name}.smi")
    out: dict[str, Any] = {
        "status": record.get("status"), "wall_s": record.get("wall_s"), "kind": kind,
        "tokens_per_s": throughput["tokens_per_s"] if throughput else None, "throughput": throughput,
        "peak_memory_allocated_bytes": max(allocated) if allocated else None,
        "peak_memory_allocated_gib": round(max(allocated) / 2**30, 3) if allocated else None,
        "device_peak_used_mib": smi,
    }
    if kind == "grpo" and outputs.get("output_dir"):
        report = _read_json(work / outputs["output_dir"] / "closure_eval.json")
        if isinstance(report, dict) and report.get("trained"):
            out["closure"] = {"start": report["start"]["closure"]["mean"],
                              "trained": report["trained"]["closure"]["mean"]}
    return out


def summarize(work: str | Path) -> dict[str, Any]:
    """The smoke run's JSON: per stage status, wall seconds, tokens/s, peak memory; the device; the totals."""
    work = Path(work)
    records = _jsonl(work / "stages.jsonl")
    stages = {r["stage"]: stage_summary(work, r) for r in records}
    meta = _read_json(work / "run.json") or {}
    return {"dry_run": bool(meta.get("dry_run")), "started": meta.get("started"), "shape": meta.get("shape"),
            "device": meta.get("device"), "budget_s": meta.get("budget_s"),
            "total_wall_s": round(sum(s["wall_s"] or 0 for s in stages.values()), 1),
            "ok": bool(stages) and all(s["status"] in ("ok", "dry-run") for s in stages.values()),
            "stages": stages}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wait", help="wait until an OpenAI-compatible server answers /models")
    w.add_argument("base_url")
    w.add_argument("--timeout", type=float, default=600.0)
    pr = sub.add_parser("probe", help="generation speed of a served model")
    pr.add_argument("base_url")
    pr.add_argument("--model", required=True)
    pr.add_argument("--n", type=int, default=32)
    pr.add_argument("--max-tokens", type=int, default=128)
    pr.add_argument("--concurrency", type=int, default=16)
    pr.add_argument("--out", required=True)
    s = sub.add_parser("summarize", help="gather the stages' tokens/s and peak memory into one JSON")
    s.add_argument("work")
    s.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.cmd == "wait":
        try:
            print(f"ready after {wait_ready(a.base_url, a.timeout):.1f} s")
        except TimeoutError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    if a.cmd == "probe":
        result = probe(a.base_url, a.model, n=a.n, max_tokens=a.max_tokens, concurrency=a.concurrency)
        Path(a.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
        print(json.dumps(result))
        return 0
    summary = summarize(a.work)
    Path(a.out).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
