"""The structured outputs of the four roles, their JSON schemas, and tolerant parsing.

Planner action shape (field order matters for small models: action, need, tool, query):
    {"action": "call", "need": 1, "tool": "web_search", "query": "birth year of Ada Lovelace"}
    {"action": "call", "slot": "answer"}      # a slot whose needs are filled: code_executor computes it
    {"action": "finish"}
`tool` defaults to the first of the need's `sources=[…]` (its listed sources not tried yet) and `query` to the
need's `query_focus` with the filled upstream values substituted, so a tiny planner may emit
`{"action": "call", "need": 1}`.

Parsing never raises: `parse_planner_output(text)` returns `(action, None)` or `(None, error message)`;
`parse_role_output(role, text)` parses any role's reply against its schema, `role_schema(role)` is the schema a
backend is asked for.

    >>> parse_planner_output('{"action": "call", "need": 2}')[0].need
    2
    >>> parse_planner_output('nonsense')[1]
    'no JSON object found in the output'
    >>> parse_planner_output('{"action": "call", "arguments": {}')[1]
    'unterminated JSON object: the output ends inside it (cut off at max_tokens?)'
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from omnidecision.ledger.events import NeedSpec
from omnidecision.ledger.readiness import SLOT_TOOL, sources_to_try

# The built-in tool names are defined once, in ledger.schema (re-exported here for the action schema's users).
from omnidecision.ledger.schema import TOOL_NAMES, Ledger, NeedRole, NeedStatus, Slot
from omnidecision.protocol.registry import PLUGINS_ENV, PLUGINS_GROUP, load_plugins

# The argument a planner's free-text `query` goes into, per tool (the tools registry and the closure checks use it);
# any other tool, a user's own included, takes it as `query`.
PRIMARY_FIELD: dict[str, str] = dict.fromkeys(TOOL_NAMES, "query") | {"code_executor": "code", "page_reader": "url"}

# What a message about an unknown tool says after the registered ones (the tools registry's errors say it too).
HOW_TO_ADD_A_TOOL = (f"; a tool of your own is registered with the tools' @register_tool decorator in a module "
                     f"named in {PLUGINS_ENV} or by an entry point of the group {PLUGINS_GROUP!r} "
                     "(docs/guide/own-tasks.md)")

# The tools registered beyond the built-in ones are in the tools registry, which this layer may not import
# (docs/architecture.md): the tools package hands its registry's view here when it loads (`use_tool_registry`).
# A user's tool is registered by a plugin module, which imports the tools package; so after `load_plugins` the
# view is set wherever a user's tool exists, and until then only the built-in names are known.
_registered_tools: Callable[[], tuple[str, ...]] = tuple


def use_tool_registry(names: Callable[[], tuple[str, ...]]) -> None:
    """Called once by `omnidecision.tools.base`: `names()` gives the tools registered so far (no discovery)."""
    global _registered_tools
    _registered_tools = names


def tool_names() -> tuple[str, ...]:
    """Every tool a planner may name: the built-in ones (`TOOL_NAMES`, in their order), then the tools registered
    from elsewhere: the user's plugin modules (loaded here, `protocol.registry.load_plugins`) and any registered in
    this process (a test's toy tool). The built-in list alone is what prompts, the tiny model's vocabulary and the
    reference show; this one is what a call is checked against.

    >>> tool_names()[:2]
    ('subtitle_grounding', 'audio_scouting')
    """
    load_plugins()
    return TOOL_NAMES + tuple(n for n in _registered_tools() if n not in TOOL_NAMES)


def check_tool_name(name: str) -> str:
    """`name` if a planner may name it, else a ValueError that lists the tools and says how to register one (for a
    recipe's or a command's tool list).

    >>> check_tool_name("web_search")
    'web_search'
    """
    if name in TOOL_NAMES or name in tool_names():
        return name
    raise ValueError(f"unknown tool {name!r}; registered: {', '.join(tool_names())}{HOW_TO_ADD_A_TOOL}")


def _expected(names: tuple[str, ...]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _planner_tool(value: Any) -> str:
    # The built-in names need no lookup (every decision of a run is checked here). Any other name loads the
    # plugins once and is checked against every registered tool. The error is the one a closed Literal gives
    # (`Input should be 'a', ... or 'z'`): the planner reads it back in its digest, and without a tool of one's own
    # its text is what the trained planners saw; how to register a tool is for a person, in `check_tool_name`.
    if isinstance(value, str) and value in TOOL_NAMES:
        return value
    names = tool_names()
    if isinstance(value, str) and value in names:
        return value
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": _expected(names)})


# A tool's name in a call: any registered tool (`tool_names`). Its static JSON schema lists the built-in names, as
# the closed Literal did (the reference); `planner_json_schema` puts the registered ones in at run time.
PlannerTool = Annotated[str, PlainValidator(_planner_tool),
                        WithJsonSchema({"enum": list(TOOL_NAMES), "type": "string"})]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CallAction(_Out):
    """A tool call aimed at one need, or at one slot (`slot`: an unverified slot whose needs are all filled)."""

    action: Literal["call"] = "call"
    need: int | None = Field(None, ge=0, le=10_000)
    slot: str | None = Field(None, min_length=1, max_length=200)
    tool: PlannerTool | None = None
    query: str | None = Field(None, max_length=2000)
    arguments: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_target(self) -> CallAction:
        if (self.need is None) == (self.slot is None):
            raise ValueError("a call names exactly one of `need` or `slot`")
        return self

    def target(self) -> str:
        """"need 3" or "slot answer" (for messages)."""
        return f"need {self.need}" if self.need is not None else f"slot {self.slot}"


class FinishAction(_Out):
    action: Literal["finish"] = "finish"


PlannerAction = Annotated[CallAction | FinishAction, Field(discriminator="action")]
PLANNER_ADAPTER: TypeAdapter[PlannerAction] = TypeAdapter(PlannerAction)


class NeedVerdict(_Out):
    """The critic's judgement of the new observation against one need."""

    need: int
    verdict: Literal["supports", "conflicts", "omits"]
    status: NeedStatus | None = None
    value: str | None = None
    revised_query_focus: str | None = None
    revised_need_role: NeedRole | None = None
    add_depends_on: list[int] = Field(default_factory=list)


class EvidenceClaim(_Out):
    claim: str
    supports: list[int] = Field(default_factory=list)


class SlotVerdict(_Out):
    slot: str
    value: str | None = None
    verified: bool = False


class CriticOutput(_Out):
    verdicts: list[NeedVerdict] = Field(default_factory=list)
    evidence: list[EvidenceClaim] = Field(default_factory=list)
    slots: list[SlotVerdict] = Field(default_factory=list)


class DecomposeOutput(_Out):
    needs: list[NeedSpec] = Field(min_length=1)
    slots: list[Slot] = Field(default_factory=list)


class FinalizerOutput(_Out):
    """A drafted answer and the finalizer's own check of it against the ledger."""

    answer: str
    check: Literal["pass", "fail"]
    diagnosis: str | None = None


def planner_json_schema() -> dict[str, Any]:
    """JSON schema for `response_format` (vLLM/OpenAI structured outputs): a call's `tool` is one of `tool_names()`,
    the built-in tools and those registered from the user's own modules (a grammar-constrained planner can name
    them; without any, the schema is the static one).

    >>> planner_json_schema()["$defs"]["CallAction"]["properties"]["tool"]["anyOf"][0]["enum"][-1]
    'code_executor'
    """
    schema = PLANNER_ADAPTER.json_schema()
    names = tool_names()
    if names != TOOL_NAMES:
        schema = copy.deepcopy(schema)
        schema["$defs"]["CallAction"]["properties"]["tool"]["anyOf"][0]["enum"] = list(names)
    return schema


T = TypeVar("T")


MAX_OUTPUT_CHARS = 100_000


def extract_json_object(text: str) -> str | None:
    """The earliest-starting balanced `{...}` in `text` (models wrap JSON in prose or code fences); None if none.

    One pass with a stack of open-brace positions (linear even for adversarial, deeply nested input).
    String state is tracked from the first brace on, so braces inside JSON strings do not count.
    """
    return _scan_json_object(text)[0]


def _scan_json_object(text: str) -> tuple[str | None, bool]:
    """(the earliest-starting balanced object, whether the text ends inside an object that opened before it).

    The second part tells a cut-off output (max_tokens reached mid-object) from a wrong one: without it, the
    inner `{}` of `{"action": "call", "arguments": {}` would be judged as the decision.
    """
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S)
    first = text.find("{")
    if first == -1:
        return None, False
    opened: list[int] = []
    best: tuple[int, int] | None = None
    in_str = esc = False
    for i in range(first, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            opened.append(i)
        elif ch == "}" and opened:
            start = opened.pop()
            if best is None or start < best[0]:
                best = (start, i)
            if not opened and start == first:
                break  # the earliest possible start has closed: nothing can beat it
    cut = bool(opened) and (best is None or opened[0] < best[0])
    return (None if best is None else text[best[0] : best[1] + 1]), cut


def parse_with(adapter: TypeAdapter[T], text: str) -> tuple[T | None, str | None]:
    """Parse `text` against `adapter`; returns (value, None) or (None, a one-line error). Never raises."""
    if not isinstance(text, str):
        return None, f"expected text, got {type(text).__name__}"
    if len(text) > MAX_OUTPUT_CHARS:
        return None, f"output too long ({len(text)} chars > {MAX_OUTPUT_CHARS})"
    blob, cut = _scan_json_object(text)
    value, error = _parse_blob(adapter, blob)
    # a stray `{` in prose before a valid object is tolerated; an object the text ends inside is named as cut off
    # (its nested `{}` or nothing at all is what a wrong-looking error would otherwise describe)
    if error is not None and cut:
        return None, "unterminated JSON object: the output ends inside it (cut off at max_tokens?)"
    return value, error


def _parse_blob(adapter: TypeAdapter[T], blob: str | None) -> tuple[T | None, str | None]:
    if blob is None:
        return None, "no JSON object found in the output"
    try:
        data = json.loads(blob, strict=False)  # a sampled model can put control characters inside strings
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        return None, f"invalid JSON: {exc}"[:300]
    try:
        return adapter.validate_python(data), None
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first.get("loc", ()))
        return None, f"schema error at {loc or '<root>'}: {first.get('msg', 'invalid')}"[:300]
    except (RecursionError, ValueError, TypeError) as exc:
        return None, f"schema error: {exc}"[:300]


def parse_planner_output(text: str) -> tuple[PlannerAction | None, str | None]:
    return parse_with(PLANNER_ADAPTER, text)


CRITIC_ADAPTER: TypeAdapter[CriticOutput] = TypeAdapter(CriticOutput)
DECOMPOSE_ADAPTER: TypeAdapter[DecomposeOutput] = TypeAdapter(DecomposeOutput)
FINALIZER_ADAPTER: TypeAdapter[FinalizerOutput] = TypeAdapter(FinalizerOutput)


def parse_critic_output(text: str) -> tuple[CriticOutput | None, str | None]:
    return parse_with(CRITIC_ADAPTER, text)


def parse_decompose_output(text: str) -> tuple[DecomposeOutput | None, str | None]:
    return parse_with(DECOMPOSE_ADAPTER, text)


def parse_finalizer_output(text: str) -> tuple[FinalizerOutput | None, str | None]:
    return parse_with(FINALIZER_ADAPTER, text)


# What each role's output must parse as (a role not listed, the summarizer, writes free text)
ROLE_OUTPUTS: dict[str, TypeAdapter[Any]] = {"planner": PLANNER_ADAPTER, "react": PLANNER_ADAPTER,
                                             "decompose": DECOMPOSE_ADAPTER, "critic": CRITIC_ADAPTER,
                                             "finalizer": FINALIZER_ADAPTER}


@cache
def role_schema(role: str) -> dict[str, Any] | None:
    """The JSON schema sent as `response_format` for a role (None: free text)."""
    if role in ("planner", "react"):
        return planner_json_schema()
    adapter = ROLE_OUTPUTS.get(role)
    return adapter.json_schema() if adapter is not None else None


def parse_role_output(role: str, text: str) -> tuple[Any | None, str | None]:
    """A role's output parsed against its schema: (value, None), or (None, a one-line error); free text as is.

    >>> parse_role_output("planner", '{"action": "finish"}')[0].action
    'finish'
    >>> parse_role_output("critic", "no json")
    (None, 'no JSON object found in the output')
    """
    adapter = ROLE_OUTPUTS.get(role)
    return parse_with(adapter, text) if adapter is not None else (text, None)


def render_action(action: CallAction | FinishAction) -> str:
    """The text of an action, every field it sets (`short_form` first for the canonical text SFT trains on)."""
    return action.model_dump_json(exclude_none=True)


def default_tool(state: Ledger, action: CallAction) -> str | None:
    """The tool a call that names none runs (the loop's default): code_executor for a slot; for a need, the first
    of its sources still to try (the digest line's `sources=[…]`); None for a need the ledger does not have."""
    if action.slot is not None:
        return SLOT_TOOL
    need = state.need(action.need) if action.need is not None else None
    return sources_to_try(need)[0] if need is not None else None


def effective_tool(state: Ledger, action: CallAction) -> str | None:
    """The tool the call runs in `state`: the named one, else `default_tool`."""
    return action.tool or default_tool(state, action)


def short_form(state: Ledger, action: CallAction | FinishAction) -> CallAction | FinishAction:
    """`action` without a `tool` that `state` would default to anyway: the canonical decision text of the rule
    planner and the scripted teacher. A tool is written only where the decision departs from the digest line's
    first `sources=[…]` entry (a repeat of a source that came back empty, a wrong tool), so the tiny planner's
    choice at a switch is which need to call, not a copy of a name that its need's wording argues against
    (docs/research/short-form-testbed.md, "The default tool is not written").

    >>> from omnidecision.ledger import Ledger, Need
    >>> need = Need(index=0, description="x", preferred_source="audio", alt_sources=["subtitle"],
    ...             tried=["audio_scouting"])
    >>> led = Ledger(needs=[need])
    >>> render_action(short_form(led, CallAction(need=0, tool="subtitle_grounding")))
    '{"action":"call","need":0}'
    >>> render_action(short_form(led, CallAction(need=0, tool="audio_scouting")))
    '{"action":"call","need":0,"tool":"audio_scouting"}'
    """
    if isinstance(action, CallAction) and action.tool is not None and action.tool == default_tool(state, action):
        return action.model_copy(update={"tool": None})
    return action
