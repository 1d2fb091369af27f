"""GRPO's training states from several sources, mixed by weight: the teacher's harvested states, the planner's own
(`harvest --label none` of its served runs: configs/collect/own-states-vllm.yaml), or any RL folder.

`state_sources` in the GRPO recipe is a list of `{path, weight, name}`: `path` a harvest folder holding rl/ (or the
rl/ folder itself), `weight` the source's share of the training states (weights are normalised), `name` the label
its rows carry in the `state_source` column (default: the folder's name). The mix has as many training states as
the sources have together; source i contributes round(N * w_i / sum w) of them: a seeded draw without repetition
while it has enough rows, else all of its rows and a seeded draw of repeats for the rest (the stats count them).
The held-out split is every source's validation split (carved out of its train split when it has none), shuffled
by the seed, so the first `eval_closure_n` held-out states are a sample of every source. State selection
(`select_states: balanced`) then runs on the mix as on one source.

    omnidecision grpo --config configs/grpo/tiny-cpu.yaml \
        --state_sources '[{"path": "data/own-states", "weight": 0.5}, {"path": "runs/demo/data", "weight": 0.5}]'
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from omnidecision.rl.data import load_rl_splits

logger = logging.getLogger(__name__)

SOURCE_COLUMN = "state_source"  # the column naming where a mixed row came from


class StateSource(BaseModel):
    """One source of training states."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(..., min_length=1, description="a harvest folder holding rl/, or the rl/ folder itself")
    weight: float = Field(1.0, gt=0, description="the source's share of the training states (normalised)")
    name: str | None = Field(None, description="label in the state_source column (default: the folder's name)")

    def label(self) -> str:
        p = Path(self.path)
        return self.name or (p.parent.name if p.name == "rl" else p.name) or self.path


def parse_state_sources(value: Any) -> list[StateSource] | None:
    """The recipe field as typed sources: a list of mappings (YAML) or its JSON text (command line); None stays
    None. Errors name the entry and the field.

    >>> [s.label() for s in parse_state_sources('[{"path": "data/own/rl", "weight": 2}, {"path": "data/teacher"}]')]
    ['own', 'teacher']
    >>> parse_state_sources([{"path": "x", "weight": 0}])
    Traceback (most recent call last):
    ...
    ValueError: state_sources[0].weight: Input should be greater than 0
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"state_sources: not a JSON list of {{path, weight}} mappings: {exc}") from exc
    if not isinstance(value, list) or not value:
        raise ValueError(f"state_sources must be a non-empty list of {{path, weight}} mappings, got {value!r}")
    out = []
    for i, entry in enumerate(value):
        if isinstance(entry, StateSource):
            out.append(entry)
            continue
        if not isinstance(entry, dict):
            raise ValueError(f"state_sources[{i}]: a mapping {{path, weight, name}}, got {entry!r}")
        try:
            out.append(StateSource.model_validate(entry))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err.get("loc", ())) or "<entry>"
            raise ValueError(f"state_sources[{i}].{field}: {err.get('msg')}") from exc
    labels = [s.label() for s in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"state_sources: two sources share a name {labels}: give each a distinct `name`")
    return out


def shares(sizes: list[int], weights: list[float]) -> list[int]:
    """Rows per source: the total of `sizes`, split by the normalised weights (largest remainders, so the parts add
    up to the total exactly).

    >>> shares([100, 300], [1.0, 1.0])
    [200, 200]
    >>> shares([10, 10, 10], [1.0, 1.0, 1.0])
    [10, 10, 10]
    """
    total, w = sum(sizes), sum(weights)
    raw = [total * x / w for x in weights]
    out = [math.floor(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - out[i], reverse=True)[:total - sum(out)]:
        out[i] += 1
    return out


def _draw(n_rows: int, n: int, rng: random.Random) -> tuple[list[int], int]:
    """(indices, repeats): `n` seeded draws from `n_rows` rows, without repetition while there are enough."""
    if n <= n_rows:
        return rng.sample(range(n_rows), n), 0
    return list(range(n_rows)) + [rng.randrange(n_rows) for _ in range(n - n_rows)], n - n_rows


def _align(parts: list[Any]) -> list[Any]:
    """The columns every part has, cast to the first part's types (a rule-generated JSONL folder types an all-None
    column as null; a harvest's parquet as bool)."""
    common = [c for c in parts[0].column_names if all(c in p.column_names for p in parts)]
    parts = [p.select_columns(common) for p in parts]
    features = parts[0].features
    return [parts[0], *(p.cast(features) for p in parts[1:])]


def load_state_sources(sources: list[StateSource], splits: tuple[str, str] = ("train", "validation"),
                       carve: float = 0.05, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """({train, validation} datasets of the mix, stats per source). Each source is read as GRPO reads one
    `dataset_name` (`rl.data.load_rl_splits`, with the same carving of a missing validation split)."""
    import datasets

    loaded = [load_rl_splits(s.path, splits, carve=carve, seed=seed) for s in sources]
    train_name, val_name = splits
    sizes = [len(parts[train_name]) for parts in loaded]
    empty = [s.path for s, n in zip(sources, sizes, strict=True) if n == 0]
    if empty:
        raise ValueError(f"state_sources: no `{train_name}` rows in {empty}")
    wanted = shares(sizes, [s.weight for s in sources])
    rng = random.Random(seed)
    train_parts, val_parts, stats = [], [], []
    for source, parts, n in zip(sources, loaded, wanted, strict=True):
        label = source.label()
        indices, repeats = _draw(len(parts[train_name]), n, rng)
        train_parts.append(parts[train_name].select(indices).add_column(SOURCE_COLUMN, [label] * len(indices)))
        val = parts[val_name]
        val_parts.append(val.add_column(SOURCE_COLUMN, [label] * len(val)))
        stats.append({"name": label, "path": source.path, "weight": source.weight, "rows": len(parts[train_name]),
                      "train": len(indices), "repeated": repeats, "validation": len(val)})
        if repeats:
            logger.warning("state source %s: %d rows for a share of %d states: %d of its states are repeated",
                           label, len(parts[train_name]), n, repeats)
    train = datasets.concatenate_datasets(_align(train_parts)).shuffle(seed=seed)
    heldout = datasets.concatenate_datasets(_align(val_parts)).shuffle(seed=seed)
    logger.info("state sources: %s", ", ".join(f"{s['name']} {s['train']}/{len(train)} (weight {s['weight']})"
                                               for s in stats))
    return {train_name: train, val_name: heldout}, {"sources": stats, "train": len(train), "validation": len(heldout)}


def source_counts(dataset: Any) -> dict[str, int]:
    """States per source in a (mixed) dataset; {} for a dataset without the `state_source` column."""
    if SOURCE_COLUMN not in dataset.column_names:
        return {}
    return dict(sorted(Counter(dataset[SOURCE_COLUMN]).items()))


def load_grpo_states(script_args: Any, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The train and held-out states of a GRPO recipe: its `state_sources` mixed by weight when set (they replace
    `dataset_name`), else `dataset_name` as one source; with the mix's stats (None for `dataset_name`)."""
    splits = (script_args.dataset_train_split, script_args.dataset_test_split)
    sources = parse_state_sources(script_args.state_sources)
    if sources is None:
        return load_rl_splits(script_args.dataset_name, splits, carve=0.05, seed=seed), None
    if script_args.dataset_name is not None:
        logger.warning("state_sources is set: it replaces dataset_name (%s), which is not read",
                       script_args.dataset_name)
    return load_state_sources(sources, splits, carve=0.05, seed=seed)
