"""The recipe reference: every field of every recipe with its type, default and one-line doc, read from the config
dataclasses (TRL's `SFTConfig` / `GRPOConfig` / `RewardConfig` / `ModelConfig` subclasses: only the fields this
project declares or overrides; the rest are TRL's and transformers', linked) and from the pydantic recipe models
(every field, nested models in sections of their own).

A field's doc is its `help` metadata (dataclasses), its pydantic `description`, or the string literal written right
under it (an attribute docstring); a field whose type is a documented model may rest on that model's docstring. A
field with none of these is a problem that fails the build.

    python -m docgen        # writes docs/reference/recipes.md among the others
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import re
import textwrap
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from docgen.common import NOTE, Page, cell, code, one_line, portable, type_text

PROJECT = "omnidecision"


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One kind of recipe: the command that reads it, where the shipped ones are, the classes that define it."""

    title: str
    command: str
    folder: str
    classes: tuple[str, ...]  # "module:Class"
    how: str  # how fields are set


# the collect and eval recipes live in the rollout layer (omnidecision/rollout/recipe.py), formerly in collect/
_ROLLOUT = "omnidecision.rollout.recipe:{0}"
RECIPES: tuple[Recipe, ...] = (
    Recipe("SFT", "omnidecision sft", "configs/sft/",
           ("omnidecision.sft.config:SFTScriptArguments", "omnidecision.sft.config:PlannerSFTConfig"),
           "YAML keys or `--field value`; any other field of `trl.SFTConfig` and `trl.ModelConfig` too"),
    Recipe("GRPO", "omnidecision grpo", "configs/grpo/",
           ("omnidecision.rl.config:GRPOScriptArguments", "omnidecision.rl.config:PlannerGRPOConfig",
            "omnidecision.rl.config:PlannerModelConfig"),
           "YAML keys or `--field value`; any other field of `trl.GRPOConfig` and `trl.ModelConfig` too "
           "(`rft-select` reads the same recipe)"),
    Recipe("Reward judge", "omnidecision judge train", "configs/judge/",
           ("omnidecision.rl.judge_config:JudgeScriptArguments", "omnidecision.rl.judge_config:JudgeRewardConfig",
            "omnidecision.rl.judge_config:JudgeModelConfig"),
           "YAML keys or `--field value`; any other field of `trl.RewardConfig` and `trl.ModelConfig` too"),
    Recipe("Collect", "omnidecision collect", "configs/collect/",
           (_ROLLOUT.format("RolloutRecipe"), "omnidecision.collect.recipe:CollectRecipe"),
           "YAML keys or `--key.path VALUE`"),
    Recipe("Eval", "omnidecision eval", "configs/eval/", (_ROLLOUT.format("EvalRecipe"),),
           "YAML keys or `--key.path VALUE`; an eval recipe is the rollout recipe plus these"),
    Recipe("Ablation grid", "omnidecision ablate --grid", "configs/ablate/", ("omnidecision.eval.grid:GridFile",),
           "YAML keys"),
    Recipe("Price table", "the `prices:` of an eval recipe", "configs/prices/",
           ("omnidecision.eval.prices:PriceTable",), "YAML keys"),
    Recipe("On-policy rounds", "omnidecision rounds", "configs/rounds/",
           ("omnidecision.onpolicy.rounds:RoundsRecipe",), "YAML keys or `--key.path VALUE`"),
    Recipe("Experiment", "omnidecision experiment", "configs/experiment/",
           ("omnidecision.pipeline.experiment:ExperimentRecipe",), "YAML keys"),
)


@dataclasses.dataclass
class FieldDoc:
    name: str
    type: str
    default: str
    doc: str
    owner: str  # the class that declares it


def load(ref: str) -> type:
    """`module:Class`; with `|`, the first of several places the class may live (a module being moved)."""
    import importlib

    errors = []
    for option in ref.split("|"):
        module, name = option.split(":")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            errors.append(f"{option}: {exc}")
    raise ImportError("; ".join(errors))


@functools.cache
def attribute_docstrings(cls: type) -> dict[str, str]:
    """name -> the doc written for a field in the class itself: the string literal right under `name: type = ...`
    (PEP 257's attribute docstrings, as griffe and pydantic's `use_attribute_docstrings` read them), or its entry in
    the class docstring's `Attributes:` section (Google style, as griffe reads it)."""
    docs = section_docs(cls.__doc__ or "", "Attributes")
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return docs
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    for node, nxt in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[node.target.id] = nxt.value.value
    return docs


def section_docs(docstring: str, section: str) -> dict[str, str]:
    """name -> text of the entries of a Google-style docstring section (`name: text`, continued on deeper lines).

    >>> doc = "Intro.\\n\\n    Attributes:\\n        a: the a\\n            and more\\n        b (int): the b\\n"
    >>> section_docs(doc, "Attributes")
    {'a': 'the a and more', 'b': 'the b'}
    """
    lines = inspect.cleandoc(docstring).splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == f"{section}:")
    except StopIteration:
        return {}
    out: dict[str, str] = {}
    indent, name = None, None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent:
            break
        match = re.match(r"\s*(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line) if depth == indent else None
        if match:
            name = match.group(1)
            out[name] = match.group(2)
        elif name is not None:
            out[name] += " " + line.strip()
    return out


def _declaring(cls: type, name: str) -> type:
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return klass
    return cls


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """Every pydantic model an annotation holds (`X`, `X | None`, `list[X]`, `dict[str, X]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _default_text(value: Any) -> str:
    if value is dataclasses.MISSING or value is PydanticUndefined:
        return "required"
    if value is None:
        return "–"
    if isinstance(value, BaseModel):
        return "see below"
    value = portable(value)
    text = repr(value) if not isinstance(value, str) else value
    return code(text if len(text) <= 60 else text[:57] + "…") if text != "" else '`""`'


def dataclass_fields(cls: type) -> Iterator[FieldDoc]:
    """The project's own fields of a config dataclass (declared or overridden in an `omnidecision` class)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        owner = _declaring(cls, f.name)
        if not owner.__module__.startswith(PROJECT):
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        doc = f.metadata.get("help") or attribute_docstrings(owner).get(f.name, "")
        yield FieldDoc(f.name, type_text(hints.get(f.name, f.type)), _default_text(default), one_line(doc),
                       owner.__name__)


def model_fields(cls: type[BaseModel], skip: frozenset[type] = frozenset()
                 ) -> Iterator[tuple[FieldDoc, list[type[BaseModel]]]]:
    """Every field of a pydantic model (but those declared in a class of `skip`), with the models nested in it."""
    for name, info in cls.model_fields.items():
        owner = _declaring(cls, name)
        if owner in skip and owner is not cls:
            continue
        nested = [m for m in _models_in(info.annotation) if m.__module__.startswith(PROJECT)]
        doc = info.description or attribute_docstrings(owner).get(name, "")
        if not doc and nested and all(m.__doc__ and m.__doc__ is not BaseModel.__doc__ for m in nested):
            doc = " / ".join(one_line(m.__doc__) for m in nested)
        default = info.default if info.default_factory is None else info.default_factory()  # type: ignore[call-arg]
        yield (FieldDoc(name, type_text(info.annotation), _default_text(default), one_line(doc), owner.__name__),
               nested)


def _table(rows: list[FieldDoc], where: str, problems: list[str]) -> list[str]:
    lines = ["| field | type | default | what it sets |", "|---|---|---|---|"]
    for r in rows:
        if not r.doc:
            problems.append(f"{where}: field `{r.name}` (declared in {r.owner}) has no doc string")
        lines.append(f"| `{r.name}` | {code(r.type)} | {r.default} | {cell(r.doc) or '**(no doc string)**'} |")
    return [*lines, ""]


def _anchor(cls: type) -> str:
    return cls.__name__.lower()


def render() -> Page:
    problems: list[str] = []
    lines = ["# Recipes", "", NOTE, "",
             "A recipe is a YAML file under `configs/`; every command that reads one takes overrides on its command "
             "line. Each section lists the fields this project defines, with their type, default and what they set.",
             ""]
    lines += ["| recipe | read by | shipped recipes |", "|---|---|---|"]
    for r in RECIPES:
        command = f"`{r.command}`" if r.command.startswith("omnidecision") else r.command
        lines.append(f"| [{r.title}](#{r.title.lower().replace(' ', '-')}) | {command} | `{r.folder}` |")
    lines.append("")
    documented: set[type] = set()
    for recipe in RECIPES:
        command = f"`{recipe.command}`" if recipe.command.startswith("omnidecision") else recipe.command
        lines += [f"## {recipe.title}", "", f"Read by {command}; shipped recipes in `{recipe.folder}`; "
                  f"set with {recipe.how}.", ""]
        queue: list[type] = [load(ref) for ref in recipe.classes]
        while queue:
            cls = queue.pop(0)
            if cls in documented:
                lines += [f"`{cls.__name__}`: as [above](#{_anchor(cls)}).", ""]
                continue
            documented.add(cls)
            where = f"{recipe.title} recipe, {cls.__module__}.{cls.__name__}"
            doc = one_line(cls.__doc__) if cls.__doc__ and cls.__doc__ is not BaseModel.__doc__ else ""
            lines += [f"### {cls.__name__}", "", f"`{cls.__module__}.{cls.__name__}`" + (f": {doc}" if doc else ""),
                      ""]
            if dataclasses.is_dataclass(cls):
                parents = [k for k in cls.__mro__[1:] if not k.__module__.startswith(PROJECT)
                           and dataclasses.is_dataclass(k)]
                if parents:
                    lines += [f"Also every field of `{parents[0].__module__.split('.')[0]}."
                              f"{parents[0].__name__}` (TRL's and transformers' documentation)." , ""]
                lines += _table(list(dataclass_fields(cls)), where, problems)
            else:
                bases = frozenset(k for k in cls.__mro__[1:] if k in documented)  # fields already listed above
                lines += [f"Also every field of [{k.__name__}](#{_anchor(k)})." for k in cls.__mro__[1:]
                          if k in bases] + ([""] if bases else [])
                rows = []
                for row, nested in model_fields(cls, bases):
                    rows.append(row)
                    queue += [m for m in nested if m not in queue]
                lines += _table(rows, where, problems)
    return Page("reference/recipes.md", "\n".join(lines), problems)


def all_fields() -> dict[str, list[str]]:
    """class path -> its documented field names, as the reference lists them (the test's side of the contract)."""
    out: dict[str, list[str]] = {}
    seen: set[type] = set()
    for recipe in RECIPES:
        queue: list[type] = [load(ref) for ref in recipe.classes]
        while queue:
            cls = queue.pop(0)
            if cls in seen:
                continue
            seen.add(cls)
            if dataclasses.is_dataclass(cls):
                out[f"{cls.__module__}.{cls.__name__}"] = [f.name for f in dataclass_fields(cls)]
            else:
                names = []
                for row, nested in model_fields(cls, frozenset(k for k in cls.__mro__[1:] if k in seen)):
                    names.append(row.name)
                    queue += [m for m in nested if m not in queue and m not in seen]
                out[f"{cls.__module__}.{cls.__name__}"] = names
    return out

