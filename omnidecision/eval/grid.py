"""The backend-swap grid (issue #29): planner variants × perception variants, one full eval per cell on the same
tasks, then `grid.json` / `grid.md` with each cell's accuracy, the paired swaps and the saturation reading (its rule:
`eval/grid_report.py`).

    omnidecision ablate --grid configs/ablate/synthetic-grid.yaml --tasks.path runs/synth-eval --out runs/grid
    omnidecision ablate --grid configs/ablate/omnigaia-grid.yaml --out runs/grid-omnigaia --dry-run

A grid file (YAML, schema `GridFile`; an unknown or bad field is an error naming the file and the field):

    base: ../eval/synthetic-rule.yaml       # the eval recipe every cell starts from (relative to the grid file)
    name: Synthetic backend swap            # title of grid.md
    overrides: {tasks.limit: 100}           # recipe key path -> value, for every cell
    planner:                                # variants, the reference (weakest) first: name -> key path -> value
      habits-teacher: {backends.planner: {kind: teacher, options: {habits: 0.5}}}
      rule: {backends.planner: {kind: teacher, options: {noise: 0.0}}}
    perception:
      degraded: {agent.settings.perception_drop: 0.5}
      as-is: {}

A cell's recipe is the base with, in this order, `overrides`, its planner variant, its perception variant and the
command line's `--key.path VALUE` (the eval's own override syntax; `${VAR}` expanded after them), `out` =
OUT/<planner>__<perception> and `name` = "<planner> × <perception>". Every cell must select the same tasks and
samples (the swaps are paired per task), and no planner key may touch a perception key (the cell would depend on
their order). Restartable: OUT/<cell>/cell.json records the cell's recipe digest before it runs and `finished`
after; a finished cell is not run again, an interrupted one resumes (eval's own resume), and a cell folder that holds
another recipe is refused (a changed grid runs into a new --out). A planner variant with a `serve:` block is served
once for all its cells.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from omnidecision.eval.compare import load_report, task_correct
from omnidecision.eval.dryrun import eval_dry_run
from omnidecision.eval.grid_report import grid_document, write_grid
from omnidecision.eval.runner import run_eval
from omnidecision.eval.serve import maybe_serve
from omnidecision.preflight import DryRunReport
from omnidecision.rollout.recipe import EvalRecipe, RecipeError, load_recipe, read_yaml_model
from omnidecision.rollout.store import write_json_redacted

logger = logging.getLogger(__name__)

CELL_FILE = "cell.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_-]+)*$")
_PER_CELL = ("out", "name")  # set by the grid for each cell
_NOT_DIGESTED = {"out", "progress", "concurrency", "plots", "breaker", "retry_errors"}  # how, not what, a cell runs


class GridError(RecipeError):
    """A grid that cannot be run; `problems` lists every problem found (each names the file or cell and field)."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or [message]


def _check_keys(overrides: dict[str, Any]) -> dict[str, Any]:
    for key in overrides:
        if not _KEY.match(key):
            raise ValueError(f"{key!r} is not a recipe key path (e.g. backends.planner.model)")
        if key.split(".")[0] in _PER_CELL:
            raise ValueError(f"{key!r}: the grid sets `out` and `name` of each cell (OUT/<planner>__<perception>)")
    return overrides


def _touches(a: str, b: str) -> bool:
    """Whether two key paths set the same part of a recipe (equal, or one inside the other)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


class GridFile(BaseModel):
    """A backend-swap grid: the base eval recipe and the planner and perception variants (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    base: str = Field(..., description="the eval recipe every cell starts from (a path relative to the grid file)")
    name: str | None = Field(None, description="title of grid.md (default: the grid file's name)")
    overrides: dict[str, Any] = Field(default_factory=dict, description="recipe key path -> value, for every cell")
    planner: dict[str, dict[str, Any]] = Field(
        ..., description="planner variants, the reference (weakest) first: name -> {recipe key path: value}")
    perception: dict[str, dict[str, Any]] = Field(
        ..., description="perception variants, the reference (weakest) first: name -> {recipe key path: value}")

    @field_validator("planner", "perception", mode="before")
    @classmethod
    def _empty_variant(cls, v: Any) -> Any:
        return {k: {} if x is None else x for k, x in v.items()} if isinstance(v, dict) else v  # `as-is:` = {}

    @field_validator("overrides")
    @classmethod
    def _check_overrides(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_keys(v)

    @field_validator("planner", "perception")
    @classmethod
    def _check_variants(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if len(v) < 2:
            raise ValueError(f"{len(v)} variant(s): a grid axis needs at least two (the reference first, then the "
                             "swaps)")
        for name, overrides in v.items():
            if not _NAME.match(str(name)):
                raise ValueError(f"variant {name!r}: a name for a folder (letters, digits, '.', '_', '-')")
            try:
                _check_keys(overrides)
            except ValueError as exc:
                raise ValueError(f"variant {name}: {exc}") from None
        return v

    @model_validator(mode="after")
    def _axes_apart(self) -> GridFile:
        for p, p_keys in self.planner.items():
            for q, q_keys in self.perception.items():
                for a in p_keys:
                    for b in q_keys:
                        if _touches(a, b):
                            raise ValueError(f"planner.{p} sets {a!r} and perception.{q} sets {b!r}: one axis "
                                             "may not change what the other sets")
        return self


def _field_errors(exc: ValidationError) -> list[str]:
    return [": ".join([*([".".join(str(x) for x in e["loc"])] if e["loc"] else []),
                       e["msg"].removeprefix("Value error, ")]) for e in exc.errors()[:5]]


def load_grid(path: str | Path) -> GridFile:
    """Read and check a grid file; errors name the file (and YAML line) and the field."""
    p = Path(path)
    grid = read_yaml_model(p, "the grid file", GridFile, GridError,
                           "a grid file is a mapping (base:, planner:, perception:)", _field_errors)
    if not (p.parent / grid.base).is_file():
        raise GridError(f"{p}: base: no eval recipe at {p.parent / grid.base}")
    return grid


@dataclass
class Cell:
    """One cell of the grid: its variants, the overrides that make its recipe from the base, and the recipe."""

    planner: str
    perception: str
    sets: list[tuple[str, Any]]  # (key path, value) from the grid file, in the order applied
    recipe: EvalRecipe

    @property
    def label(self) -> str:
        return f"{self.planner} × {self.perception}"

    @property
    def out(self) -> Path:
        return Path(self.recipe.out)


def _override(key: str, value: Any) -> str:
    return f"{key}={json.dumps(value)}"  # JSON is YAML: set_path reads the value back as it was written


def resolve_cells(path: str | Path, overrides: list[str], out: str | Path) -> tuple[GridFile, Path, list[Cell]]:
    """The grid file, its base recipe path and every cell's resolved recipe, planner-major (rows), perception
    within. `overrides` are the command line's `key.path=value`. Raises `GridError` listing every cell problem."""
    grid = load_grid(path)
    base = Path(os.path.normpath(Path(path).parent / grid.base))
    cells, problems = [], []
    for p, p_sets in grid.planner.items():
        for q, q_sets in grid.perception.items():
            sets = [*grid.overrides.items(), *p_sets.items(), *q_sets.items()]
            name = f"{p} × {q}"
            cell_overrides = [*(_override(k, v) for k, v in sets), *overrides,
                              _override("out", str(Path(out) / f"{p}__{q}")), _override("name", name)]
            try:
                cells.append(Cell(p, q, sets, load_recipe(base, cell_overrides, model=EvalRecipe)))
            except RecipeError as exc:
                problems.append(f"{path}: cell {name}: {exc}")
    if not problems:
        ref = cells[0]
        for c in cells[1:]:
            if c.recipe.tasks != ref.recipe.tasks or c.recipe.samples != ref.recipe.samples:
                problems.append(f"{path}: cell {c.label}: its tasks or samples differ from cell {ref.label}'s: every "
                                "cell must run the same tasks (set them in `overrides:`, not in a variant)")
    if problems:
        raise GridError("\n  - ".join(["the grid's cells cannot be resolved:", *problems]), problems)
    return grid, base, cells


def cell_digest(recipe: EvalRecipe) -> str:
    """What a cell runs (its recipe without where and how fast), as a short hash: a restart compares it."""
    data = recipe.model_dump(mode="json", exclude=_NOT_DIGESTED)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def cell_state(cell: Cell) -> str:
    """'finished' (cell.json says so and report.json is there), 'partial' (runs but no finished mark: an eval
    resumes them) or 'new'. A folder holding a cell of another recipe raises `GridError`."""
    marker = cell.out / CELL_FILE
    if not marker.is_file():
        return "partial" if any(cell.out.glob("trajectories*.jsonl")) else "new"
    try:
        doc = json.loads(marker.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        doc = {}
    if doc.get("digest") != cell_digest(cell.recipe):
        raise GridError(f"{cell.out}: holds cell {doc.get('name')!r} of another recipe ({CELL_FILE} digest "
                        f"{doc.get('digest')}, this grid's {cell_digest(cell.recipe)}): the grid file, its base or "
                        "the command line changed; run the grid into a new --out")
    return "finished" if doc.get("finished") and (cell.out / "report.json").is_file() else "partial"


def _mark(cell: Cell, **extra: Any) -> None:
    cell.out.mkdir(parents=True, exist_ok=True)
    write_json_redacted(cell.out / CELL_FILE, {"name": cell.label, "planner": cell.planner,
                                               "perception": cell.perception, "digest": cell_digest(cell.recipe),
                                               "sets": dict(cell.sets), **extra})


def run_grid(path: str | Path, overrides: list[str], out: str | Path, *, progress: bool = True) -> dict[str, Any]:
    """Run every unfinished cell (row by row: a planner served once for its cells), then write OUT/grid.json and
    OUT/grid.md (`eval/grid_report.py`). Returns the grid document."""
    # -- resolve every cell and check every folder before anything runs
    grid, base, cells = resolve_cells(path, overrides, out)
    states = {c.label: cell_state(c) for c in cells}
    # -- the runs, one planner row at a time
    for planner in grid.planner:
        row = [c for c in cells if c.planner == planner]
        for c in row:
            if states[c.label] == "finished":
                logger.info("grid: cell %s is finished (%s): not run again", c.label, c.out)
        todo = [c for c in row if states[c.label] != "finished"]
        if not todo:
            continue
        first = todo[0].recipe
        shared = first.serve is not None and all(c.recipe.serve == first.serve and c.recipe.backends == first.backends
                                                 for c in todo)
        with maybe_serve(first) if shared else contextlib.nullcontext(None) as specs:
            for c in todo:
                logger.info("grid: cell %s → %s", c.label, c.out)
                _mark(c, finished=False)
                rep = run_eval(c.recipe, progress=progress, specs=specs)
                _mark(c, finished=True, accuracy=rep["accuracy"], n=rep["n"])
    # -- the report over every cell's runs
    planners, perceptions = list(grid.planner), list(grid.perception)
    reports = {(c.planner, c.perception): load_report(c.out) for c in cells}
    per_task = {(c.planner, c.perception): task_correct(c.out) for c in cells}
    doc = grid_document(grid.name or Path(path).stem, planners, perceptions, reports, per_task,
                        grid=str(path), base=str(base))
    return write_grid(doc, out)


def cell_command(base: Path, cell: Cell, overrides: list[str]) -> str:
    """The `omnidecision eval` command that runs this cell alone (what a dry run shows)."""
    args = ["omnidecision", "eval", "--config", str(base)]
    for key, value in cell.sets:
        text = value if isinstance(value, str) and yaml.safe_load(value) == value else json.dumps(value)
        args += [f"--{key}", text]
    for ov in overrides:
        key, _, value = ov.partition("=")
        args += [f"--{key}", value]
    return shlex.join([*args, "--name", cell.label, "--out", str(cell.out)])


def _lookup(data: Any, key: str) -> Any:
    for part in key.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def grid_dry_run(path: str | Path, overrides: list[str], out: str | Path):
    """The dry-run report of a grid: every cell resolved (the values its variants set, after ${VAR} expansion; its
    folder's state; the eval command that runs it alone) and checked as `eval --dry-run` checks it: each check once,
    its detail starting with the cells it concerns ("[every cell] ..."). Starts nothing, writes nothing."""
    report = DryRunReport(command="ablate", recipe=str(path))
    try:
        grid, base, cells = resolve_cells(path, overrides, out)
    except GridError as exc:
        for problem in exc.problems:
            report.add("grid", "error", problem)
        return report
    report.add("grid", "ok", f"{path}: {len(grid.planner)} planner × {len(grid.perception)} perception variants = "
                             f"{len(cells)} cells on the same tasks, base {base}")
    report.resolved = {"grid": grid.model_dump(mode="json"), "base": str(base), "out": str(out)}
    seen: dict[tuple[str, str, str], list[str]] = {}
    rows = []
    for c in cells:
        sub = eval_dry_run(c.recipe, base, len(c.sets) + len(overrides), command="ablate")
        for check in sub.checks:
            seen.setdefault((check.what, check.status, check.detail), []).append(c.label)
        try:
            state = cell_state(c)
        except GridError as exc:
            state = "refused"
            report.add("out", "error", f"[{c.label}] {exc}")
        resolved = c.recipe.model_dump(mode="json")
        rows.append({"planner": c.planner, "perception": c.perception, "out": str(c.out), "state": state,
                     "sets": {key: _lookup(resolved, key) for key, _ in c.sets}})
        report.would_run += [cell_command(base, c, overrides), *sub.would_run]
    for (what, status, detail), labels in seen.items():
        where = "every cell" if len(labels) == len(cells) else ", ".join(labels)
        report.add(what, status, f"[{where}] {detail}")
    report.extra["grid"] = {"planners": list(grid.planner), "perceptions": list(grid.perception), "cells": rows}
    return report
