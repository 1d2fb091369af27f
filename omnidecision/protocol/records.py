"""The trajectory record: one JSON line per run, holding every step the agent took.

Replay contract: `initial_events`, then each step's `events`, then `final_events`, applied in order with
`omnidecision.ledger.replay`, reproduce `step.ledger` (the snapshot the planner saw at that step, i.e. the
state after all events before the step) and `final_ledger`, byte for byte (`model_dump_json`).

    >>> from omnidecision.ledger import InitLedger, NeedSpec, replay
    >>> init = InitLedger(question="q?", needs=[NeedSpec(description="who")])
    >>> run = RunRecord(run_id="r0", task_id="t1", outcome="insufficient", initial_events=[init])
    >>> RunRecord.model_validate_json(run.model_dump_json()) == run  # one JSON line round-trips
    True
    >>> replay(run.initial_events)[-1].needs[0].description
    'who'
    >>> "stuck" in OUTCOMES
    True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from omnidecision.ledger.events import LedgerEvent
from omnidecision.ledger.schema import Ledger
from omnidecision.protocol.chat import Usage

# stuck: the planner repeated the same rejected decision `AgentConfig.max_repeated_rejections` times in a row
Outcome = Literal["accepted", "insufficient", "forced", "budget", "stuck", "error"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
Mode = Literal["ledger", "react", "memory"]
# What an `insufficient` stop answers by default: the agent abstains (its best-effort draft is kept apart, in
# `RunRecord.draft_answer`, and judged apart, so reports can show accuracy with and without drafted answers).
ABSTAIN_ANSWER = "insufficient evidence"
# the fields that make a record a branch of another (None on an ordinary run)
BRANCH_FIELDS: tuple[str, ...] = ("parent_run_id", "parent_step", "branch_decision", "branch_policy", "branch_seed")


def _omit_none(out: Any, keys: tuple[str, ...]) -> Any:
    """Leave optional fields out of a dump while unset: a record without them stays byte-identical to one written
    before they existed (ordinary runs carry no branch fields, unpriced calls no cost)."""
    if isinstance(out, dict):
        for key in keys:
            if out.get(key, 0) is None:
                out.pop(key)
    return out


class RoleCall(BaseModel):
    """One LLM call of a role other than the planner (decompose, critic, finalizer, summarizer).

    Attributes:
        role: the role that made the call
        raw: the model's raw output
        usage: the call's tokens
        latency_s: seconds the call took
        error: why the call failed (None: it did not)
        model: the model name the endpoint reported in its reply
    """

    role: str
    raw: str = ""
    usage: Usage = Usage()
    latency_s: float = 0.0
    error: str | None = None
    model: str = ""  # the model name the endpoint reported in its reply (the run manifest lists them per role)
    cost: float | None = Field(None, description="the call's cost from its backend's prices (None: no prices); "
                                                 "a resumed run's cost so far is the sum of its calls'")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _omit_none(handler(self), ("cost",))


class StepRecord(BaseModel):
    """One planner step: what the planner saw and said, what the tool returned, what the ledger committed.

    Attributes:
        step: the step's index (0 first)
        ledger: the ledger snapshot the planner saw (None in react and memory modes)
        planner_messages: the exact messages sent to the planner (the SFT row's prompt)
        raw_output: the planner's raw output
        action: the parsed action (None: the output did not parse)
        invalid: the parse error when the planner's output was malformed
        observation: what the tool returned (text and structured fields)
        verdict: the critic's verdict on the observation
        events: the typed events committed to the ledger at this step, in order
        calls: the other roles' calls made at this step (critic, ...)
        usage: the planner call's tokens
        latency_s: seconds the planner call took
    """

    model_config = ConfigDict(extra="forbid")

    step: int
    ledger: Ledger | None = None  # the snapshot the planner saw (None in react/memory modes)
    planner_messages: list[dict[str, Any]]
    raw_output: str = ""
    action: dict[str, Any] | None = None
    invalid: str | None = None  # the parse error when the planner output was malformed
    observation: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    events: list[LedgerEvent] = Field(default_factory=list)
    calls: list[RoleCall] = Field(default_factory=list)
    usage: Usage = Usage()  # planner usage
    latency_s: float = 0.0
    cost: float | None = Field(None, description="the planner call's cost from its backend's prices (None: none)")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _omit_none(handler(self), ("cost",))


class JudgeResult(BaseModel):
    """The judge's verdict on an answer.

    Attributes:
        correct: whether the answer matches the gold answer (None: the judge failed; never counted as correct)
        method: what decided it (exact match, the string scorer, the LLM judge)
        prediction: the answer as the judge read it
        detail: the judge's reason or error
        usage: an LLM judge's tokens (None: no LLM call)
        model: the model name the LLM judge's endpoint reported
    """

    correct: bool | None = None  # None: the judge failed (counted separately, never as correct)
    method: str = ""
    prediction: str | None = None
    detail: str | None = None
    usage: Usage | None = None  # an LLM judge's tokens (None: no LLM call, or a record from before they were kept)
    model: str = ""  # the model name the LLM judge's endpoint reported


class Totals(BaseModel):
    """What a run consumed.

    Attributes:
        tool_calls: calls per tool
        prompt_tokens: prompt tokens of every call of the run
        completion_tokens: completion tokens of every call of the run
        planner_prompt_tokens: prompt tokens of the planner's calls
        cost: the run's cost from the backends' prices (None: unpriced)
        wall_s: seconds the run took
        invalid_actions: planner outputs that did not parse or that the loop rejected
    """

    tool_calls: dict[str, int] = Field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    planner_prompt_tokens: int = 0
    cost: float | None = None
    wall_s: float = 0.0
    invalid_actions: int = 0


class RunRecord(BaseModel):
    """One run of the agent on one task: one JSON line of a trajectory file.

    Attributes:
        run_id: this run's id (unique in its file)
        task_id: the task's id
        sample: which sample of the task (several runs per task: 0, 1, ...)
        mode: ledger, react or memory (the agent or a baseline)
        config_digest: digest of the agent settings the run used
        question: the task's question
        level: the task's difficulty level (benchmark-specific)
        category: the task's category (the synthetic family, the benchmark's category)
        source: where the task came from (the task file)
        replay: whether the observations were replayed from the benchmark's records
        planner_model: the model name the planner's endpoint reported
        initial_events: the events that built the ledger before the first step (decompose's needs and slots)
        decompose: the decompose call
        steps: every planner step, in order
        final_events: the events committed after the last step (the finalizer's checks, the stop)
        final_calls: the calls after the last step (finalizer, summarizer)
        final_ledger: the ledger when the run stopped
        outcome: how the run stopped: accepted, insufficient, forced, budget, stuck or error
        stop_reason: why a run stopped without an accepted answer, in words
        error: the error that ended an `error` run
        answer: the submitted answer (the abstention text for an `insufficient` run)
        draft_answer: the finalizer's best-effort draft of a run that abstained
        gold_answer: the task's gold answer
        judge: the judge's verdict on `answer`
        draft_judge: the judge's verdict on `draft_answer`
        totals: what the run consumed
    """

    model_config = ConfigDict(extra="forbid")

    run_id: str
    task_id: str
    sample: int = 0
    mode: Mode = "ledger"
    config_digest: str = ""
    question: str = ""
    level: str = ""
    category: str = ""
    source: str = ""
    replay: bool = False
    planner_model: str = ""
    initial_events: list[LedgerEvent] = Field(default_factory=list)
    decompose: RoleCall | None = None
    steps: list[StepRecord] = Field(default_factory=list)
    final_events: list[LedgerEvent] = Field(default_factory=list)
    final_calls: list[RoleCall] = Field(default_factory=list)
    final_ledger: Ledger | None = None
    outcome: Outcome
    stop_reason: str | None = None  # why a run stopped without an accepted answer, in words
    error: str | None = None
    answer: str | None = None
    draft_answer: str | None = None  # the finalizer's best-effort draft of a run that abstained (insufficient)
    gold_answer: str | None = None
    judge: JudgeResult | None = None
    draft_judge: JudgeResult | None = None  # the judge on `draft_answer` (reports: accuracy with drafted answers)
    totals: Totals = Totals()
    # a branch (omnidecision/branch/branch.py, docs/rollout.md): a run resumed from step `parent_step` of another
    # record with a decision there; its steps before `parent_step` are the parent's, copied
    parent_run_id: str | None = Field(None, description="the run this one was branched from (None: not a branch)")
    parent_step: int | None = Field(None, description="the parent's step where the branch's decision was applied; "
                                                      "steps before it are the parent's")
    branch_decision: str | None = Field(None, description="the planner output applied at `parent_step` (the "
                                                          "parent's own raw output when the recorded one was kept)")
    branch_policy: str | None = Field(None, description="what made every later decision and role output: "
                                                        "recorded, teacher, recipe, or a backends file")
    branch_seed: int | None = Field(None, description="the branch's seed (0: the backends draw as in the parent)")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _omit_none(handler(self), BRANCH_FIELDS)


def run_key(record: RunRecord) -> tuple[str, int]:
    """What identifies a run among the records of one collection: its (task id, sample), which a resumed shard may
    repeat (the first record counts); a branch shares both with its parent and its sibling branches, so it is keyed
    by its own run id.

    >>> run = RunRecord(run_id="t1-s0-x", task_id="t1", outcome="accepted")
    >>> run_key(run), run_key(run.model_copy(update={"run_id": "t1-s0-x~b2-1", "parent_run_id": "t1-s0-x"}))
    (('t1', 0), ('t1-s0-x~b2-1', 0))
    """
    return (record.run_id if record.parent_run_id is not None else record.task_id, record.sample)


def endpoint_models(records: Iterable[RunRecord]) -> dict[str, list[str]]:
    """role → the model names its endpoint reported in its replies (the planner's, every other role's calls, the LLM
    judge's): what actually answered, next to what the recipe asked for (eval and harvest manifests, data cards)."""
    seen: dict[str, set[str]] = {}
    for r in records:
        if r.planner_model:
            seen.setdefault("planner" if r.mode == "ledger" else r.mode, set()).add(r.planner_model)
        calls = [*([r.decompose] if r.decompose else []), *(c for s in r.steps for c in s.calls), *r.final_calls]
        for call in calls:
            if call.model:
                seen.setdefault(call.role, set()).add(call.model)
        for judge in (r.judge, r.draft_judge):
            if judge is not None and judge.model:
                seen.setdefault("judge", set()).add(judge.model)
    return {role: sorted(models) for role, models in sorted(seen.items())}
