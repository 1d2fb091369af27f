r"""Cost per question from a price table over every call a run made: the report's `cost` (by call kind).

    python -m omnidecision.eval.report runs/eval/trajectories.jsonl --out runs/eval \
        --prices configs/prices/default.yaml

A price table is a YAML file (`configs/prices/default.yaml`; an eval recipe points at one with `prices: PATH`):

    currency: USD
    source: where the prices come from, and when
    models:                 # by the model name the endpoint reported (exact, or without a -YYYY-MM-DD date)
      gpt-4.1-mini: {per_1k_prompt: 0.0004, per_1k_completion: 0.0016}
    kinds:                  # by call kind, for calls whose model is not listed above
      web_search: {per_call: 0.0}
      perception: {per_second: 0.0001}   # every perception tool without a price of its own

A price has any of `per_call`, `per_1k_prompt`, `per_1k_completion`, `per_second` (seconds of media a perception
call looked at); the cost of a call is their sum. Call kinds (`CALL_KINDS`): the LLM roles `planner` (one call per
planner step; react/memory's planner too), `decompose`, `critic`, `finalizer`, `summarizer`, the LLM `judge` (on the
answer and on an abstaining run's draft), and each tool by name (`web_search`, `page_reader`, `code_executor`, the
perception tools, which fall back to the kind `perception`, and a tool of your own, registered by a plugin:
`check_call_kind`). What each call's record holds:

- role calls: token usage and the reported model (`RoleCall`); a call that got no reply (error, no usage) is not
  counted; planner steps: `StepRecord.usage` and `RunRecord.planner_model`;
- judge calls: `JudgeResult.usage` / `model` (records written before they were kept count as calls with
  unknown tokens; the judge's model then is the recipe's `judge.llm.model`);
- tool calls: counted from `totals.tool_calls` (as the report's `tool_calls_per_question`); a perception call's
  observation carries the model's token usage and model, its time span or asset (seconds); an observation served from
  the perception cache (`fields.cached`) made no request and costs nothing.

A kind with calls but no price is listed in `unpriced` (its calls are not costed: never a silent zero); a priced
call whose record lacks what its price needs (tokens, seconds) is counted in that kind's `missing` and left out of
the sum, and the kind is listed in `incomplete`. `per_question` is the sum of the costed calls over the runs; it is
`complete` only when nothing is unpriced or incomplete. A table that does not parse raises `PriceTableError` naming
the file and the field.

    >>> table = PriceTable.model_validate({"kinds": {"web_search": {"per_call": 0.01}}})
    >>> table.price_for("web_search", "")
    (Price(per_call=0.01, per_1k_prompt=None, per_1k_completion=None, per_second=None), 'kind web_search')
    >>> table.price_for("critic", "gpt-4.1-mini-2025-04-14") is None
    True
    >>> table = PriceTable.model_validate({"models": {"gpt-4.1-mini": {"per_1k_prompt": 0.0004}}})
    >>> table.price_for("critic", "gpt-4.1-mini-2025-04-14")[1], table.price_for("critic", "gpt-4.1") is None
    ('model gpt-4.1-mini', True)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from omnidecision.ledger.schema import PERCEPTION_TOOLS, Ledger
from omnidecision.preflight import Check
from omnidecision.protocol.actions import tool_names
from omnidecision.protocol.chat import Usage
from omnidecision.rollout.recipe import EvalRecipe, read_yaml_model

CallKind = Literal["planner", "decompose", "critic", "finalizer", "summarizer", "judge", "perception",
                   "subtitle_grounding", "audio_scouting", "clip_grounding", "frame_confirmation", "web_search",
                   "page_reader", "code_executor"]
CALL_KINDS: tuple[str, ...] = get_args(CallKind)  # the built-in kinds; a registered tool of one's own is a kind too
ROLE_KINDS = ("planner", "decompose", "critic", "finalizer", "summarizer", "judge")
LLM_JUDGE_METHODS = ("llm_judge", "llm_judge_failed")
SNAPSHOT_DATE = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def check_call_kind(kind: str) -> str:
    """`kind` if a price table may price it: a built-in call kind (`CALL_KINDS`), or a tool registered by a plugin
    (`protocol.actions.tool_names`), so that the calls to a tool of one's own are costed, not left unpriced.

    >>> check_call_kind("web_search"), check_call_kind("perception")
    ('web_search', 'perception')
    >>> check_call_kind("web_serch")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown call kind 'web_serch'; expected one of planner, decompose, ..., code_executor (a tool of ...
    """
    if kind in CALL_KINDS or kind in tool_names():
        return kind
    kinds = ", ".join(dict.fromkeys(CALL_KINDS + tool_names()))
    raise ValueError(f"unknown call kind {kind!r}; expected one of {kinds} (a tool of your own is a kind once its "
                     "plugin is registered: docs/guide/own-tasks.md)")


class PriceTableError(ValueError):
    """A price table that cannot be used; the message names the file and the field."""


class Price(BaseModel):
    """What one call costs: the sum of the parts that are set (at least one must be)."""

    model_config = ConfigDict(extra="forbid")

    per_call: float | None = Field(None, ge=0, description="per request")
    per_1k_prompt: float | None = Field(None, ge=0, description="per 1000 prompt tokens")
    per_1k_completion: float | None = Field(None, ge=0, description="per 1000 completion tokens")
    per_second: float | None = Field(None, ge=0, description="per second of media a perception call looked at")

    @model_validator(mode="after")
    def _some_part(self) -> Price:
        if all(v is None for v in self.model_dump().values()):
            raise ValueError("a price needs per_call, per_1k_prompt, per_1k_completion or per_second")
        return self

    def cost(self, usage: Usage | None, seconds: float | None) -> float | None:
        """The cost of one call, or None when it needs token usage or seconds the record lacks."""
        total = self.per_call or 0.0
        if self.per_1k_prompt is not None or self.per_1k_completion is not None:
            if usage is None:
                return None
            total += (self.per_1k_prompt or 0.0) * usage.prompt_tokens / 1000
            total += (self.per_1k_completion or 0.0) * usage.completion_tokens / 1000
        if self.per_second is not None:
            if seconds is None:
                return None
            total += self.per_second * seconds
        return total


class PriceTable(BaseModel):
    """Prices by model name (LLM calls) and by call kind (every call)."""

    model_config = ConfigDict(extra="forbid")

    currency: str = Field("USD", description="the unit of every price")
    source: str = Field("", description="where the prices come from, and when")
    models: dict[str, Price] = Field(default_factory=dict, description="by reported model name (or its prefix)")
    kinds: dict[Annotated[str, AfterValidator(check_call_kind)], Price] = Field(
        default_factory=dict, description=f"by call kind: {', '.join(CALL_KINDS)}, or a tool of your own (registered)")
    _path: str | None = PrivateAttr(None)  # the file it was read from (`load_prices`): the report names it

    @property
    def path(self) -> str | None:
        return self._path

    def price_for(self, kind: str, model: str) -> tuple[Price, str] | None:
        """The price of a call of `kind` by `model` and where it came from: the model's (its exact name, else the
        name without a trailing -YYYY-MM-DD snapshot date, as OpenAI reports `gpt-4.1-mini-2025-04-14`), else the
        kind's, else (perception tools) the kind `perception`'s."""
        for name in dict.fromkeys((model, SNAPSHOT_DATE.sub("", model))) if model else ():
            if name in self.models:
                return self.models[name], f"model {name}"
        for k in (kind, "perception") if kind in PERCEPTION_TOOLS else (kind,):
            if k in self.kinds:
                return self.kinds[k], f"kind {k}"
        return None


def load_prices(path: str | Path) -> PriceTable:
    """Read a price table; errors name the file and the field."""
    p = Path(path)
    table = read_yaml_model(p, "the price table", PriceTable, PriceTableError,
                            "a price table is a mapping (currency:, models:, kinds:)", _field_errors)
    table._path = str(path)
    return table


def _field_errors(exc: ValidationError) -> list[str]:
    return [f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()[:5]]


# ---------------------------------------------------------------- the calls of a run


@dataclass
class Call:
    """One billable call: its kind, the model that answered (if an LLM), its tokens and media seconds (None: the
    record does not say), and whether the perception cache answered it (no request made)."""

    kind: str
    model: str = ""
    usage: Usage | None = None
    seconds: float | None = None
    cached: bool = False


def _billed(call: Any) -> bool:
    """A role call that got a reply (a call that failed before any reply carries an error and nothing else)."""
    return not (call.error and not call.raw and not call.usage.prompt_tokens and not call.usage.completion_tokens)


def _seconds(obs: dict[str, Any], state: Ledger | None) -> float | None:
    src = obs.get("source") or {}
    if src.get("start") is not None and src.get("end") is not None:
        return max(0.0, float(src["end"]) - float(src["start"]))
    asset_id = (obs.get("fields") or {}).get("asset_id") or src.get("asset_id")
    assets = state.context.assets if state is not None and state.context is not None else []
    asset = next((a for a in assets if a.id == asset_id), None)
    return asset.duration if asset is not None else None


def _tool_call(tool: str, obs: dict[str, Any] | None, state: Ledger | None) -> Call:
    if obs is None:
        return Call(tool)
    fields = obs.get("fields") or {}
    usage = Usage.model_validate(fields["usage"]) if isinstance(fields.get("usage"), dict) else None
    return Call(tool, model=str(fields.get("model") or ""), usage=usage, seconds=_seconds(obs, state),
                cached=bool(fields.get("cached")))


def run_calls(r: Any, judge_model: str = "") -> list[Call]:
    """Every call one RunRecord records (module docstring)."""
    calls = [Call("planner", r.planner_model, step.usage) for step in r.steps]
    roles = [*([r.decompose] if r.decompose else []), *(c for s in r.steps for c in s.calls), *r.final_calls]
    calls += [Call(c.role, c.model, c.usage) for c in roles if _billed(c)]
    for j in (r.judge, r.draft_judge):
        if j is None or j.method not in LLM_JUDGE_METHODS:
            continue
        usage, model = j.usage, j.model or judge_model
        if usage is not None or j.method == "llm_judge":  # a failed call without a reply is not billed
            calls.append(Call("judge", model, usage))
    observed: dict[str, list[dict[str, Any]]] = {}
    for step in r.steps:
        if step.observation and step.observation.get("tool"):
            observed.setdefault(step.observation["tool"], []).append(step.observation)
    for tool in sorted(set(r.totals.tool_calls) | set(observed)):
        seen = observed.get(tool, [])
        n = max(r.totals.tool_calls.get(tool, 0), len(seen))
        calls += [_tool_call(tool, seen[k] if k < len(seen) else None, r.final_ledger) for k in range(n)]
    return calls


def cost_table(records: Iterable[Any], table: PriceTable | None = None, *, judge_model: str = "",
               table_path: str | None = None) -> dict[str, Any]:
    """The report's `cost` dict: per call kind the calls, tokens, price source, cost and what is missing."""
    rs = list(records)
    n = len(rs)
    kinds: dict[str, dict[str, Any]] = {}
    for r in rs:
        for call in run_calls(r, judge_model):
            k = kinds.setdefault(call.kind, {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                             "priced": 0, "missing": 0, "unpriced": 0, "cost": 0.0,
                                             "price_from": set()})
            k["calls"] += 1
            if call.cached:  # answered from the cache: no request, no tokens spent
                k["cached"] += 1
                continue
            if call.usage is not None:
                k["prompt_tokens"] += call.usage.prompt_tokens
                k["completion_tokens"] += call.usage.completion_tokens
            found = table.price_for(call.kind, call.model) if table is not None else None
            if found is None:
                k["unpriced"] += 1
                continue
            price, where = found
            k["price_from"].add(where)
            cost = price.cost(call.usage, call.seconds)
            if cost is None:
                k["missing"] += 1
            else:
                k["priced"] += 1
                k["cost"] += cost
    by_kind = {}
    for kind in sorted(kinds, key=lambda x: (CALL_KINDS.index(x) if x in CALL_KINDS else len(CALL_KINDS), x)):
        k = kinds[kind]
        costed = bool(k["price_from"]) or k["calls"] == k["cached"]  # some call found a price (or none was made)
        by_kind[kind] = {**{key: k[key] for key in ("calls", "cached", "prompt_tokens", "completion_tokens",
                                                    "priced", "missing", "unpriced")},
                         "calls_per_question": k["calls"] / n if n else None,
                         "price_from": sorted(k["price_from"]),
                         "cost": k["cost"] if costed else None,
                         "cost_per_question": k["cost"] / n if costed and n else None}
    unpriced = [kind for kind, k in by_kind.items() if k["unpriced"]]
    incomplete = [kind for kind, k in by_kind.items() if k["missing"]]
    total = sum(k["cost"] or 0.0 for k in by_kind.values())
    any_costed = any(k["cost"] is not None for k in by_kind.values())
    if table_path is None and table is not None:
        table_path = table.path  # the file it was read from
    return {"table": table_path, "currency": table.currency if table is not None else None,
            "source": table.source if table is not None else None,
            "per_question": total / n if n and any_costed else None,
            "complete": table is not None and not unpriced and not incomplete,
            "unpriced": unpriced, "incomplete": incomplete, "by_kind": by_kind}


def cost_lines(cost: dict[str, Any] | None) -> list[str]:
    """report.md's cost section: one row per call kind; unpriced and incomplete kinds said in words."""
    if not cost or not cost.get("by_kind"):
        return []
    cur = cost.get("currency") or ""

    def money(x: float | None) -> str:
        return "unpriced" if x is None else f"{x:.5f} {cur}".strip()

    where = f"price table `{cost['table']}`" if cost.get("table") else "no price table (eval recipe `prices:`)"
    head = ("cost per question " + money(cost["per_question"]) + (" (complete)" if cost["complete"] else
                                                                   " (a lower bound: see below)")
            if cost.get("per_question") is not None else "no call is priced")
    lines = ["", "## Cost per question (by call kind)", "", f"{where}; {head}.", "",
             "| call kind | calls per question | prompt tokens | completion tokens | priced by | cost per question |",
             "|---|---|---|---|---|---|"]
    for kind, k in cost["by_kind"].items():
        per = k["calls_per_question"]
        lines.append(f"| {kind} | {'–' if per is None else f'{per:.2f}'} | {k['prompt_tokens']} | "
                     f"{k['completion_tokens']} | {', '.join(k['price_from']) or '–'} | "
                     f"{money(k['cost_per_question'])}{' (incomplete)' if k['missing'] else ''} |")
    if cost["unpriced"]:
        lines += ["", "Unpriced (no price in the table, not counted): " + ", ".join(
            f"{kind} ({cost['by_kind'][kind]['unpriced']} calls)" for kind in cost["unpriced"])]
    if cost["incomplete"]:
        lines += ["", "Incomplete (priced, but the record lacks the tokens or seconds the price needs; not counted): "
                  + ", ".join(f"{kind} ({cost['by_kind'][kind]['missing']} calls)" for kind in cost["incomplete"])]
    return lines


def price_checks(recipe: EvalRecipe) -> tuple[list[Check], PriceTable | None]:
    """The recipe's price table parses (the report's cost per call kind), or the error names the file and field;
    the check and the table read."""
    if not recipe.prices:
        return [Check(what="prices", status="ok", detail="no price table: the report lists every call kind as "
                                                         "unpriced")], None
    try:
        table = load_prices(recipe.prices)
    except ValueError as exc:  # PriceTableError: the file and field
        return [Check(what="prices", status="error", detail=str(exc))], None
    return [Check(what="prices", status="ok", detail=f"{recipe.prices}: {len(table.models)} model(s), kinds "
                                                     f"{', '.join(table.kinds)}")], table
