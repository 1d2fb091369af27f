"""What a trained planner (or judge) was made from: one record, written by every trained stage, carried by export.

Every stage that trains weights (sft, grpo, the rft control's SFT, each on-policy round's SFT, judge training) calls
`record_training` once at the end of its run; it writes `OUTPUT_DIR/provenance.json` (a `Provenance`): the task ids
the weights have seen (this stage's data and, read from the start model's own provenance, everything upstream), the
recipe, the data, the start model and the adapter lineage (the model an adapter must be served on or merged into),
and the git revision. `omnidecision export` copies it into the exported folder with its `export` block; `eval`
reads it back (`read_provenance`) for the train/test guard of every served planner, and serving checks an adapter's
recorded base against the served `--model` (`adapter_base`).

    python -m omnidecision.provenance runs/grpo/tiny     # prints the record of a trained or exported folder
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from omnidecision.outputs import write_json_atomic

logger = logging.getLogger(__name__)

PROVENANCE_FILE = "provenance.json"
TASK_IDS_FILE = "task_ids.json"  # written by harvest (and rft-select, rounds) next to the dataset folders
Stage = Literal["sft", "grpo", "rft", "rounds", "judge", "unknown"]


class ProvenanceError(ValueError):
    """A provenance file (or a harvest's task ids) that cannot be read; the message names the file."""


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), which result files record (pipeline/scheduler.py, the reward audit):
    stage times and round-off depend on it."""
    try:
        for line in Path("/proc/cpuinfo").read_text("utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_revision(path: str | Path | None = None) -> str | None:
    """The commit of the repository holding `path` (default: this package), `+dirty` when modified; None if no git."""
    where = Path(path) if path else Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


class TrainingTasks(BaseModel):
    """The task ids some weights have seen, and where that list came from."""

    model_config = ConfigDict(extra="ignore")

    ids: list[str] = Field(description="sorted task ids")
    n: int = Field(0, description="len(ids)")
    sources: list[str] = Field(default_factory=list, description="the files / dataset columns the ids came from")

    @classmethod
    def union(cls, *parts: TrainingTasks | None) -> TrainingTasks | None:
        given = [p for p in parts if p is not None]
        if not given:
            return None
        ids = sorted({i for p in given for i in p.ids})
        sources = list(dict.fromkeys(s for p in given for s in p.sources))
        return cls(ids=ids, n=len(ids), sources=sources)


class Lineage(BaseModel):
    """Where the weights started and, for a LoRA adapter, the exact model it rides on."""

    model_config = ConfigDict(extra="ignore")

    start_model: str | None = Field(None, description="the model the stage started from, as the recipe named it")
    start_model_resolved: str | None = Field(None, description="start_model as an absolute path (local folders)")
    adapter: bool = Field(False, description="the output is a LoRA adapter, not full weights")
    adapter_base: str | None = Field(None, description="the model the adapter must be served on or merged into "
                                                       "(its adapter_config.json base_model_name_or_path)")
    adapter_base_resolved: str | None = Field(None, description="adapter_base as an absolute path (local folders)")
    upstream: list[dict[str, Any]] = Field(
        default_factory=list, description="the start model's own stages, nearest first: stage, output_dir, "
                                          "base_model, export mode (a merged export folds an adapter into its base)")


class ExportInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    exported_at: str
    source_checkpoint: str
    mode: Literal["merged", "adapter", "full"]
    git_revision: str | None = None


class Provenance(BaseModel):
    """`provenance.json` of a trained or exported folder."""

    model_config = ConfigDict(extra="ignore")

    stage: Stage = Field("unknown", description="the stage that trained these weights")
    output_dir: str | None = Field(None, description="where the stage wrote them")
    written_at: str | None = None
    git_revision: str | None = Field(None, description="the code revision that trained them")
    training_tasks: TrainingTasks | None = Field(
        None, description="every task id the weights have seen (this stage's data ∪ the start model's provenance); "
                          "None: unknown (eval warns)")
    data: dict[str, Any] | None = Field(None, description="the dataset folder and its stats")
    recipe: dict[str, Any] | None = Field(None, description="the full recipe of the stage")
    base_model: str | None = Field(None, description="the start model (for an adapter export: the adapter's base)")
    lineage: Lineage = Field(default_factory=Lineage)
    metrics: dict[str, Any] | None = Field(None, description="final metrics of the stage")
    global_step: int | None = None
    export: ExportInfo | None = Field(None, description="set by `omnidecision export`")


def resolved_path(name: str | None) -> str | None:
    """An absolute path for a local folder; None for a hub id or nothing."""
    if not name:
        return None
    p = Path(name).expanduser()
    return str(p.resolve()) if p.exists() else None


def read_provenance(folder: str | Path, parents: bool = True) -> Provenance | None:
    """The provenance of a trained or exported folder (or, with `parents`, of the run a `checkpoint-N` folder belongs
    to); None when there is none. An unreadable file is an error naming it."""
    root = Path(folder)
    for where in (root, root.parent) if parents else (root,):
        path = where / PROVENANCE_FILE
        if not path.is_file():
            continue
        try:
            return Provenance.model_validate(json.loads(path.read_text("utf-8")))
        except (OSError, json.JSONDecodeError, ValidationError) as exc:
            raise ProvenanceError(f"{path}: cannot read the planner's provenance: {exc}") from exc
    return None


def training_tasks(dataset: str | Path | None, splits: dict[str, Any] | None = None) -> TrainingTasks | None:
    """The task ids a model trained on `dataset` has seen: the harvest's `task_ids.json` (in the folder or next to it,
    DIR/sft's or DIR/rl's parent: every task its runs came from, either split) plus the rows' own `task_id` column
    (`splits`: name → a `datasets.Dataset` or a list of row dicts); None when neither exists (a dataset from
    elsewhere). `dataset` None (GRPO on a mix of `state_sources`): the rows' column alone."""
    ids: set[str] = set()
    sources: list[str] = []
    root = Path(dataset) if dataset is not None else None
    for candidate in (() if root is None else (root / TASK_IDS_FILE, root.parent / TASK_IDS_FILE)):
        if candidate.is_file():
            try:
                data = json.loads(candidate.read_text("utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ProvenanceError(f"{candidate}: cannot read the harvest's task ids: {exc}") from exc
            ids |= {str(t) for t in data.get("ids", [])}
            sources.append(str(candidate.resolve()))
            break
    for name, d in (splits or {}).items():
        if isinstance(d, list):
            column = [r.get("task_id") for r in d if isinstance(r, dict)]
            has = any(t is not None for t in column)
        else:
            has = "task_id" in getattr(d, "column_names", [])
            column = d["task_id"] if has else []
        if has:
            ids |= {str(t) for t in column if t is not None}
            sources.append(f"{dataset}:{name} task_id column")
    if not sources:
        return None
    return TrainingTasks(ids=sorted(ids), n=len(ids), sources=sources)


def write_task_ids(folder: str | Path, tasks: TrainingTasks | None, stage: Stage | None = None) -> None:
    """`folder/task_ids.json` in the harvest's form, so a stage trained on the dataset there finds its tasks;
    `stage` names what made the rows (rft, rounds): an SFT run on them records that stage."""
    if tasks is None:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"ids": tasks.ids, "sources": tasks.sources, **({"stage": stage} if stage else {})}
    write_json_atomic(Path(folder) / TASK_IDS_FILE, doc, indent=1)


def dataset_stage(dataset: str | Path | None) -> Stage | None:
    """The stage a dataset folder's own task_ids.json names (`write_task_ids(stage=...)`), else None."""
    if dataset is None:
        return None
    path = Path(dataset) / TASK_IDS_FILE
    try:
        stage = json.loads(path.read_text("utf-8")).get("stage") if path.is_file() else None
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return stage if stage in ("rft", "rounds") else None


def _plain(value: Any) -> Any:
    """JSON-safe (paths, enums and the like as strings), as the run cards are written."""
    return None if value is None else json.loads(json.dumps(value, default=str))


def _upstream(start: Provenance | None) -> list[dict[str, Any]]:
    if start is None:
        return []
    me = {"stage": start.stage, "output_dir": start.output_dir, "base_model": start.base_model,
          "adapter": start.lineage.adapter, "export": start.export.mode if start.export else None}
    return [me, *start.lineage.upstream]


def adapter_base_of(folder: str | Path) -> str | None:
    """The base an adapter folder records (PEFT's adapter_config.json `base_model_name_or_path`), else None."""
    path = Path(folder) / "adapter_config.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text("utf-8")).get("base_model_name_or_path")
    except (OSError, json.JSONDecodeError) as exc:
        raise ProvenanceError(f"{path}: cannot read the adapter's config: {exc}") from exc


def recorded_base(adapter_dir: str | Path) -> tuple[str | None, list[str]]:
    """(the base an adapter records, every spelling of it): PEFT's `base_model_name_or_path` and the adapter's
    provenance lineage (`adapter_base`, and its absolute path, which survives a relative path and another cwd)."""
    names: list[str] = []
    config_base = adapter_base_of(adapter_dir)
    prov = read_provenance(adapter_dir, parents=False)
    lineage = prov.lineage if prov is not None else None
    for name in (config_base, lineage.adapter_base if lineage else None,
                 lineage.adapter_base_resolved if lineage else None, resolved_path(config_base)):
        if name and name not in names:
            names.append(name)
    return (names[0] if names else None), names


def same_model(served: str, recorded: list[str]) -> bool:
    """Whether the served `--model` is the recorded base: the same name, the same folder, or a hub id's snapshot
    folder in the Hugging Face cache (`.../models--org--name/snapshots/...`), or a local folder named like the hub id
    that holds no trained stage's provenance (a plain download of the base)."""
    served_abs = resolved_path(served)
    for name in recorded:
        if name == served or (served_abs is not None and resolved_path(name) == served_abs):
            return True
        if "/" in name and not Path(name).exists() and len(name.split("/")) == 2:  # a hub id
            org, repo = name.split("/")
            if f"models--{org}--{repo}" in served:
                return True
            local = Path(served)
            if local.is_dir() and local.name.lower() == repo.lower() and not (local / PROVENANCE_FILE).exists():
                return True
    return False


def record_training(output_dir: str | Path, *, stage: Stage, start_model: str | Path | None,
                    dataset: str | Path | None,
                    splits: dict[str, Any] | None = None, recipe: dict[str, Any] | None = None,
                    data: dict[str, Any] | None = None, metrics: dict[str, Any] | None = None,
                    global_step: int | None = None, tasks: TrainingTasks | dict[str, Any] | None = None,
                    write: bool = True) -> Provenance:
    """The one provenance writer of the trained stages: `output_dir/provenance.json` after the weights are saved
    (`write=False` on the ranks other than the main process: they return the same record, write nothing).

    Training tasks = this dataset's (`tasks`, else `training_tasks(dataset, splits)`) ∪ the start model's recorded
    ones (a GRPO run from an SFT planner has seen the SFT tasks too). Lineage: the start model, and whether the
    output is an adapter and on which base (read from the adapter_config.json the trainer just saved)."""
    out = Path(output_dir)
    start = read_provenance(start_model) if start_model and Path(start_model).exists() else None
    if isinstance(tasks, dict):
        tasks = TrainingTasks.model_validate(tasks)
    tasks = TrainingTasks.union(tasks or training_tasks(dataset, splits), start.training_tasks if start else None)
    stage = dataset_stage(dataset) or stage  # an SFT run on rft-select's or a round's rows is that stage
    if tasks is None:
        logger.warning("%s: no task ids found for %s (no task_ids.json, no task_id column) and none upstream: "
                       "eval cannot keep its tasks apart from this model's training tasks", out, dataset)
    # the adapter config the main process just saved (another rank might read it half-written: it skips it)
    base = adapter_base_of(out) if write else None
    lineage = Lineage(start_model=str(start_model) if start_model else None,
                      start_model_resolved=resolved_path(str(start_model) if start_model else None),
                      adapter=base is not None, adapter_base=base, adapter_base_resolved=resolved_path(base),
                      upstream=_upstream(start))
    prov = Provenance(stage=stage, output_dir=str(out.resolve()),
                      written_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                      git_revision=git_revision(), training_tasks=tasks,
                      data=_plain({"dataset": str(dataset), **(data or {})}), recipe=_plain(recipe),
                      base_model=str(start_model) if start_model else None, lineage=lineage, metrics=_plain(metrics),
                      global_step=global_step)
    if write:
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / (PROVENANCE_FILE + ".tmp")
        tmp.write_text(prov.model_dump_json(indent=1), "utf-8")
        tmp.replace(out / PROVENANCE_FILE)
    return prov


if __name__ == "__main__":
    found = read_provenance(sys.argv[1])
    print(found.model_dump_json(indent=1) if found else f"{sys.argv[1]}: no {PROVENANCE_FILE}")
