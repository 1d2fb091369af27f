"""What a command's inputs are, decided once for every dry run and every run: a model or dataset name is a local path
or a hub id (`resolve`), and every row of a data file is read the way the run reads it (`split_problem`).

Names. A name that exists on disk is a local path. A name that does not exist is a hub id only when it is shaped
like one (`name` or `org/name`) and does not look local: a path that starts with `.`, `/` or `~`, has two separators
or a backslash, or whose first part is a folder here or one of the project's own output roots (`runs/`, `data/`)
is a local path that does not exist: an error in the dry run and in the run alike (the run would otherwise spend a
minute on hub retries and end in a traceback). A hub id is accepted when the Hugging Face cache holds it (checked
offline, where the run's loader finds it) or the hub answers that it exists; with HF_HUB_OFFLINE=1 and no cached
copy it is refused (the run cannot load it either); when the hub cannot be reached from here it is reported as not
checked.

Rows. A dry run that reads only a split's first line passes an empty file, a column present on line 1 only, or a
value of the wrong type, and the run then dies in the loader with a traceback. The stages' checks functions
(sft/dryrun.py, rl/dryrun.py), which the dry run and the run both call, read every row the run will read through
`split_problem`, each problem named as `file:line: field: what is wrong`. JSON lines (`.jsonl`, and `.json` holding
one object per line or one array) and parquet files are read row by row; other formats (CSV, a `save_to_disk`
folder) return None: their column check is the loader's.

    python -m omnidecision.inputs runs/sft Qwen/Qwen3-8B ./x
    python -m omnidecision.inputs data/harvest/sft/train.jsonl messages
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# `name` or `org/name` (letters, digits, `-`, `_`, `.`): anything with more separators is a path
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# the folders the project's commands write under (recipes, docs): `runs/sft` is a missing folder, not a hub repo
LOCAL_ROOTS = ("runs", "data")
LOOKUP_TIMEOUT_S = 4.0

RepoType = Literal["model", "dataset"]


@dataclass(frozen=True)
class Ref:
    """What a name resolved to: `local` (exists here), `cached` / `hub` (a hub id found in the cache / on the hub),
    `unchecked` (a hub id; the hub did not answer), `missing` (an error: `detail` says why)."""

    name: str
    kind: Literal["local", "cached", "hub", "unchecked", "missing"]
    detail: str

    @property
    def ok(self) -> bool:
        return self.kind != "missing"


def local_looking(name: str) -> str | None:
    """Why `name` reads as a local path (None: it may be a hub id).

    >>> local_looking("runs/sft"), local_looking("./x"), local_looking("Qwen/Qwen3-8B")
    ('runs/ is where the project writes', 'a path (starts with `.`)', None)
    """
    if name.startswith((".", "/", "~")):
        return f"a path (starts with `{name[0]}`)"
    if "\\" in name or name.count("/") > 1 or not HUB_ID.match(name):
        return "a path (not `org/name`)"
    head = name.split("/")[0]
    if "/" in name and head in LOCAL_ROOTS:
        return f"{head}/ is where the project writes"
    if "/" in name and Path(head).is_dir():
        return f"{head}/ is a folder here"
    return None


def hub_cache() -> Path:
    """The hub cache the loaders read: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub (read at each
    call, as the run's own process would read it)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def cached(name: str, repo_type: RepoType = "model") -> Path | None:
    """The newest snapshot folder of `name` in the hub cache that holds a file, or None."""
    folder = hub_cache() / f"{repo_type}s--{name.replace('/', '--')}" / "snapshots"
    try:
        snapshots = sorted((p for p in folder.iterdir() if p.is_dir() and any(p.iterdir())),
                           key=lambda p: p.stat().st_mtime)
    except OSError:
        return None
    return snapshots[-1] if snapshots else None


@functools.lru_cache(maxsize=64)
def on_hub(name: str, repo_type: RepoType = "model", timeout_s: float = LOOKUP_TIMEOUT_S) -> bool | None:
    """True when the hub says the repo exists (public, or readable with $HF_TOKEN), False when it says it does not,
    None when it cannot be asked (no network, a timeout, a server error). One request per name per process."""
    import httpx

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = httpx.get(f"{endpoint}/api/{repo_type}s/{name}", headers=headers, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if r.status_code == 200:
        return True
    return False if r.status_code in (401, 403, 404) else None


def resolve(name: str, repo_type: RepoType = "model") -> Ref:
    """Local path, cached or online hub id, or missing (see the module docstring).

    >>> resolve("runs/no-such-model").kind, resolve("./x").kind
    ('missing', 'missing')
    """
    if Path(name).expanduser().exists():
        return Ref(name, "local", f"{name} (local)")
    if (why := local_looking(name)) is not None:
        return Ref(name, "missing", f"{name}: no such folder ({why}; not a hub id)")
    if (snapshot := cached(name, repo_type)) is not None:
        return Ref(name, "cached", f"hub {repo_type} {name!r} in the HF cache ({snapshot})")
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes"):
        return Ref(name, "missing", f"{name}: no such folder, and HF_HUB_OFFLINE=1 with no copy in the HF cache "
                                    f"({hub_cache()})")
    found = on_hub(name, repo_type)
    if found:
        return Ref(name, "hub", f"hub {repo_type} {name!r} (found on the hub; downloaded by the run)")
    if found is False:
        return Ref(name, "missing", f"{name}: no such folder, and no {repo_type} {name!r} on the hub (or no access "
                                    "with this HF_TOKEN)")
    return Ref(name, "unchecked", f"not a local folder: the hub id {name!r}, not in the HF cache ({hub_cache()}) "
                                  "and the hub did not answer from here (not checked; the node needs hub access or "
                                  "a filled HF_HOME cache)")


# ---------------------------------------------------------------- rows

# (field, what is wrong) of one row, or None when the row is fine
RowCheck = Callable[[dict[str, Any]], tuple[str, str] | None]


class BadRow(ValueError):
    """A row that cannot be read at all (not UTF-8, not JSON, not an object): `where` is `file:line`."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


def _json_rows(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open("rb") as fh:
        head = fh.read(64).lstrip()
    if head.startswith(b"["):  # one JSON array (datasets' json loader reads it too)
        try:
            rows = json.loads(path.read_text("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadRow(f"{path}:1", f"not a JSON array of rows ({type(exc).__name__})") from None
        for i, row in enumerate(rows if isinstance(rows, list) else [rows]):
            yield f"{path}[{i}]", row
        return
    line_no = 0
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise BadRow(f"{path}:{line_no}", "not UTF-8 text (a binary or UTF-16 file?)") from None
            if not text.strip():
                continue
            try:
                yield f"{path}:{line_no}", json.loads(text)
            except ValueError:
                raise BadRow(f"{path}:{line_no}", "not a JSON line") from None


def _parquet_rows(path: Path) -> Iterator[tuple[str, Any]]:
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(str(path))
    except Exception as exc:  # pyarrow raises its own error types for a file that is no parquet
        raise BadRow(str(path), f"not a parquet file ({type(exc).__name__})") from None
    i = 0
    for batch in reader.iter_batches(batch_size=1024):
        for row in batch.to_pylist():
            yield f"{path} row {i}", row
            i += 1


def iter_rows(path: str | Path) -> Iterator[tuple[str, Any]] | None:
    """(`file:line`, row) for every row of a data file; None for a format read only by the loader. Raises `BadRow`
    at the first row that cannot be read."""
    path = Path(path)
    if path.is_file() and path.suffix in (".jsonl", ".json"):
        return _json_rows(path)
    if path.is_file() and path.suffix == ".parquet":
        return _parquet_rows(path)
    return None


def has_columns(*columns: str) -> RowCheck:
    """A row check: every column is present and not null.

    >>> has_columns("prompt", "task_id")({"prompt": "p"})
    ('task_id', 'missing')
    """
    def check(row: dict[str, Any]) -> tuple[str, str] | None:
        for column in columns:
            if row.get(column) is None:
                return column, "missing" if column not in row else "null"
        return None

    return check


def split_problem(files: list[str], check: RowCheck) -> str | None:
    """The first problem of a split's files (`file:line: field: what`), read row by row; `file: no rows` for a split
    that holds none; None when every row passes or the files are of a format only the loader reads."""
    rows = 0
    for name in files:
        it = iter_rows(name)
        if it is None:
            return None
        try:
            for where, row in it:
                rows += 1
                if not isinstance(row, dict):
                    return f"{where}: not a JSON object (a {type(row).__name__})"
                if (bad := check(row)) is not None:
                    return f"{where}: {bad[0]}: {bad[1]}"
        except BadRow as exc:
            return str(exc)
        except OSError as exc:
            return f"{name}: cannot be read ({exc.strerror or exc})"
    if rows == 0:
        return f"{', '.join(files)}: no rows" if files else "no data files"
    return None


if __name__ == "__main__":
    if len(sys.argv) > 2 and Path(sys.argv[1]).is_file():
        problem = split_problem([sys.argv[1]], has_columns(*sys.argv[2:]))
        print(problem or "ok")
        raise SystemExit(1 if problem else 0)
    for arg in sys.argv[1:]:
        ref = resolve(arg)
        print(f"{ref.kind}: {ref.detail}")
