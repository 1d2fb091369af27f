"""The progress audit: how much of the annotated evidence chain did each FAILED run still complete?

Each OmniGAIA task ships `annotated_solution` (subgoal steps; `task.meta["annotated_solution"]`). A failed run (judged
wrong, or ended in `error`; runs the judge failed on are not known to have failed and are left out) is scored per
subgoal: was it reached by the run's evidence, i.e. the final ledger's evidence atoms, filled needs' values and
verified slots (`evidence="ledger"`; a run without a ledger, react / memory, falls back to its observations), or its
tool observations too (`evidence="all"`). With k of n subgoals reached the run is **full** (k = n), **partial**
(0 < k < n) or **zero** progress (k = 0); the weighted progress is the mean weight over the audited runs (full 1.0,
partial 0.5, zero 0). The sensitivity block gives the same classification under other partial weights (0.25, 0.75),
the mean k/n, the string scorer over the other evidence source, and, when a second scorer runs (the string scorer
next to the LLM one), its classification with the two scorers' agreement.

Scorers (`ProgressScorer`: `name`, `async score(item) -> list[bool | None]`, one entry per subgoal; a raised
`ScorerError` is that run's recorded error, never a crash):
- `StringScorer` (offline, deterministic): a subgoal's key terms (numbers >= 10 or with decimals, 'quoted' and
  **bold** phrases, capitalised words past a sentence's first word), minus what the question already says, found in
  the normalised evidence text (numbers compared as numbers); reached when at least `min_coverage` of them are
  found. Without key terms, the share of its content words found; a subgoal with neither (e.g. "Watch the video.")
  has nothing to check: None, and it is left out of n. Exact normalised matching: rapidfuzz is not a dependency.
- `LLMScorer`: any OpenAI-compatible endpoint through the project's `OpenAIBackend` (its retries and endpoint
  handling), asking which subgoals the evidence reached; the reply must be `{"reached": [subgoal numbers]}`
  (JSON-schema constrained where the server supports it), anything else is a per-run error naming the problem.

    omnidecision audit progress runs/eval/grpo --scorer string --out runs/eval/grpo/progress
    omnidecision audit progress runs/eval/grpo/trajectories.jsonl --tasks data/omnigaia/test_metadata.json \
        --scorer llm --endpoint http://localhost:8001/v1 --model gpt-4.1-mini --out runs/audit/grpo
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from omnidecision.backends.openai_backend import OpenAIBackend
from omnidecision.eval.correctness import is_correct, judge_failed
from omnidecision.protocol.actions import parse_with
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatBackend, ChatRequest
from omnidecision.protocol.records import RunRecord
from omnidecision.stats import mean, rate
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

Evidence = Literal["ledger", "all"]
CLASSES: tuple[str, ...] = ("full", "partial", "zero")
WEIGHTS: dict[str, float] = {"full": 1.0, "partial": 0.5, "zero": 0.0}
SENSITIVITY_PARTIAL: tuple[float, ...] = (0.25, 0.75)  # the other weights of a partial run the report shows
LONG_PHRASE = 3  # tokens: a longer key phrase is matched by its words, not as written

_STEP_SPLIT = re.compile(r"\s+(?=Step\s*\d+\s*:)", re.I)
_STEP_PREFIX = re.compile(r"^\s*(?:step\s*\d+\s*[:.)-]|\d+[.)])\s*", re.I)
_TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w])")
_TOKEN = re.compile(r"\w+", re.UNICODE)
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_QUOTED = re.compile(r"(?<!\w)['\"‘“]([^'\"‘’“”\n]{2,80}?)['\"’”](?!\w)")
_CAPITALISED = re.compile(r"(?<![.:!?]\s)(?<!^)\b[A-Z][\w\-]*")
# words of how a step is done, not of what it establishes
_STOP = frozenset("""a about above after again all also an and any are as at be because been before being between
both but by can could did do does each few for from further had has have having he her here hers him his how i if in
into is it its itself just me more most my no nor not now of off on once only or other our out over own same she
should so some such than that the their them then there these they this those through to too under until up very
was we were what when where which while who whom why will with would you your step use used using watch listen
examine identify search perform find look confirm determine calculate compute round verify analyze analyse extract
note check read web web_search search_web video audio image clip frame first second third result results
approximately about answer conclude final""".split())


def subgoals(task: Task) -> list[str]:
    """The task's annotated subgoal steps, one per step (a string with several inline "Step N:" is split).

    >>> subgoals(Task(id="t", question="q", meta={"annotated_solution": ["Step 1: a. Step 2: b", "Step 3: c"]}))
    ['Step 1: a.', 'Step 2: b', 'Step 3: c']
    """
    steps = task.meta.get("annotated_solution") or []
    return [part.strip() for step in steps for part in _STEP_SPLIT.split(str(step)) if part.strip()]


def run_evidence(record: RunRecord, evidence: Evidence = "ledger") -> tuple[str, str]:
    """(the run's evidence text, where it came from): the final ledger's evidence claims, filled needs' values and
    verified slots; with `evidence="all"` (or a run without a ledger) the ok observations' text too."""
    parts: list[str] = []
    led = record.final_ledger
    has_ledger = led is not None and led.initialized
    if has_ledger:
        parts += [e.claim for e in led.evidence]
        parts += [n.value for n in led.needs if n.value and n.status in ("filled", "partial")]
        parts += [f"{s.name}: {s.value}" for s in led.slots if s.value and s.verified]
    use_obs = evidence == "all" or not has_ledger
    if use_obs:
        parts += [str(s.observation.get("text") or "") for s in record.steps
                  if s.observation and s.observation.get("ok")]
    where = ("ledger+observations" if has_ledger else "observations") if use_obs else "ledger"
    return "\n".join(p for p in parts if p), where


@dataclass
class AuditItem:
    """One failed run to score: its task's question and subgoals, and the evidence text."""

    record: RunRecord
    question: str
    subgoals: list[str]
    evidence: str
    evidence_from: str


class ScorerError(Exception):
    """A run the scorer could not score (the message is recorded in that run's row)."""


class ProgressScorer(Protocol):
    name: str

    async def score(self, item: AuditItem) -> list[bool | None]: ...


# ---------------------------------------------------------------- the string scorer


def _norm(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower().replace("_", " ")))


def _numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in _NUMBER.findall(_TIME.sub(" ", text))]


def key_terms(step: str, question: str = "") -> tuple[list[str], list[float], list[str]]:
    """(phrases, numbers, content words) a subgoal establishes, minus what `question` already says.

    >>> key_terms("Step 2: Search confirms **Marker** made 1,930 units in 'Ski City'.", "Which binding?")
    (['marker', 'ski city'], [1930.0], ['confirms', 'marker', 'made', 'units', 'city'])
    """
    body = _STEP_PREFIX.sub("", step)
    q_norm, q_tokens, q_numbers = f" {_norm(question)} ", set(_norm(question).split()), _numbers(question)
    raw = [*_BOLD.findall(body), *_QUOTED.findall(body), *_CAPITALISED.findall(body.replace("**", ""))]
    phrases: list[str] = []
    for p in (_norm(x) for x in raw):
        known = any(f" {p} " in f" {x} " for x in phrases)  # a capitalised word of a phrase already kept
        if p and not known and p not in _STOP and f" {p} " not in q_norm and not p.isdigit():
            phrases.append(p)
    numbers = [n for n in dict.fromkeys(_numbers(body)) if (abs(n) >= 10 or n != int(n)) and n not in q_numbers]
    words = [w for w in dict.fromkeys(_norm(body).split())
             if len(w) >= 4 and not w.isdigit() and w not in _STOP and w not in q_tokens]
    return phrases, numbers, words


class StringScorer:
    """Offline scorer: key terms of each subgoal found in the evidence (see the module docstring)."""

    name = "string"

    def __init__(self, min_coverage: float = 0.5) -> None:
        if not 0.0 < min_coverage <= 1.0:
            raise ValueError(f"min_coverage must be in (0, 1], got {min_coverage}")
        self.min_coverage = min_coverage

    @staticmethod
    def phrase_found(phrase: str, ev_norm: str, ev_tokens: set[str]) -> bool:
        """A phrase of up to LONG_PHRASE tokens appears as written (normalised); a longer one (a quoted sentence)
        when at least 3/4 of its content words appear: evidence paraphrases long quotes."""
        tokens = phrase.split()
        if len(tokens) <= LONG_PHRASE:
            return f" {phrase} " in ev_norm
        content = [t for t in tokens if t not in _STOP] or tokens
        return sum(t in ev_tokens for t in content) >= 0.75 * len(content)

    def score_one(self, step: str, question: str, evidence: str) -> bool | None:
        phrases, numbers, words = key_terms(step, question)
        ev_norm, ev_numbers = f" {_norm(evidence)} ", _numbers(evidence)
        ev_tokens = set(ev_norm.split())
        if phrases or numbers:
            found = sum(self.phrase_found(p, ev_norm, ev_tokens) for p in phrases)
            found += sum(any(abs(n - e) <= 1e-9 * max(1.0, abs(n)) for e in ev_numbers) for n in numbers)
            return found / (len(phrases) + len(numbers)) >= self.min_coverage
        if words:
            return sum(f" {w} " in ev_norm for w in words) / len(words) >= self.min_coverage
        return None

    async def score(self, item: AuditItem) -> list[bool | None]:
        return [self.score_one(s, item.question, item.evidence) for s in item.subgoals]


# ---------------------------------------------------------------- the LLM scorer

@cache
def llm_prompt() -> str:
    """The LLM scorer's system prompt (eval/prompts/progress_audit.md)."""
    return resources.files("omnidecision.eval").joinpath("prompts", "progress_audit.md").read_text("utf-8").strip()



class ReachedReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reached: list[int]


REPLY_ADAPTER: TypeAdapter[ReachedReply] = TypeAdapter(ReachedReply)


def reply_schema(n: int) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["reached"],
            "properties": {"reached": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": n}}}}


class ScorerEndpoint(BaseModel):
    """The LLM scorer's endpoint and request settings (`omnidecision audit progress --scorer llm`)."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    max_retries: int = 3
    concurrency: int = 8  # requests in flight
    max_tokens: int = 128
    structured: bool = True  # JSON-schema constrained replies (response_format)
    max_evidence_chars: int = 8000
    options: dict[str, Any] = Field(default_factory=dict)  # the backend's own (e.g. extra_body)

    def backend_spec(self) -> BackendSpec:
        """The OpenAI backend's spec: greedy decoding, the settings above."""
        return BackendSpec(base_url=self.base_url, model=self.model, api_key_env=self.api_key_env,
                           timeout_s=self.timeout_s, max_retries=self.max_retries, max_tokens=self.max_tokens,
                           temperature=0.0, structured_output=self.structured, max_concurrency=self.concurrency,
                           options=self.options)


class LLMScorer:
    """Asks an OpenAI-compatible model which subgoals a run's evidence reached (one request per run)."""

    name = "llm"

    def __init__(self, backend: ChatBackend, model: str = "", max_evidence_chars: int = 8000) -> None:
        self.backend, self.model, self.max_evidence_chars = backend, model, max_evidence_chars

    @classmethod
    def from_endpoint(cls, endpoint: ScorerEndpoint | str, model: str | None = None, **settings: Any) -> LLMScorer:
        """A scorer on an endpoint, through the project's one OpenAI backend (its retries on 429/5xx/timeouts).
        `endpoint`: a `ScorerEndpoint`, or its base URL with `model` and any of its fields as `settings` (a key that
        is no field of it is the backend's option, e.g. `extra_body`)."""
        if isinstance(endpoint, str):
            fields = {k: settings.pop(k) for k in list(settings) if k in ScorerEndpoint.model_fields}
            endpoint = ScorerEndpoint(base_url=endpoint, model=model or "", **fields, options=settings)
        return cls(OpenAIBackend(endpoint.backend_spec()), model=endpoint.model,
                   max_evidence_chars=endpoint.max_evidence_chars)

    async def aclose(self) -> None:
        if (close := getattr(self.backend, "aclose", None)) is not None:
            await close()

    def messages(self, item: AuditItem) -> list[dict[str, str]]:
        steps = "\n".join(f"{i}. {_STEP_PREFIX.sub('', s)}" for i, s in enumerate(item.subgoals, start=1))
        evidence = item.evidence[: self.max_evidence_chars] or "(none)"
        return [{"role": "system", "content": llm_prompt()},
                {"role": "user", "content": f"QUESTION:\n{item.question}\n\nSUBGOALS:\n{steps}\n\n"
                                            f"EVIDENCE THE RUN GATHERED:\n{evidence}"}]

    async def score(self, item: AuditItem) -> list[bool | None]:
        n = len(item.subgoals)
        request = ChatRequest(role="judge", messages=self.messages(item), json_schema=reply_schema(n),
                              schema_name="progress_audit")
        try:
            response = await self.backend.chat(request)
        except BackendError as exc:
            raise ScorerError(f"backend_error: {exc.reason}") from exc
        reply, error = parse_with(REPLY_ADAPTER, response.text)
        if reply is None:
            raise ScorerError(f"unparseable: {error}; raw={response.text[:160]!r}")
        bad = sorted({i for i in reply.reached if not 1 <= i <= n})
        if bad:
            raise ScorerError(f"unparseable: subgoal numbers {bad} outside 1..{n}; raw={response.text[:160]!r}")
        return [i in reply.reached for i in range(1, n + 1)]


# ---------------------------------------------------------------- the audit


class RunProgress(BaseModel):
    """One audited run: subgoals reached k of n (n: the subgoals the scorer could check), its class or error."""

    run_id: str
    task_id: str
    sample: int = 0
    outcome: str
    scorer: str
    evidence_from: str = ""
    n: int = 0
    k: int = 0
    progress: Literal["full", "partial", "zero"] | None = None
    reached: list[bool | None] = []
    error: str | None = None


def classify(k: int, n: int) -> Literal["full", "partial", "zero"] | None:
    """Full (all n reached), partial, zero; None when there was nothing to check.

    >>> [classify(3, 3), classify(1, 3), classify(0, 3), classify(0, 0)]
    ['full', 'partial', 'zero', None]
    """
    return None if n == 0 else "full" if k == n else "zero" if k == 0 else "partial"


def select_runs(records: list[RunRecord], tasks: dict[str, Task], evidence: Evidence = "ledger"
                ) -> tuple[list[AuditItem], dict[str, Any]]:
    """The failed runs to audit, and how every run was counted (correct, not judged, unknown task, no subgoals)."""
    items: list[AuditItem] = []
    counts: Counter[str] = Counter(total=len(records))
    for r in records:
        if is_correct(r):
            counts["correct"] += 1
        elif judge_failed(r) and r.outcome != "error":
            counts["not_judged"] += 1
        elif r.task_id not in tasks:
            counts["unknown_task"] += 1
        elif not (steps := subgoals(tasks[r.task_id])):
            counts["no_subgoals"] += 1
        else:
            counts["failed"] += 1
            text, where = run_evidence(r, evidence)
            items.append(AuditItem(r, tasks[r.task_id].question or r.question, steps, text, where))
    keys = ("total", "correct", "not_judged", "unknown_task", "no_subgoals", "failed")
    return items, {k: counts.get(k, 0) for k in keys}


async def score_runs(items: list[AuditItem], scorer: ProgressScorer, concurrency: int = 8) -> list[RunProgress]:
    """Every item scored (concurrently); a ScorerError (or any scorer failure) is that run's `error`. The scorer's
    `aclose()`, when it has one, runs at the end (inside the same event loop as its requests)."""
    sem = asyncio.Semaphore(concurrency)

    async def one(item: AuditItem) -> RunProgress:
        r = item.record
        row = RunProgress(run_id=r.run_id, task_id=r.task_id, sample=r.sample, outcome=r.outcome,
                          scorer=scorer.name, evidence_from=item.evidence_from)
        async with sem:
            try:
                reached = await scorer.score(item)
            except ScorerError as exc:
                row.error = str(exc)
            except Exception as exc:  # a scorer bug or client failure costs one run, never the audit
                row.error = f"{type(exc).__name__}: {exc}"[:500]
        if row.error is not None:
            logger.warning("progress audit: run %s (%s) not scored: %s", r.run_id, r.task_id, row.error[:300])
            return row
        checked = [x for x in reached if x is not None]
        row.reached, row.n, row.k = reached, len(checked), sum(checked)
        row.progress = classify(row.k, row.n)
        return row

    try:
        return list(await asyncio.gather(*(one(i) for i in items)))
    finally:
        if (close := getattr(scorer, "aclose", None)) is not None:
            await close()


def summarize(rows: list[RunProgress], weights: dict[str, float] | None = None) -> dict[str, Any]:
    """Counts of full / partial / zero among the scored runs, the weighted progress (mean weight) and mean k/n.

    >>> rows = [RunProgress(run_id=str(i), task_id="t", outcome="budget", scorer="s", n=2, k=k,
    ...                     progress=classify(k, 2)) for i, k in enumerate([2, 1, 0, 0])]
    >>> s = summarize(rows); s["counts"], s["weighted_progress"]
    ({'full': 1, 'partial': 1, 'zero': 2}, 0.375)
    """
    w = {**WEIGHTS, **(weights or {})}
    scored = [r for r in rows if r.progress is not None]
    return {"n_scored": len(scored), "counts": {c: sum(r.progress == c for r in scored) for c in CLASSES},
            "weights": w, "weighted_progress": mean(w[r.progress] for r in scored),
            "mean_subgoal_fraction": mean(r.k / r.n for r in scored),
            "scorer_errors": sum(r.error is not None for r in rows),
            "nothing_to_check": sum(r.error is None and r.progress is None for r in rows)}


def agreement(a: list[RunProgress], b: list[RunProgress]) -> dict[str, Any]:
    """How often two scorers put a run in the same class, over the runs both scored; the confusion counts
    ("first/second" class)."""
    both = [(x.progress, y.progress) for x, y in zip(a, b, strict=True)
            if x.progress is not None and y.progress is not None]
    return {"runs_both_scored": len(both), "same_class": rate(sum(x == y for x, y in both), len(both)),
            "confusion": dict(sorted(Counter(f"{x}/{y}" for x, y in both).items()))}


def _sensitivity_row(rows: list[RunProgress], scorer: str, evidence: str, partial: float) -> dict[str, Any]:
    s = summarize(rows, {"partial": partial})
    return {"scorer": scorer, "evidence": evidence, "partial_weight": partial, "counts": s["counts"],
            "n_scored": s["n_scored"], "weighted_progress": s["weighted_progress"]}


def audit(records: list[RunRecord], tasks: list[Task], scorer: ProgressScorer, *, evidence: Evidence = "ledger",
          second: ProgressScorer | None = None, concurrency: int = 8) -> dict[str, Any]:
    """The whole audit (progress.json's content): selection, scoring, summary, sensitivity, per-run rows.

    `sensitivity.rows`: the headline (partial 0.5) and the same classification at the other partial weights; the
    `second` scorer's (if given) at 0.5; the string scorer over the other evidence source (ledger ↔ all) at 0.5.
    `sensitivity.second_scorer` adds the second scorer's counts and its agreement with the first, run by run."""
    by_id = {t.id: t for t in tasks}
    items, runs = select_runs(records, by_id, evidence)
    rows = asyncio.run(score_runs(items, scorer, concurrency))
    result = summarize(rows)
    table = [_sensitivity_row(rows, scorer.name, evidence, p) for p in (WEIGHTS["partial"], *SENSITIVITY_PARTIAL)]
    sensitivity: dict[str, Any] = {"rows": table, "mean_subgoal_fraction": result["mean_subgoal_fraction"]}
    per_run = [r.model_dump() for r in rows]
    if second is not None:
        other = asyncio.run(score_runs(items, second, concurrency))
        table.append(_sensitivity_row(other, second.name, evidence, WEIGHTS["partial"]))
        sensitivity["second_scorer"] = {"scorer": second.name, **summarize(other), "agreement": agreement(rows, other)}
        for row, o in zip(per_run, other, strict=True):
            row["second"] = {"scorer": o.scorer, "k": o.k, "n": o.n, "progress": o.progress, "error": o.error}
    alt: Evidence = "all" if evidence == "ledger" else "ledger"
    alt_items, _ = select_runs(records, by_id, alt)
    table.append(_sensitivity_row(asyncio.run(score_runs(alt_items, StringScorer())), "string", alt, 0.5))
    return {"scorer": scorer.name, "model": getattr(scorer, "model", None) or None, "evidence": evidence,
            "runs": runs, **result, "sensitivity": sensitivity, "per_run": per_run}
