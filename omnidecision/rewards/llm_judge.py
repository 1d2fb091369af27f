"""The LLM reward judge: a small LLM behind an OpenAI-compatible endpoint scores one planner decision in [0, 1]
(`rewards/learned_judge.py` is the trained one; `tasks/grading.py` grades answers, not decisions).

The judge reads the bounded ledger digest and one candidate decision (prompt: rewards/prompts/judge.md) and
answers `{"score": 0..1, "reason": "..."}` (JSON-schema constrained when the server supports it).

- Concurrency limit (a semaphore), a per-request timeout, and a cache keyed by (digest the judge saw,
  canonical decision, model, prompt): in memory, and optionally an append-only JSONL file on disk. With several
  training processes (`cache_rank`), each appends to its own `<stem>.rank<R>.jsonl` beside the named file and
  reads every rank's file at start: one writer per file.
- Failure policy: a timeout, a backend error or an unparseable/out-of-range judgment gives None for that
  sample (TRL skips it: NaN in its weighted sum), is counted in `stats.failures[reason]` and logged. Never a
  silent 0 or 1. Failures are not cached, so the next batch retries them. An unparseable *decision* is not
  sent (the closure checks already score it 0): None, counted in `stats.skipped_invalid`.
- `score(items)` is synchronous (TRL calls reward functions synchronously): the requests run on the judge's
  own event loop in a private thread, so it works whether or not the caller already runs a loop.

    python -c "from omnidecision.rewards.llm_judge import RewardJudge; print(RewardJudge.prompt()[:60])"
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from omnidecision.ledger import DigestBudget, Ledger, render_digest
from omnidecision.protocol.actions import parse_with, render_action
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatBackend, ChatRequest
from omnidecision.rewards.decision import Decision, load_ledger
from omnidecision.rewards.registry import register_reward

logger = logging.getLogger(__name__)


class JudgeVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")

    score: float = Field(ge=0.0, le=1.0)
    reason: str = Field("", max_length=1000)


VERDICT_ADAPTER: TypeAdapter[JudgeVerdict] = TypeAdapter(JudgeVerdict)
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1},
                   "reason": {"type": "string", "maxLength": 200}},
    "required": ["score", "reason"],
    "additionalProperties": False,
}


@cache
def _prompt_text() -> str:
    return resources.files("omnidecision.rewards").joinpath("prompts", "judge.md").read_text("utf-8").rstrip("\n")


def rank_cache_path(base: Path, rank: int) -> Path:
    """The cache file training process `rank` appends to.

    >>> rank_cache_path(Path("runs/judge_cache.jsonl"), 3).name
    'judge_cache.rank3.jsonl'
    """
    return base.with_name(f"{base.stem}.rank{rank}{base.suffix}")


def cache_files(base: Path) -> list[Path]:
    """Every cache file of a run: the named one and the per-rank ones beside it (those that exist)."""
    found = [base] if base.exists() else []
    if base.parent.is_dir():
        found += sorted(base.parent.glob(f"{base.stem}.rank*{base.suffix}"))
    return found


@dataclass
class JudgeStats:
    """Counters since the judge was built: requests sent, cache hits, successes, failures by reason."""

    requests: int = 0
    cache_hits: int = 0
    successes: int = 0
    skipped_invalid: int = 0
    failures: Counter[str] = field(default_factory=Counter)

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "cache_hits": self.cache_hits, "successes": self.successes,
                "skipped_invalid": self.skipped_invalid, "failed": self.failed, "failures": dict(self.failures)}


class RewardJudge:
    """Scores (ledger, decision) pairs with an LLM; see the module docstring for the policies."""

    def __init__(self, backend: ChatBackend, *, model: str = "", concurrency: int = 8, timeout_s: float = 30.0,
                 cache_path: str | Path | None = None, budget: DigestBudget | None = None,
                 cache_rank: int | None = None) -> None:
        if concurrency < 1:
            raise ValueError(f"judge concurrency must be >= 1, got {concurrency}")
        if timeout_s <= 0:
            raise ValueError(f"judge timeout_s must be > 0, got {timeout_s}")
        self.backend, self.model = backend, model
        self.concurrency, self.timeout_s, self.budget = concurrency, timeout_s, budget
        self.stats = JudgeStats()
        self.cache: dict[str, JudgeVerdict] = {}
        base = Path(cache_path) if cache_path else None
        # the file this process appends to: its own per rank, so that no two processes write one file
        self.cache_path = base if base is None or cache_rank is None else rank_cache_path(base, cache_rank)
        self._prompt_hash = hashlib.sha256(_prompt_text().encode()).hexdigest()[:12]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sem: asyncio.Semaphore | None = None
        if base is not None:
            for path in cache_files(base):
                self._load_cache(path)

    @classmethod
    def from_options(cls, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", concurrency: int = 8,
                     timeout_s: float = 30.0, cache_path: str | None = None, max_tokens: int = 96,
                     temperature: float = 0.0, structured: bool = True, cache_rank: int | None = None) -> RewardJudge:
        """A judge on an OpenAI-compatible endpoint (the options a YAML recipe gives under `judge_*`), through the
        project's one OpenAI backend. No retries: a failed call is left out of the reward (the failure policy)."""
        from omnidecision.backends.openai_backend import OpenAIBackend  # above rewards' row: a listed exception

        spec = BackendSpec(base_url=base_url, model=model, api_key_env=api_key_env, timeout_s=timeout_s,
                           max_retries=0, max_tokens=max_tokens, temperature=temperature,
                           structured_output=structured, max_concurrency=concurrency)
        return cls(OpenAIBackend(spec), model=model, concurrency=concurrency, timeout_s=timeout_s,
                   cache_path=cache_path, cache_rank=cache_rank)

    @staticmethod
    def prompt() -> str:
        return _prompt_text()

    # ---- cache ----------------------------------------------------------------------------------------------

    def key(self, digest: str, decision: str) -> str:
        blob = json.dumps([digest, decision, self.model, self._prompt_hash], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _load_cache(self, path: Path) -> None:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    self.cache[row["key"]] = JudgeVerdict(score=row["score"], reason=row.get("reason", ""))
                except (ValueError, KeyError, TypeError) as exc:
                    logger.warning("%s:%d: skipping a bad judge-cache line (%s)", path, lineno, exc)
        logger.info("judge cache: %d entries from %s", len(self.cache), path)

    def _remember(self, key: str, verdict: JudgeVerdict) -> None:
        self.cache[key] = verdict
        if self.cache_path is not None:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            with self.cache_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"key": key, "score": verdict.score, "reason": verdict.reason},
                                    ensure_ascii=False) + "\n")

    # ---- scoring --------------------------------------------------------------------------------------------

    def messages(self, digest: str, decision: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": _prompt_text()},
                {"role": "user", "content": f"LEDGER DIGEST:\n{digest}\n\nCANDIDATE DECISION:\n{decision}"}]

    async def _judge_one(self, digest: str, decision: str, key: str) -> JudgeVerdict | None:
        assert self._sem is not None
        async with self._sem:
            self.stats.requests += 1
            request = ChatRequest(role="judge", messages=self.messages(digest, decision),
                                  json_schema=VERDICT_SCHEMA, schema_name="judge_verdict")
            try:
                response = await asyncio.wait_for(self.backend.chat(request), timeout=self.timeout_s)
            except asyncio.TimeoutError:
                return self._fail("timeout", f"no answer within {self.timeout_s:g}s")
            except BackendError as exc:
                return self._fail("backend_error", exc.reason)
            except Exception as exc:  # any client failure is a judge failure, never a crash
                return self._fail("backend_error", f"{type(exc).__name__}: {exc}")
        verdict, error = parse_with(VERDICT_ADAPTER, response.text)
        if verdict is None:
            return self._fail("unparseable", f"{error}; raw={response.text[:120]!r}")
        self.stats.successes += 1
        self._remember(key, verdict)
        return verdict

    def _fail(self, reason: str, detail: str) -> None:
        self.stats.failures[reason] += 1
        logger.warning("reward judge failed (%s): %s; the sample is skipped", reason, detail[:300])
        return None

    async def ascore(self, items: Sequence[tuple[Ledger, object]]) -> list[JudgeVerdict | None]:
        """Judge (ledger, completion) pairs concurrently; None where the decision is invalid or the judge failed."""
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        out: list[JudgeVerdict | None] = [None] * len(items)
        pending: dict[str, list[int]] = {}
        jobs: dict[str, tuple[str, str]] = {}
        for i, (state, completion) in enumerate(items):
            decision = Decision.parse(completion)
            if decision.action is None:
                self.stats.skipped_invalid += 1
                continue
            digest, canonical = render_digest(state, self.budget), render_action(decision.action)
            key = self.key(digest, canonical)
            if key in self.cache:
                self.stats.cache_hits += 1
                out[i] = self.cache[key]
            elif key in jobs:  # the same decision twice in one batch: one request
                self.stats.cache_hits += 1
                pending[key].append(i)
            else:
                jobs[key] = (digest, canonical)
                pending[key] = [i]
        keys = list(jobs)
        results = await asyncio.gather(*(self._judge_one(*jobs[k], k) for k in keys))
        for k, verdict in zip(keys, results, strict=True):
            for i in pending[k]:
                out[i] = verdict
        return out

    def score_verdicts(self, items: Sequence[tuple[Ledger, object]]) -> list[JudgeVerdict | None]:
        """Synchronous `ascore`, run on the judge's private event loop thread."""
        future: Future = asyncio.run_coroutine_threadsafe(self.ascore(items), self._ensure_loop())
        return future.result()

    def score(self, items: Sequence[tuple[Ledger, object]]) -> list[float | None]:
        return [v.score if v is not None else None for v in self.score_verdicts(items)]

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="reward-judge", daemon=True)
            self._thread.start()
        return self._loop

    def close(self) -> None:
        """Stop the private loop (and close the HTTP client if the backend has one)."""
        if self._loop is None:
            return
        aclose = getattr(self.backend, "aclose", None)
        if aclose is not None:
            asyncio.run_coroutine_threadsafe(aclose(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop.close()
        self._loop = self._thread = self._sem = None

    def __enter__(self) -> RewardJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def judge_reward_func(judge: RewardJudge) -> Callable[..., list[float | None]]:
    """The judge as a TRL reward function named `judge_reward`; logs `judge/failures` and `judge/cache_hits`."""
    def judge_reward(completions: Sequence[object], **kwargs: Any) -> list[float | None]:
        ledgers = kwargs.get("ledger")
        if ledgers is None:
            raise KeyError("the judge reward needs the `ledger` column in the RL dataset")
        before = judge.stats.as_dict()
        scores = judge.score([(load_ledger(s), c) for s, c in zip(ledgers, completions, strict=True)])
        after = judge.stats.as_dict()
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric("judge/failures", float(after["failed"] - before["failed"]))
            log_metric("judge/cache_hits", float(after["cache_hits"] - before["cache_hits"]))
        if after["failed"] > before["failed"]:
            logger.warning("reward judge: %d of %d samples failed in this batch (totals: %s)",
                           after["failed"] - before["failed"], len(completions), after["failures"])
        return scores

    judge_reward.judge = judge  # type: ignore[attr-defined]
    return judge_reward


@register_reward("llm_judge", kind="judge")
def llm_judge_reward(**options: Any) -> Callable[..., list[float | None]]:
    """The LLM reward judge behind an OpenAI-compatible endpoint as a TRL reward function (options:
    `RewardJudge.from_options`). The `judge` reward picks it when no `path` (learned judge) is given."""
    return judge_reward_func(RewardJudge.from_options(**options))
