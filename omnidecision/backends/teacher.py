"""The scripted teacher: an offline backend for every role that solves tasks from their gold decomposition.

It answers `ChatBackend.chat(request)` with the same JSON an LLM would write (the schemas of
`omnidecision.protocol.actions`), reading `request.context` (task with gold, ledger, action, observation):

- decompose: the gold needs and slots (`DecomposeOutput`);
- planner: `finish` when the ledger allows it, else the first actionable blocking need (then a supplementary
  one), the first of its sources still to try, the composed query (`CallAction`; written in the short form,
  `protocol.actions.short_form`: a tool the loop defaults to and the composed query are left out);
- critic: compares the observation with the gold value of the targeted need: found → supports/filled; the
  gold's conflicting value found first → conflicts (then a confirming source resolves it: the gold's
  `confirm_query_focus` query, or only an observation of its `resolved_by` source); otherwise omits,
  and a need no tool can fill becomes `unfillable` after its attempts; slots follow their needs;
- finalizer: drafts the answer from the ledger (mcq → option letter) and passes iff the ledger is ready.

Habits: systematic failures of a real (API) planner, the ones closure-aligned RL targets. Each habit is switched on
for a whole run with its own probability (drawn per task and sample), and then fires at each state where it applies
with probability `habit_rate` (drawn per step), so a teacher with a habit shows it repeatedly, not once:

- `retry_empty_source`: a need's source came back without the value and the need lists another one; the teacher
  calls the same source again instead of switching (each retry burns one of the need's attempts: two in a row
  exhaust it and the run ends `insufficient`);
- `early_finish`: finishes while a blocking need is still open and can advance, or before computing an actionable
  computation slot (the finalizer's check fails, a revision is spent: three of them force an answer);
- `settle_first_value`: with an open conflict on a need, finishes on the value it saw first instead of asking the
  need's independent source;
- `supplementary_first`: spends tool calls on actionable supplementary needs before the blocking ones, and calls
  one when the ledger is already ready instead of finishing (under a tight tool budget the blocking chain is then
  left without calls).

A run where a habit fired can still end correct (one detour, then recovery): those runs are what a harvest of
judge-correct runs keeps, so the habits reach the SFT data as they would from an API teacher. `HABIT_TEACHER` is the
collection teacher of the demo and the experiment (tests/agent/test_teacher_habits.py: one hand-built task per
habit; docs/research/testbed.md, "The teacher with habits", for its accuracy per family).

Noise knobs (`wrong_tool`, `vague_query`, `premature_finish`, `missed_conflict`, `invalid_target`: i.i.d.
probabilities per decision; a float sets all) add unsystematic mistakes on top. `invalid_target` calls a need that is
not actionable (filled or blocked), which the loop rejects: the next state shows the rejection in the digest and the
teacher's next decision is the rule one, so harvested data holds recoveries from rejected decisions. Draws come
from a hash of (seed, task id, sample, step, role, knob), never from global random state, so a rerun is identical.

    omnidecision run --tasks runs/synth/tasks.jsonl --teacher   # the agent loop with this backend

    >>> TeacherBackend(noise=0.1).noise["wrong_tool"]
    0.1
    >>> TeacherBackend(habits=0.5).habits["early_finish"]
    0.5
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from typing import Any

from omnidecision.ledger.events import NeedSpec
from omnidecision.ledger.readiness import (
    actionable_need_indices,
    blocked_need_indices,
    ready,
    tool_budget_spent,
    unmet_blocking,
    unresolved_conflicts,
)
from omnidecision.ledger.schema import SOURCE_TOOL, Ledger, Slot
from omnidecision.protocol.actions import (
    TOOL_NAMES,
    CallAction,
    CriticOutput,
    DecomposeOutput,
    EvidenceClaim,
    FinalizerOutput,
    FinishAction,
    NeedVerdict,
    SlotVerdict,
    render_action,
    short_form,
)
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatRequest, ChatResponse, Usage
from omnidecision.protocol.rule import rule_action
from omnidecision.tasks.schema import Task

NOISE_KNOBS: tuple[str, ...] = ("wrong_tool", "vague_query", "premature_finish", "missed_conflict", "invalid_target")
# Default noise of collections: measured to land the teacher between 50% and 85% correct on the synthetic suite
# (0.685 at 0.15 on 200 tasks of the default mix, seed 11; 0.25 gave 0.445 once the planning families came in)
# (tests/tasks/test_teacher.py).
DEFAULT_NOISE = 0.15

HABIT_KNOBS: tuple[str, ...] = ("retry_empty_source", "early_finish", "settle_first_value", "supplementary_first")
# The collection teacher of the demo and the experiment (configs/collect/synthetic-habits.yaml): every habit on in
# half of the runs, firing at 60% of the states where it applies, plus a little i.i.d. noise
HABITS_DEFAULT: dict[str, float] = dict.fromkeys(HABIT_KNOBS, 0.5)
# the collection teacher's options (= configs/collect/synthetic-habits.yaml, tests/agent/test_teacher_habits.py)
HABIT_TEACHER: dict[str, Any] = {"habits": HABITS_DEFAULT, "habit_rate": 0.6, "noise": 0.02}


def contains_value(text: str, value: str | None) -> bool:
    """`value` occurs in `text` as a whole phrase (case-insensitive; "19" does not match "1987").

    >>> contains_value("born in 1987.", "1987"), contains_value("born in 1987.", "98")
    (True, False)
    """
    if not value:
        return False
    return re.search(r"(?<![\w])" + re.escape(value.strip()) + r"(?![\w])", text, flags=re.I) is not None


def estimate_tokens(text: str) -> int:
    """A rough token count (≈ 4 characters a token), for usage records of an offline backend."""
    return max(1, (len(text) + 3) // 4) if text else 0


def _probabilities(value: float | dict[str, float] | None, knobs: tuple[str, ...], what: str) -> dict[str, float]:
    """One probability per knob: a float sets all, a mapping names some (the others 0); checked to lie in [0, 1]."""
    if value is None:
        value = 0.0
    if isinstance(value, int | float):
        out = dict.fromkeys(knobs, float(value))
    else:
        unknown = sorted(set(value) - set(knobs))
        if unknown:
            raise ValueError(f"unknown teacher {what}(s) {unknown}; known: {list(knobs)}")
        out = {k: float(value.get(k, 0.0)) for k in knobs}
    for k, p in out.items():
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"teacher {what} {k}={p} is not a probability in [0, 1]")
    return out


def normalise_noise(noise: float | dict[str, float] | None) -> dict[str, float]:
    """Noise probabilities per decision, by knob (a float sets every knob)."""
    return _probabilities(noise, NOISE_KNOBS, "noise knob")


def normalise_habits(habits: float | dict[str, float] | None) -> dict[str, float]:
    """Habit probabilities per run, by name (a float sets every habit).

    >>> normalise_habits({"early_finish": 0.3})["retry_empty_source"]
    0.0
    """
    return _probabilities(habits, HABIT_KNOBS, "habit")


def _evidence_text(observation: Any) -> str:
    """Everything a critic reads in an observation: its text and the string fields (e.g. code stdout)."""
    if observation is None:
        return ""
    if hasattr(observation, "model_dump"):
        observation = observation.model_dump()
    parts = [str(observation.get("text") or "")]
    for _key, value in sorted((observation.get("fields") or {}).items()):
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list | dict):
            parts.append(json.dumps(value, ensure_ascii=False))
    return "\n".join(parts)


def _tool_of(observation: Any) -> str | None:
    if isinstance(observation, dict):
        return observation.get("tool")
    return getattr(observation, "tool", None)


def _snippet(text: str, value: str, width: int = 200) -> str:
    for line in text.splitlines():
        if contains_value(line, value):
            return line.strip()[:width]
    return value


class TeacherBackend:
    """Scripted offline backend for decompose / planner / critic / finalizer (and trivial judge / summarizer)."""

    def __init__(self, noise: float | dict[str, float] | None = 0.0, seed: int = 0, model: str = "scripted-teacher",
                 explicit_query: bool = False, habits: float | dict[str, float] | None = None,
                 habit_rate: float = 0.6):
        self.noise = normalise_noise(noise)
        self.habits = normalise_habits(habits)
        if not 0.0 <= float(habit_rate) <= 1.0:
            raise ValueError(f"teacher habit_rate={habit_rate} is not a probability in [0, 1]")
        self.habit_rate = float(habit_rate)
        self.seed = int(seed)
        self.model = model
        # Ledger mode: by default the teacher writes the short form {"action", "need"} whenever its query is the
        # one the tool layer composes anyway (the need's query_focus with upstream values) and its tool the one the
        # loop defaults to (the first of the need's sources still to try), and a query or tool only when it
        # deviates (noise, habits). A tiny CPU planner learns that form in minutes; copying free text it does not
        # (docs/research/short-form-testbed.md). `explicit_query=True` writes tool and query, as a strong LLM would.
        self.explicit_query = bool(explicit_query)

    # -- plumbing ------------------------------------------------------------------------------------------------

    async def chat(self, request: ChatRequest) -> ChatResponse:
        handler = getattr(self, f"_{request.role}", None)
        if handler is None:
            raise BackendError(f"the scripted teacher has no role {request.role!r}")
        ctx = request.context or {}
        task = ctx.get("task")
        if isinstance(task, dict):
            task = Task.model_validate(task)
        if not isinstance(task, Task):
            raise BackendError(f"the scripted teacher needs context['task'] for role {request.role!r}")
        text = handler(task, ctx)
        prompt = sum(estimate_tokens(str(m.get("content", ""))) for m in request.messages)
        return ChatResponse(text=text, usage=Usage(prompt_tokens=prompt, completion_tokens=estimate_tokens(text)),
                            model=self.model)

    def draw(self, task: Task, ctx: dict[str, Any], step: int, role: str, knob: str) -> bool:
        """A deterministic Bernoulli(noise[knob]) draw from (seed, task, sample, step, role, knob)."""
        p = self.noise[knob]
        if p <= 0.0:
            return False
        key = f"{self.seed}|{task.id}|{ctx.get('sample', 0)}|{ctx.get('run_id', '')}|{step}|{role}|{knob}"
        u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
        return u < p

    def _u(self, key: str) -> float:
        return int.from_bytes(hashlib.sha256(f"{self.seed}|{key}".encode()).digest()[:8], "big") / 2**64

    def habit_on(self, task: Task, ctx: dict[str, Any], habit: str) -> bool:
        """Whether `habit` is switched on for this run: one draw per (seed, task, sample, habit)."""
        p = self.habits[habit]
        return p > 0.0 and self._u(f"{task.id}|{ctx.get('sample', 0)}|habit|{habit}") < p

    def habit_fires(self, task: Task, ctx: dict[str, Any], step: int, habit: str) -> bool:
        """The habit is on for the run and fires at this step (probability `habit_rate`)."""
        return self.habit_on(task, ctx, habit) and self._u(
            f"{task.id}|{ctx.get('sample', 0)}|{ctx.get('run_id', '')}|{step}|fire|{habit}") < self.habit_rate

    def _pick(self, task: Task, ctx: dict[str, Any], step: int, salt: str, options: list[str]) -> str:
        key = f"{self.seed}|{task.id}|{ctx.get('sample', 0)}|{ctx.get('run_id', '')}|{step}|{salt}"
        return options[int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % len(options)]

    @staticmethod
    def _ledger(ctx: dict[str, Any]) -> Ledger | None:
        ledger = ctx.get("ledger")
        if isinstance(ledger, dict):
            return Ledger.model_validate(ledger)
        if isinstance(ledger, str):
            return Ledger.model_validate_json(ledger)
        return ledger

    # -- roles ---------------------------------------------------------------------------------------------------

    def _decompose(self, task: Task, ctx: dict[str, Any]) -> str:
        if task.gold is None:  # no gold: one web need for the whole question
            out = DecomposeOutput(needs=[NeedSpec(description=task.question, query_focus=task.question)])
            return out.model_dump_json()
        assets = {a.id for a in task.assets}
        needs = [NeedSpec(description=g.description, role=g.role, query_focus=g.query_focus,
                          preferred_source=g.preferred_source, depends_on=list(g.depends_on),
                          alt_sources=list(g.alt_sources), asset_id=g.asset_id if g.asset_id in assets else None)
                 for g in task.gold.needs]
        slots = [Slot(name=s.name, kind=s.kind, needs=list(s.needs), expression=s.expression)
                 for s in task.gold.slots]
        return DecomposeOutput(needs=needs, slots=slots).model_dump_json(exclude_defaults=True)

    def _planner(self, task: Task, ctx: dict[str, Any]) -> str:
        ledger = self._ledger(ctx)
        if ledger is None:
            return self._history_planner(task, ctx)
        action = self._ledger_decision(task, ctx, ledger)
        # the canonical text: a tool the loop would default to is not written (protocol.actions.short_form), so a
        # habit's departure (a wrong tool, a repeat of an empty source) is the one place a tool name appears
        return render_action(action if self.explicit_query else short_form(ledger, action))

    def _ledger_decision(self, task: Task, ctx: dict[str, Any], ledger: Ledger) -> CallAction | FinishAction:
        step = ledger.step
        rule = rule_action(ledger, explicit_query=True)  # the one rule decision; habits and noise go on top
        habit = self._habit_action(task, ctx, ledger, rule)
        if habit is not None:
            return habit
        if isinstance(rule, FinishAction):
            return rule
        if rule.slot is not None:  # a slot to compute: the short form, the tool layer writes the code
            return rule if self.explicit_query else rule.model_copy(update={"query": None})
        if self.draw(task, ctx, step, "planner", "premature_finish"):
            return FinishAction()
        invalid = [n.index for n in ledger.needs if n.status == "filled" or n.index in blocked_need_indices(ledger)]
        if invalid and self.draw(task, ctx, step, "planner", "invalid_target"):
            j = int(self._pick(task, ctx, step, "invalid_target", [str(k) for k in invalid]))
            return CallAction(need=j, tool=SOURCE_TOOL[ledger.needs[j].preferred_source])
        i, tool, query = rule.need, rule.tool, rule.query
        if self.draw(task, ctx, step, "planner", "wrong_tool"):
            tool = self._pick(task, ctx, step, "tool", [t for t in TOOL_NAMES if t != tool and t != "page_reader"])
        if self.draw(task, ctx, step, "planner", "vague_query"):
            query = task.question
        if query == rule.query and not self.explicit_query:
            return CallAction(need=i, tool=tool)
        return CallAction(need=i, tool=tool, query=query)

    def _habit_action(self, task: Task, ctx: dict[str, Any], ledger: Ledger,
                      rule: CallAction | FinishAction) -> CallAction | FinishAction | None:
        """The decision a firing habit makes instead of the rule's, or None (see the module docstring)."""
        step = ledger.step
        actionable = actionable_need_indices(ledger)
        supplementary = [i for i in actionable if ledger.needs[i].role != "blocking"]
        budget_left = not tool_budget_spent(ledger)
        if isinstance(rule, FinishAction):
            if (ready(ledger) and supplementary and budget_left
                    and self.habit_fires(task, ctx, step, "supplementary_first")):
                j = supplementary[0]
                return CallAction(need=j, tool=SOURCE_TOOL[ledger.needs[j].preferred_source])
            return None
        if rule.slot is not None:  # a computation to verify: finishing skips it
            return FinishAction() if self.habit_fires(task, ctx, step, "early_finish") else None
        need = ledger.needs[rule.need]  # type: ignore[index]
        if (any(c.need == need.index and not c.resolved for c in ledger.conflicts)
                and self.habit_fires(task, ctx, step, "settle_first_value")):
            return FinishAction()
        if need.tried and rule.tool != need.tried[-1] and self.habit_fires(task, ctx, step, "retry_empty_source"):
            return CallAction(need=need.index, tool=need.tried[-1])
        if (need.role == "blocking" and supplementary and budget_left
                and self.habit_fires(task, ctx, step, "supplementary_first")):
            j = supplementary[0]
            return CallAction(need=j, tool=SOURCE_TOOL[ledger.needs[j].preferred_source])
        if (any(n.status == "filled" for n in ledger.needs) and unmet_blocking(ledger)
                and self.habit_fires(task, ctx, step, "early_finish")):
            return FinishAction()
        return None

    def _history_planner(self, task: Task, ctx: dict[str, Any]) -> str:
        """react / memory modes: no ledger; track the gold chain through the history's observations."""
        history = ctx.get("history") or []
        found, tries = self._memory(task, ctx)
        step = sum(tries.values()) + len(history)
        gold = task.gold.needs if task.gold else []
        for i, g in enumerate(gold):
            if g.role != "blocking" or i in found:
                continue
            if not all(d in found for d in g.depends_on) or tries.get(i, 0) >= 3:
                break  # the chain is stuck: nothing else can advance
            query = g.query_focus
            for d in g.depends_on:
                query = query.replace("{#%d}" % d, found[d])
            # the next of the need's sources after each try that came back without the value
            sources = [g.preferred_source, *g.alt_sources]
            tool = SOURCE_TOOL[sources[min(tries.get(i, 0), len(sources) - 1)]]
            if self.draw(task, ctx, step, "planner", "wrong_tool"):
                tool = self._pick(task, ctx, step, "tool", [t for t in TOOL_NAMES if t != tool and t != "page_reader"])
            if self.draw(task, ctx, step, "planner", "vague_query"):
                query = task.question
            return render_action(CallAction(need=i, tool=tool, query=query))
        return render_action(FinishAction())

    def _memory(self, task: Task, ctx: dict[str, Any]) -> tuple[dict[int, str], dict[int, int]]:
        """What the history holds: found values and tries per gold need, from the summary (memory mode) and the
        entries since it."""
        found: dict[int, str] = {}
        tries: dict[int, int] = {}
        summary = str(ctx.get("summary") or "")
        for i, value in re.findall(r'need (\d+) = "([^"]*)"', summary):
            found[int(i)] = value
        for i, n in re.findall(r"need (\d+) tried (\d+)", summary):
            tries[int(i)] = int(n)
        return self._found_in_history(task, ctx.get("history") or [], found, tries)

    @staticmethod
    def _found_in_history(task: Task, history: list[dict], found: dict[int, str] | None = None,
                          tries: dict[int, int] | None = None) -> tuple[dict[int, str], dict[int, int]]:
        found = dict(found or {})
        tries = dict(tries or {})
        gold = task.gold.needs if task.gold else []
        for entry in history:
            action = entry.get("action") or {}
            i = action.get("need")
            if not isinstance(i, int) or not 0 <= i < len(gold):
                continue
            tries[i] = tries.get(i, 0) + 1
            text = _evidence_text(entry.get("observation"))
            value = gold[i].value
            if gold[i].preferred_source == "code":
                value = (text.strip().splitlines() or [None])[-1] if text.strip() else None
            if value and contains_value(text, value):
                found[i] = value
        return found, tries

    def _critic(self, task: Task, ctx: dict[str, Any]) -> str:
        ledger = self._ledger(ctx)
        action, observation = ctx.get("action"), ctx.get("observation")
        i = action.get("need") if isinstance(action, dict) else getattr(action, "need", None)
        slot = action.get("slot") if isinstance(action, dict) else getattr(action, "slot", None)
        if ledger is not None and slot is not None:
            return self._slot_critic(ledger, slot, observation)
        gold = task.gold.needs if task.gold else []
        if ledger is None or not isinstance(i, int) or not 0 <= i < min(len(gold), len(ledger.needs)):
            return CriticOutput().model_dump_json()
        g, need = gold[i], ledger.needs[i]
        text = _evidence_text(observation)
        ok = observation.get("ok", True) if isinstance(observation, dict) else getattr(observation, "ok", True)
        step = ledger.step
        verdicts: list[NeedVerdict] = []
        evidence: list[EvidenceClaim] = []
        raised = any(c.need == i for c in ledger.conflicts)
        open_conflict = any(c.need == i and not c.resolved for c in ledger.conflicts)
        tool = _tool_of(observation)
        if ok and g.preferred_source == "code" and g.fillable and _tool_of(observation) == "code_executor":
            value = self._code_output(observation)
            if value is not None:
                verdicts.append(NeedVerdict(need=i, verdict="supports", status="filled", value=value))
                evidence.append(EvidenceClaim(claim=f"the computation printed {value}", supports=[i]))
        elif ok and g.conflicting_value and contains_value(text, g.conflicting_value) and not raised:
            if self.draw(task, ctx, step, "critic", "missed_conflict"):  # trusts the wrong source
                verdicts.append(NeedVerdict(need=i, verdict="supports", status="filled", value=g.conflicting_value))
                evidence.append(EvidenceClaim(claim=_snippet(text, g.conflicting_value), supports=[i]))
            else:
                if contains_value(text, g.value):
                    verdicts.append(NeedVerdict(need=i, verdict="supports", status="partial", value=g.value))
                    evidence.append(EvidenceClaim(claim=_snippet(text, g.value or ""), supports=[i]))
                verdicts.append(NeedVerdict(need=i, verdict="conflicts", status="partial", value=g.conflicting_value,
                                            revised_query_focus=g.confirm_query_focus))
        elif open_conflict and g.resolved_by is not None and tool != SOURCE_TOOL[g.resolved_by]:
            # the dispute needs an independent source: the same kind of evidence again settles nothing
            verdicts.append(NeedVerdict(need=i, verdict="omits"))
        elif ok and g.value and contains_value(text, g.value):
            verdicts.append(NeedVerdict(need=i, verdict="supports", status="filled", value=g.value))
            evidence.append(EvidenceClaim(claim=_snippet(text, g.value), supports=[i]))
        else:
            status = "unfillable" if (not g.fillable and need.attempts + 1 >= ledger.max_attempts) else None
            verdicts.append(NeedVerdict(need=i, verdict="omits", status=status))
        slots = self._slot_verdicts(ledger, verdicts)
        return CriticOutput(verdicts=verdicts, evidence=evidence, slots=slots).model_dump_json(exclude_defaults=True)

    def _slot_critic(self, ledger: Ledger, name: str, observation: Any) -> str:
        """A call on a slot: the code's last printed line verifies it (nothing printed: no verdict)."""
        value = self._code_output(observation) if _tool_of(observation) == "code_executor" else None
        if value is None or ledger.slot(name) is None:
            return CriticOutput().model_dump_json()
        return CriticOutput(slots=[SlotVerdict(slot=name, value=value, verified=True)]).model_dump_json(
            exclude_defaults=True)

    @staticmethod
    def _code_output(observation: Any) -> str | None:
        if observation is None:
            return None
        obs = observation.model_dump() if hasattr(observation, "model_dump") else dict(observation)
        fields = obs.get("fields") or {}
        if obs.get("ok") is False or fields.get("exit_status", 0) not in (0, None):
            return None
        out = fields.get("stdout") if isinstance(fields.get("stdout"), str) else obs.get("text") or ""
        lines = [ln.strip() for ln in out.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else None

    @staticmethod
    def _slot_verdicts(ledger: Ledger, verdicts: list[NeedVerdict]) -> list[SlotVerdict]:
        values = {n.index: n.value for n in ledger.needs if n.status == "filled"}
        for v in verdicts:
            if v.status == "filled":
                values[v.need] = v.value
            elif v.status is not None or v.verdict == "conflicts":
                values.pop(v.need, None)
        out = []
        for slot in ledger.slots:
            if slot.verified or not slot.needs or not all(values.get(n) for n in slot.needs):
                continue
            if slot.kind == "computation" and slot.expression and not all(
                    ledger.needs[n].preferred_source == "code" for n in slot.needs if 0 <= n < len(ledger.needs)):
                continue  # computed by a call on the slot itself (code_executor), not by restating its inputs
            out.append(SlotVerdict(slot=slot.name, value=", ".join(str(values[n]) for n in slot.needs), verified=True))
        return out

    def _finalizer(self, task: Task, ctx: dict[str, Any]) -> str:
        ledger = self._ledger(ctx)
        if ledger is None:
            found, _ = self._memory(task, ctx)
            value = self._draft_from_values(task, found, compute=True)
            out = FinalizerOutput(answer=self._format(task, value), check="pass" if value is not None else "fail",
                                  diagnosis=None if value else "the history does not hold the answer")
            return out.model_dump_json(exclude_none=True)
        slot = ledger.slot("answer")
        value = slot.value if slot is not None and slot.value else None
        if value is None:
            filled = {n.index: n.value for n in ledger.needs if n.status == "filled" and n.value}
            disputed = {c.need for c in ledger.conflicts if not c.resolved}
            # a value under an open dispute is a guess between two sources: the teacher does not draft from it
            # (its critic files the gold value first, so drafting from it would leak the gold answer)
            value = self._draft_from_values(task, filled) or next(
                (n.value for n in reversed(ledger.needs)
                 if n.role == "blocking" and n.value and n.index not in disputed), None)
        if ready(ledger):
            return FinalizerOutput(answer=self._format(task, value), check="pass").model_dump_json(exclude_none=True)
        problems = []
        if unmet_blocking(ledger):
            problems.append(f"blocking needs not filled: {unmet_blocking(ledger)}")
        if any(not s.verified for s in ledger.slots):
            problems.append(f"unverified slots: {[s.name for s in ledger.slots if not s.verified]}")
        if unresolved_conflicts(ledger):
            problems.append(f"unresolved conflicts: {unresolved_conflicts(ledger)}")
        return FinalizerOutput(answer=self._format(task, value), check="fail",
                               diagnosis="; ".join(problems) or "the ledger is not ready").model_dump_json(
                                   exclude_none=True)

    @staticmethod
    def _draft_from_values(task: Task, values: dict[int, str], compute: bool = False) -> str | None:
        """The answer slot's value from its needs' values. `compute` (react/memory modes, which have no slot to
        call): a computation slot without a code need is computed here, as the history's finalizer would; in ledger
        mode only a call on the slot computes it."""
        if task.gold is None:
            return None
        slot = next((s for s in task.gold.slots if s.name == "answer"), None)
        if slot is None or not slot.needs or not all(values.get(n) for n in slot.needs):
            return None
        code_need = any(task.gold.needs[n].preferred_source == "code" for n in slot.needs)
        if compute and slot.kind == "computation" and slot.expression and not code_need:
            try:  # the gold's own arithmetic over numbers found in the history
                env = {f"n{n}": int(values[n].replace(",", "")) for n in slot.needs}
                return str(eval(slot.expression, {"__builtins__": {}, "abs": abs, "max": max}, env))
            except (ValueError, SyntaxError, NameError):
                return None
        return ", ".join(values[n] for n in slot.needs)

    @staticmethod
    def _format(task: Task, value: str | None) -> str:
        if value is None:
            return "insufficient evidence"
        if task.answer_type == "mcq" and task.options:
            for opt in task.options:
                letter, _, text = opt.partition(". ")
                if text.strip().lower() == value.strip().lower():
                    return letter.strip()
        return value

    def _judge(self, task: Task, ctx: dict[str, Any]) -> str:
        prediction = str(ctx.get("prediction") or "")
        gold = task.answer or ""
        same = " ".join(prediction.lower().split()) == " ".join(gold.lower().split()) and bool(gold)
        return "Correct" if same else "Incorrect"

    def _summarizer(self, task: Task, ctx: dict[str, Any]) -> str:
        """A summary that keeps what was found and what was tried (the memory-mode planner reads it back)."""
        found, tries = self._memory(task, ctx)
        facts = "; ".join(f'need {i} = "{v}"' for i, v in sorted(found.items())) or "nothing found yet"
        tried = "; ".join(f"need {i} tried {n}" for i, n in sorted(tries.items()))
        return f"Summary of the evidence so far: {facts}." + (f" Attempts: {tried}." if tried else "")


def teacher_problem(spec: BackendSpec) -> str | None:
    """Why `TeacherBackend(**spec.options)` (backend kind `teacher`) would refuse the spec's options, or None: an
    option it does not take (a typo: the constructor's TypeError, named here with the known ones) or a value it
    refuses (a noise knob or habit it does not know, a probability outside [0, 1]). The constructor is cheap and
    starts nothing, so the check is the constructor itself: what the run builds is what is checked."""
    known = [name for name in inspect.signature(TeacherBackend).parameters]
    unknown = sorted(set(spec.options) - set(known))
    if unknown:
        return f"backend kind 'teacher': unknown options {unknown} (known: {known})"
    try:
        TeacherBackend(**spec.options)
    except (TypeError, ValueError) as exc:
        return f"backend kind 'teacher': options: {exc}"
    return None
