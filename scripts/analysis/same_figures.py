"""Whether two demo (or experiment) summaries hold the same figures: every key, and every value but the timings.

A refactor that should not change behaviour, or the same commit on another host, is checked by running the demo
again and comparing its `summary.json` with the committed one. Wall times, the post-SFT time budget and the
provenance (CPU, library versions, git revision) differ from run to run and are left out; everything else (arms,
accuracies, intervals, outcomes, contrasts, decisions, parity) must be equal. Exit 0 when it is, 1 with each
difference named by its path when not, 2 when a file cannot be read.

    python scripts/analysis/same_figures.py docs/results/demo-summary.json runs/demo/summary.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer


def _skipped(key: str) -> bool:
    """Run-to-run measurements, not figures (the same plan on the same seed gives other values on another host or
    load): the provenance and every time in seconds (`total_wall_s`, `stage_wall_s`, `post_sft_budget_s`, ...)."""
    return key == "provenance" or key.endswith("_s")


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every place where `b` differs from `a` (keys missing on either side, list lengths, values), timings left
    out.

    >>> differences({"x": 1, "wall_s": 3.0}, {"x": 1, "wall_s": 9.5})
    []
    >>> differences({"p": {"acc": 0.9}}, {"p": {"acc": 0.8, "n": 4}})
    ['p: keys only in the second: n', 'p.acc: 0.9 != 0.8']
    """
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        if only := sorted(set(a) - set(b)):
            out.append(f"{path or '.'}: keys only in the first: {', '.join(only)}")
        if only := sorted(set(b) - set(a)):
            out.append(f"{path or '.'}: keys only in the second: {', '.join(only)}")
        for key in sorted(set(a) & set(b)):
            if not _skipped(key):
                out += differences(a[key], b[key], f"{path}.{key}" if path else key)
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = [f"{path}: {len(a)} items != {len(b)}"] if len(a) != len(b) else []
        for i, (x, y) in enumerate(zip(a, b, strict=False)):  # a length difference is named above
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        typer.echo(f"error: {path}: {exc}", err=True)
        raise typer.Exit(2) from exc


def main(first: Path = typer.Argument(..., help="a summary.json (the committed one)"),
         second: Path = typer.Argument(..., help="the summary.json to compare with it")) -> None:
    """Print each difference of figures between two summaries; exit 1 if there is any."""
    found = differences(_read(first), _read(second))
    for line in found:
        typer.echo(line)
    typer.echo(f"{len(found)} differences of figures ({first} vs {second}; timings and provenance left out)")
    if found:
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
