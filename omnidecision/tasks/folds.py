"""k-fold splits of a benchmark by task id, and the id files recipes read (`tasks.ids_file`).

A planner harvested from a benchmark's runs must not be evaluated on the same tasks: `omnidecision tasks split`
deals the task ids of a file into k disjoint folds that together cover every task (seeded shuffle, then round
robin: fold sizes differ by at most one). For fold i it writes `fold-i/test_ids.json` (the fold) and
`fold-i/train_ids.json` (every other fold); a collect or eval recipe keeps only those tasks with
`--tasks.ids_file DIR/fold-i/train_ids.json` (collect, harvest, train) and `... test_ids.json` (eval). `folds.json`
records the source file, its format, the seed and every fold.

    omnidecision tasks split data/omnigaia/test_metadata.json --folds 5 --seed 0 --out data/omnigaia/folds
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from omnidecision.tasks.loaders import load_tasks

FOLDS_FILE = "folds.json"


def split_folds(task_ids: list[str], folds: int, seed: int) -> list[list[str]]:
    """Deal `task_ids` into `folds` disjoint folds covering every id (seeded shuffle, round robin; each fold
    sorted). Duplicate ids or fewer ids than folds are errors.

    >>> split_folds(["a", "b", "c", "d", "e"], 2, seed=0) == split_folds(["e", "d", "c", "b", "a"], 2, seed=0)
    True
    >>> sorted(len(f) for f in split_folds([str(i) for i in range(7)], 3, seed=1))
    [2, 2, 3]
    """
    if folds < 2:
        raise ValueError(f"--folds must be at least 2, got {folds}")
    if len(set(task_ids)) != len(task_ids):
        dup = next(t for t in task_ids if task_ids.count(t) > 1)
        raise ValueError(f"task id {dup!r} appears more than once: folds by task id need unique ids")
    if len(task_ids) < folds:
        raise ValueError(f"{len(task_ids)} tasks cannot fill {folds} folds")
    ids = sorted(task_ids)  # the file's order does not matter, only the seed does
    random.Random(seed).shuffle(ids)
    return [sorted(ids[i::folds]) for i in range(folds)]


def plan_folds(path: str | Path, fmt: str, folds: int, seed: int, **options: Any) -> dict[str, Any]:
    """Load the tasks of `path` (format `fmt`) and split their ids into `folds`: what folds.json will hold. The
    whole of `tasks split --dry-run` (it reads and refuses what the run reads and refuses, and writes nothing)."""
    tasks = load_tasks(path, fmt, **options)
    parts = split_folds([t.id for t in tasks], folds, seed)
    return {"source": str(path), "format": fmt, "seed": seed, "folds": folds, "tasks": len(tasks),
            "sizes": [len(p) for p in parts], "fold_ids": parts}


def fold_files(out: str | Path, folds: int) -> list[Path]:
    """The files `write_folds` writes under `out`."""
    out = Path(out)
    return [out / FOLDS_FILE] + [out / f"fold-{i}" / n for i in range(folds) for n in ("test_ids.json",
                                                                                        "train_ids.json")]


def write_folds(path: str | Path, fmt: str, folds: int, seed: int, out: str | Path,
                **options: Any) -> dict[str, Any]:
    """Load the tasks of `path` (format `fmt`), split their ids into `folds` and write OUT/folds.json and
    OUT/fold-i/{test,train}_ids.json; returns what folds.json holds."""
    doc = plan_folds(path, fmt, folds, seed, **options)
    parts = doc["fold_ids"]
    out = Path(out)
    for i, test in enumerate(parts):
        folder = out / f"fold-{i}"
        folder.mkdir(parents=True, exist_ok=True)
        train = sorted(t for j, part in enumerate(parts) if j != i for t in part)
        for name, ids in (("test_ids.json", test), ("train_ids.json", train)):
            (folder / name).write_text(json.dumps({"source": str(path), "fold": i, "folds": folds, "seed": seed,
                                                   "ids": ids}, indent=1) + "\n", encoding="utf-8")
    (out / FOLDS_FILE).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return doc


def read_ids_file(path: str | Path) -> list[str]:
    """Task ids from a JSON file: a list of ids, or an object with `ids` (what `tasks split` and a harvest's
    task_ids.json write). Errors name the file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text("utf-8"))
    except OSError as exc:
        raise ValueError(f"{p}: cannot read the task id file: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    ids = data.get("ids") if isinstance(data, dict) else data
    if not isinstance(ids, list) or not all(isinstance(t, (str, int)) for t in ids):
        raise ValueError(f"{p}: expected a JSON list of task ids or an object with an `ids` list")
    return [str(t) for t in ids]
