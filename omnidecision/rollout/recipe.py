"""The rollout recipe: a YAML file (configs/collect/*.yaml) parsed into a pydantic model, with CLI overrides.

Overrides come from the command line as `--key.path VALUE` (or `--key.path=VALUE`), the same syntax as TRL's
`--learning_rate 1e-4` for `sft` / `grpo` (`--agent.step_budget 10`, `--backends.planner.temperature 0.7`);
the value is parsed as YAML (numbers, booleans, lists). String values may use `${VAR}` or `${VAR:-default}` to
read the environment (endpoints and model names of API recipes), and `${RECIPE_DIR}` for the recipe's own folder
(defaults relative to the recipe, never a machine path). Every unset variable is named at once, with the field
that needs it. A bad recipe raises `RecipeError` naming the file and the field.

    python -c "from omnidecision.rollout.recipe import load_recipe; \
        print(load_recipe('configs/collect/synthetic-teacher.yaml').model_dump_json(indent=1))"
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import BACKEND_KINDS
from omnidecision.backends.perception import PerceptionSpec
from omnidecision.protocol.actions import HOW_TO_ADD_A_TOOL, tool_names
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.redaction import register_in
from omnidecision.rollout.breaker import BreakerSettings
from omnidecision.rollout.deprecated import aliases
from omnidecision.tasks.formats import TASK_FORMATS
from omnidecision.tools.page_fetch import PageReaderSpec
from omnidecision.tools.search_apis import SearchSpec


def cli_overrides(args: list[str]) -> list[str]:
    """The project's one override syntax, `--a.b 3 --c=x`, as ["a.b=3", "c=x"]; raises ValueError on a stray
    value. A flag with no value is `true`.

    >>> cli_overrides(["--agent.step_budget", "3", "--samples=2"])
    ['agent.step_budget=3', 'samples=2']

    A key's dashes are its underscores (`--step-budget`); a value is kept as written (`--out=runs/my-run`):

    >>> cli_overrides(["--retry-errors=false", "--out=runs/my-run", "--tasks.path", "data/a-b"])
    ['retry_errors=false', 'out=runs/my-run', 'tasks.path=data/a-b']
    """
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--"):
            raise ValueError(f"unexpected argument {a!r} (overrides look like --key.path VALUE)")
        name, eq, value = a[2:].partition("=")
        key = name.replace("-", "_") if "." not in name else name
        if eq:
            out.append(f"{key}={value}")
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.append(f"{key}={args[i + 1]}")
            i += 2
        else:
            out.append(f"{key}=true")
            i += 1
    return out


class RecipeError(ValueError):
    """A recipe that cannot be used; the message names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskSource(_Model):
    """`tasks` of a recipe: which task file or folder, in which format, which task ids."""

    path: str = Field(..., description="task file or folder (jsonl, omnigaia, worldsense, synthetic dir)")
    format: str = Field("auto", description="auto, or a registered task format (tasks.formats.TASK_FORMATS: jsonl, "
                        "synthetic, omnigaia, worldsense)")
    options: dict[str, str] = Field(default_factory=dict, description="loader options (media_dir, srt_dir, …)")
    ids: list[str] | None = Field(None, description="keep only these task ids")
    ids_file: str | None = Field(
        None, description="keep only the task ids of this JSON file (a list, or {ids: [...]}: what `omnidecision "
        "tasks split` writes as fold-i/train_ids.json and fold-i/test_ids.json)")
    levels: list[str] | None = Field(None, description="keep only these difficulty levels")
    categories: list[str] | None = Field(None, description="keep only these categories")
    offset: int = Field(0, ge=0, description="skip the first N tasks (after filters)")
    limit: int | None = Field(None, ge=1, description="keep at most N tasks (after filters, before sharding)")

    @field_validator("format")
    @classmethod
    def _check_format(cls, v: str) -> str:
        if v != "auto":
            TASK_FORMATS[v]  # an unknown name raises, listing the registered formats
        return v


class JudgeSettings(_Model):
    """`judge` of a recipe: how each run's answer is judged against the gold answer."""

    enabled: bool = Field(True, description="judge each run against the task's gold answer")
    llm: BackendSpec | None = Field(None, description="LLM judge endpoint (OmniGAIA protocol); None: offline judges")
    scorer: Literal["gaia", "lenient"] = Field(
        "lenient", description="string scorer before (or without) the LLM judge: gaia = the GAIA benchmark's "
        "official rules (tasks.grading.gaia_scorer); lenient = this project's variant (tasks.grading.lenient_match)")


class Environment(_Model):
    """`environment` of a recipe: which tools exist and what serves them (offline, replay or live)."""

    kind: Literal["offline", "replay", "live"] = Field(
        "offline", description="offline: text surrogates + BM25 over local pages; replay: OmniGAIA replay services; "
        "live: real tools (perception endpoints over the media files, a search API, the page reader)")
    services: dict[str, str] = Field(
        default_factory=dict, description="extra tool services: name -> 'module:factory' (called with options)")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments for the service factories")
    media_root: str | None = Field(
        None, description="folder of the downloaded media (OmniGAIA: images/ audios/ videos/; WorldSense: the "
        "videos and .srt files), handed to the task loader")
    perception: dict[str, PerceptionSpec] = Field(
        default_factory=dict, description="live: tool name (or 'default') -> OpenAI-compatible multimodal endpoint")
    search: SearchSpec | None = Field(None, description="live: the web search API (None: no web search)")
    pages: PageReaderSpec = Field(default_factory=PageReaderSpec, description="live: the page reader's limits")
    tools: list[str] | None = Field(
        None, description="the tools every task allows (None: all; a task's own `tools` wins); shown in the digest")
    blocked_domains: list[str] = Field(
        default_factory=list, description="added to every task's block list (host, or host + path prefix)")

    @field_validator("tools")
    @classmethod
    def _check_tools(cls, v: list[str] | None) -> list[str] | None:
        known = tool_names()  # the built-in tools, then the user's registered ones (own-tasks page)
        unknown = sorted(set(v or []) - set(known))
        if unknown:
            raise ValueError(f"unknown tool(s) {unknown}; known: {', '.join(known)}{HOW_TO_ADD_A_TOOL}")
        return v


class RolloutRecipe(_Model):
    """What every run of the agent over tasks reads (the rollout engine's recipe): the tasks, the backend of each role,
    the agent, samples, concurrency, shard, output folder, judge, environment and breaker. Collect's recipe
    (omnidecision/collect/recipe.py) and eval's (`EvalRecipe`) subclass it."""

    tasks: TaskSource
    backends: dict[str, BackendSpec] = Field(..., description="role -> backend (roles fall back to 'default')")
    agent: AgentConfig = Field(default_factory=AgentConfig)
    samples: int = Field(1, ge=1, description="runs per task (sample k seeds the teacher / is a separate draw)")
    concurrency: int = Field(8, ge=1, description="runs in flight at once")
    shard: str = Field("0/1", description="i/n: this process runs the tasks with stable_hash(id) % n == i")
    out: str = Field("runs/rollouts", description="output folder: trajectories.shard-i-of-n.jsonl, manifest.json")
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    environment: Environment = Field(default_factory=Environment)
    progress: bool = Field(True, description="show a progress bar")
    retry_errors: bool = Field(
        True, description="a restart runs again the runs recorded with outcome `error` (their records move to "
        "errors-superseded*.jsonl); false (`--no-retry-errors`): they count as finished")
    breaker: BreakerSettings = Field(
        default_factory=BreakerSettings, description="endpoint circuit breaker: pause, probe, then stop the "
        "collection naming an endpoint that stays unreachable (rollout/breaker.py)")

    @field_validator("shard")
    @classmethod
    def _check_shard(cls, v: str) -> str:
        parse_shard(v)
        return v

    @field_validator("backends")
    @classmethod
    def _check_backends(cls, v: dict[str, BackendSpec]) -> dict[str, BackendSpec]:
        if not v:
            raise ValueError("at least one backend is needed (e.g. 'default' or 'planner')")
        for spec in v.values():
            BACKEND_KINDS[spec.kind]  # an unknown kind raises, listing the registered ones
        return v

    @property
    def shard_index(self) -> tuple[int, int]:
        return parse_shard(self.shard)


class ServeSpec(BaseModel):
    """Start vLLM for the eval and point roles at it."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(..., description="merged checkpoint (or the base model when serving adapters)")
    loras: dict[str, str] = Field(default_factory=dict, description="adapter name -> folder (--lora-modules)")
    served_name: str | None = Field(None, description="name of the base model on the server (default: folder name)")
    planner_model: str | None = Field(
        None, description="model name the served roles request (default: the only LoRA, else the base name)")
    roles: list[str] = Field(default_factory=lambda: ["planner"], description="roles pointed at the server")
    port: int | None = Field(None, description="port (default: a free one)")
    max_model_len: int | None = Field(4096, description="--max-model-len")
    tensor_parallel_size: int | None = Field(None, ge=1, description="--tensor-parallel-size (GPUs)")
    max_lora_rank: int | None = Field(
        None, ge=1, description="--max-lora-rank (default: the adapters' largest rank, from adapter_config.json)")
    extra_args: list[str] = Field(default_factory=list, description="more vLLM server arguments, verbatim")
    fresh_cache: bool = Field(False, description="a private vLLM compile cache deleted on stop (default: persistent)")
    startup_timeout_s: float = Field(
        900.0, gt=0, description="seconds to wait for /v1/models (900: an 8B cold start from a network file system "
                                 "with CUDA graph capture; = serving.vllm_server.STARTUP_TIMEOUT_S)")

    @property
    def requested_model(self) -> str:
        """The model name the served roles request: `planner_model`, else the only LoRA, else the base's name."""
        if self.planner_model:
            return self.planner_model
        if len(self.loras) == 1:
            return next(iter(self.loras))
        return self.served_name or Path(self.model).name

    def request_name(self) -> str:
        """Deprecated (one release, CHANGELOG.md): `requested_model`, a property like the other derived names."""
        warnings.warn("ServeSpec.request_name() is deprecated, use ServeSpec.requested_model (CHANGELOG.md)",
                      DeprecationWarning, stacklevel=2)
        return self.requested_model


class EvalRecipe(RolloutRecipe):
    """An eval (`omnidecision eval`, `eval.runner.run_eval`): rollouts, optionally with a served model, and a
    report."""

    name: str | None = Field(None, description="label of this eval in reports and comparisons")
    out: str = Field("runs/eval", description="output folder: trajectories.jsonl, report.json, report.md, *.png")
    serve: ServeSpec | None = Field(None, description="start vLLM for the run (see ServeSpec)")
    plots: bool = Field(True, description="write PNG plots next to the report")
    allow_offline: bool = Field(
        False, description="evaluate a benchmark that needs tools (OmniGAIA, WorldSense) in the offline environment "
        "(no perception model, no web): refused unless true (`--allow-offline`); every report then says "
        "'offline: no tools'")
    allow_train_overlap: bool = Field(
        False, description="evaluate the served planner on tasks it was trained on (its provenance.json "
        "`training_tasks`): refused unless true (`--allow-train-overlap`); the report then names the overlap")
    prices: str | None = Field(
        None, description="a price table (YAML, e.g. configs/prices/default.yaml; eval.prices): the report's cost "
        "per question by call kind; kinds without a price are listed as unpriced")
    teacher: str | None = Field(
        None, description="the teacher's own eval of these tasks (its output folder or trajectories.jsonl; "
        "`--teacher`): the report compares the planner with it, paired by task, and says in its headline when the "
        "planner is below the teacher whose runs it learned from (report.json `teacher`, eval.teacher)")


def parse_shard(text: str) -> tuple[int, int]:
    """'i/n' → (i, n) with 0 <= i < n.

    >>> parse_shard("2/4")
    (2, 4)
    """
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m:
        raise ValueError(f"shard must look like 'i/n' (e.g. 0/4), got {text!r}")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"shard {text!r}: need 0 <= i < n")
    return i, n


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^${}]*))?\}")  # innermost first: defaults may nest


def _expand(value: Any, where: str, source: str, builtins: dict[str, str] | None = None,
            missing: list[str] | None = None) -> Any:
    """Expand ${VAR} / ${VAR:-default} in every string of a YAML tree (`builtins` such as RECIPE_DIR first, then
    the environment). Unset variables without a default are collected in `missing` (raised at once when None)."""
    top = missing is None
    missing = [] if missing is None else missing
    builtins = builtins or {}
    if isinstance(value, dict):
        out: Any = {k: _expand(v, f"{where}.{k}" if where else str(k), source, builtins, missing)
                    for k, v in value.items()}
    elif isinstance(value, list):
        out = [_expand(v, f"{where}.{i}", source, builtins, missing) for i, v in enumerate(value)]
    elif not isinstance(value, str):
        out = value
    else:
        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in builtins:
                return builtins[name]
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            missing.append(f"{where}: environment variable {name} is not set (export it, or write "
                           f"${{{name}:-default}})")
            return ""

        out = value
        while True:
            expanded = _VAR.sub(sub, out)
            if expanded == out:
                break
            out = expanded
    if top and missing:
        raise RecipeError(f"{source}: " + "; ".join(dict.fromkeys(missing)))
    return out


def set_path(data: dict[str, Any], override: str) -> None:
    """Apply one `key.path=value` override in place (value parsed as YAML).

    >>> d = {"agent": {"mode": "ledger"}}
    >>> set_path(d, "agent.step_budget=7"); d["agent"]
    {'mode': 'ledger', 'step_budget': 7}
    """
    if "=" not in override:
        raise RecipeError(f"override {override!r}: expected key.path=value")
    key, raw = override.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise RecipeError(f"override {override!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise RecipeError(f"override {override!r}: value is not valid YAML: {exc}") from exc
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part) if isinstance(node, dict) else None
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise RecipeError(f"override {override!r}: {'.'.join(parts[:i + 1])} is not a mapping")
        node = nxt
    node[parts[-1]] = value


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(x) for x in loc) or "<root>"


RecipeT = TypeVar("RecipeT", bound=BaseModel)
ModelT = TypeVar("ModelT", bound=BaseModel)


def recipe_from_dict(data: dict[str, Any], source: str = "<recipe>", overrides: list[str] | None = None,
                     model: type[RecipeT] = RolloutRecipe,  # type: ignore[assignment]
                     recipe_dir: str | Path | None = None) -> RecipeT:
    """Validate a recipe mapping (a `RolloutRecipe`, a subclass such as `EvalRecipe`, or another recipe model such
    as the rounds') after overrides and ${VAR} expansion (`recipe_dir` is ${RECIPE_DIR}); errors name `source` and
    the field."""
    data = dict(data)
    for ov in overrides or []:
        set_path(data, ov)
    builtins = {"RECIPE_DIR": str(Path(recipe_dir).resolve())} if recipe_dir is not None else {}
    data = _expand(data, "", source, builtins)
    register_in(data)  # every credential it holds is hidden by value wherever the project prints or writes
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        msgs = [f"{_field(e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()[:5]]
        raise RecipeError(f"{source}: " + "; ".join(msgs)) from exc


def read_text(path: Path, what: str, error: type[Exception] = RecipeError) -> str:
    """A file's UTF-8 text; an unreadable file raises `error` naming it and `what` it was read as."""
    try:
        return path.read_text("utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc}") from exc


def read_yaml(path: Path, what: str, error: type[Exception] = RecipeError) -> Any:
    """A YAML file's content; an unreadable file or bad YAML raises `error` naming the file (and YAML line)."""
    text = read_text(path, what, error)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise error(f"{path}{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from exc


def read_yaml_model(path: Path, what: str, model: type[ModelT], error: type[Exception], shape: str,
                    field_errors: Callable[[ValidationError], list[str]]) -> ModelT:
    """A YAML file validated as `model`: unreadable or bad YAML (`read_yaml`), not a mapping (`shape` says what it
    holds) or a field `model` refuses (`field_errors` words them) raises `error` naming the file."""
    data = read_yaml(path, what, error)
    if not isinstance(data, dict):
        raise error(f"{path}: {shape}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{path}: " + "; ".join(field_errors(exc))) from exc


def load_recipe(path: str | Path | None, overrides: list[str] | None = None,
                model: type[RecipeT] = RolloutRecipe) -> RecipeT:  # type: ignore[assignment]
    """Read a YAML recipe (or start from an empty one when `path` is None) and apply `key.path=value` overrides;
    errors name the file (and YAML line) and the field."""
    if path is None:
        return recipe_from_dict({}, "<command line>", overrides, model)
    p = Path(path)
    data = read_yaml(p, "the recipe")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RecipeError(f"{p}: the recipe must be a mapping (tasks:, backends:, agent:, …)")
    return recipe_from_dict(data, str(p), overrides, model, recipe_dir=p.parent)


# the old name of the rollout recipe (collect's own is omnidecision/collect/recipe.py), one release
__getattr__ = aliases(__name__, {"CollectRecipe": "RolloutRecipe"}, globals())
