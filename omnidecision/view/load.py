"""Read what `omnidecision view` shows: trajectory files, collection folders and eval folders, tolerantly.

A malformed line is reported as `file:line: reason` and skipped; every readable run is kept. A last line without
its newline (a file cut mid-write) is kept when it still parses, else reported as truncated.

    python -m omnidecision.view.load runs/eval-teacher      # prints what it found and every problem
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

# The run records: the one place the view imports them (they move to omnidecision.protocol.records).
from omnidecision.protocol.records import RunRecord, StepRecord, run_key  # noqa: F401  (StepRecord: re-exported)

logger = logging.getLogger(__name__)

TRAJECTORY_GLOB = "trajectories*.jsonl"


@dataclass
class Source:
    """One set of runs: a trajectory file, or the folder of a collection or an evaluation."""

    path: Path
    label: str
    files: list[Path]
    records: list[RunRecord] = field(default_factory=list)
    report: dict[str, Any] | None = None  # report.json of an eval folder
    plots: list[Path] = field(default_factory=list)

    @property
    def mode(self) -> str:
        modes = sorted({r.mode for r in self.records})
        return ",".join(modes) if modes else ""

    @property
    def model(self) -> str:
        if self.report and isinstance(self.report.get("planner"), dict) and self.report["planner"].get("model"):
            return str(self.report["planner"]["model"])
        models = sorted({r.planner_model for r in self.records if r.planner_model})
        return ",".join(models)


@dataclass
class Collection:
    sources: list[Source]
    problems: list[str]  # "file:line: reason", in reading order

    @property
    def n_runs(self) -> int:
        return sum(len(s.records) for s in self.sources)


def _reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    if first.get("type") == "json_invalid":
        return f"not valid JSON: {first.get('msg')}"
    loc = ".".join(str(x) for x in first.get("loc", ())) or "<root>"
    return f"field {loc}: {first.get('msg')}"


def read_jsonl(path: Path, problems: list[str]) -> list[RunRecord]:
    """Every readable record of one JSONL file; each unreadable line adds `path:line: reason` to `problems`."""
    records: list[RunRecord] = []
    try:
        fh = path.open("rb")
    except OSError as exc:
        problems.append(f"{path}: cannot read: {exc.strerror or exc}")
        return records
    with fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                records.append(RunRecord.model_validate_json(raw))
            except ValidationError as exc:
                torn = not raw.endswith(b"\n")
                what = "truncated last line (no newline)" if torn else _reason(exc)
                problems.append(f"{path}:{lineno}: {what}" + (f": {_reason(exc)}" if torn else ""))
    return records


def _read_report(folder: Path, problems: list[str]) -> dict[str, Any] | None:
    p = folder / "report.json"
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{p}: unreadable report, shown without it: {exc}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{p}: unreadable report, shown without it: not a JSON object")
        return None
    return data


def _source(path: Path, files: list[Path], problems: list[str]) -> Source:
    folder = path if path.is_dir() else None
    report = _read_report(folder, problems) if folder else None
    label = str(report.get("name") or "") if report else ""
    src = Source(path=path, label=label or (path.name if folder else path.stem), files=files, report=report,
                 plots=sorted(folder.glob("*.png")) if folder else [])
    seen: set[tuple[str, int]] = set()
    for f in files:
        for rec in read_jsonl(f, problems):
            key = run_key(rec)
            if key in seen:  # a resumed shard may repeat a run: the first one counts (as in the eval report)
                continue
            seen.add(key)
            src.records.append(rec)
    return src


def load(paths: list[str | Path]) -> Collection:
    """Sources for each path: a .jsonl file, a folder with trajectories*.jsonl, or a folder of such folders
    (e.g. an ablation's `ledger/ react/ memory/`). A path that holds no trajectories is reported, not raised."""
    problems: list[str] = []
    sources: list[Source] = []
    for item in paths:
        p = Path(item)
        if p.is_file():
            sources.append(_source(p, [p], problems))
        elif p.is_dir():
            files = sorted(p.glob(TRAJECTORY_GLOB))
            if files:
                sources.append(_source(p, files, problems))
                continue
            subs = [d for d in sorted(p.iterdir()) if d.is_dir() and any(d.glob(TRAJECTORY_GLOB))]
            if not subs:
                problems.append(f"{p}: no {TRAJECTORY_GLOB} in this folder or its sub-folders")
            sources.extend(_source(d, sorted(d.glob(TRAJECTORY_GLOB)), problems) for d in subs)
        else:
            problems.append(f"{p}: no such file or folder")
    _unique_labels(sources)
    return Collection(sources=sources, problems=problems)


def _unique_labels(sources: list[Source]) -> None:
    seen: dict[str, int] = {}
    for s in sources:
        n = seen.get(s.label, 0) + 1
        seen[s.label] = n
        if n > 1:
            s.label = f"{s.label} ({n})"


if __name__ == "__main__":
    c = load(sys.argv[1:])
    for s in c.sources:
        print(f"{s.label}: {len(s.records)} runs from {len(s.files)} file(s), report={'yes' if s.report else 'no'}")
    for line in c.problems:
        print(line, file=sys.stderr)
