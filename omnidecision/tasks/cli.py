"""`omnidecision tasks …`: task-suite commands.

    omnidecision tasks synth --n 500 --seed 0 --out runs/synth [--dry-run]
    omnidecision tasks split data/omnigaia/test_metadata.json --folds 5 --seed 0 --out data/omnigaia/folds [--dry-run]
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import NoReturn

import typer

from omnidecision.options import ReplaceOption
from omnidecision.outputs import OutputError, check_output, report_out, staged_output
from omnidecision.protocol.redaction import redact_text
from omnidecision.tasks.folds import fold_files, plan_folds, write_folds
from omnidecision.tasks.loaders import TaskFileError, format_names, load_tasks
from omnidecision.tasks.synth import FAMILIES, generate, load_suite, write_suite

app = typer.Typer(no_args_is_help=True,
                  help="Task suites: generate the synthetic suite, check task files, split a benchmark into folds.")


@app.command("synth")
def synth(
    n: int = typer.Option(500, "--n", min=1, help="number of tasks"),
    seed: int = typer.Option(0, "--seed", help="random seed (same seed, byte-identical output)"),
    out: Path = typer.Option(..., "--out", help="output folder: tasks.jsonl, corpus.jsonl, assets/"),
    replace: ReplaceOption = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="check --out and generate the suite in memory as the run "
                                 "does; print the counts and the files it would write; write nothing"),
) -> None:
    """Write the seeded synthetic closure suite (multi-hop tasks across modalities) to OUT (written whole: a
    temporary sibling renamed into place; never over a folder this project did not write, unless --replace)."""
    try:
        if dry_run:  # the run's own output check and generator, then nothing written
            check_output(out, [], replace=replace)
            tasks, corpus, files = generate(n, seed)
            _dry_report({"command": "tasks synth", "tasks": len(tasks), "pages": len(corpus),
                         "families": dict(Counter(t.category for t in tasks)),
                         "would_write": [str(out / "tasks.jsonl"), str(out / "corpus.jsonl"),
                                         f"{out / 'assets'}/ ({len(files)} files)"]})
            return
        with staged_output(out, [], command="tasks synth", replace=replace) as tmp:
            write_suite(n, seed, tmp)
    except OutputError as exc:
        _refuse(str(exc), dry_run, "tasks synth")
    path = out / "tasks.jsonl"
    tasks = load_suite(out)
    families = Counter(t.category for t in tasks)
    levels = Counter(t.level for t in tasks)
    types = Counter(t.answer_type for t in tasks)
    print(f"wrote {len(tasks)} tasks to {path}")
    print("families: " + ", ".join(f"{k}={families[k]}" for k in FAMILIES if families[k]))
    print("levels: " + ", ".join(f"{k}={levels[k]}" for k in sorted(levels)))
    print("answer types: " + ", ".join(f"{k}={types[k]}" for k in sorted(types)))
    print(f"unanswerable: {sum(not t.answerable for t in tasks)}, with a conflict: "
          f"{sum(bool(t.meta.get('conflict')) for t in tasks)}")


def _dry_report(doc: dict) -> None:
    """A dry run's JSON report on the stream held for it (`outputs.report_out`: stdout alone)."""
    print(redact_text(json.dumps({"dry_run": True, **doc}, indent=2, default=str)), file=report_out())


def _refuse(message: str, dry_run: bool, command: str, code: int = 2, *detail: str) -> NoReturn:
    """The one error line (and its detail lines) of a refused input, the same in the run and its dry run; a dry
    run prints its report first and exits 2."""
    if dry_run:
        _dry_report({"command": command, "error": message})
    typer.echo(f"error: {message}", err=True)
    for line in detail:
        typer.echo(line, err=True)
    raise typer.Exit(2 if dry_run else code)


@app.command("check")
def check(
    path: Path = typer.Argument(..., help="task file or folder (JSONL, OmniGAIA, WorldSense, synthetic dir)"),
    fmt: str = typer.Option("auto", "--format", "-f", help="auto, jsonl, omnigaia, worldsense or synthetic"),
    media_dir: Path | None = typer.Option(None, "--media-dir", help="OmniGAIA: folder holding the media files"),
    srt_dir: Path | None = typer.Option(None, "--srt-dir", help="WorldSense: folder holding <video_id>.srt"),
    dry_run: bool = typer.Option(False, "--dry-run", help="`tasks check` writes nothing: the same checks, the counts "
                                 "as a JSON report on stdout (a bad record: the same lines, exit 2)"),
) -> None:
    """Validate a task file and print counts per level, category and answer type.

    A bad record is reported with its file, record (line or key) and field; the exit code is then 1.
    """
    if fmt not in format_names():
        choices = ", ".join(format_names())
        raise typer.BadParameter(f"unknown format {fmt!r}; expected one of {choices}", param_hint="--format")
    options = {k: v for k, v in {"media_dir": media_dir, "srt_dir": srt_dir}.items() if v is not None}
    try:
        tasks = load_tasks(path, fmt, **options)
    except TaskFileError as exc:
        _refuse(str(exc), dry_run, "tasks check", 1,
                f"  file: {exc.path}\n  record: {exc.record or '-'}\n  field: {exc.field or '-'}")
    except ValueError as exc:
        _refuse(str(exc), dry_run, "tasks check", 1)
    if dry_run:
        _dry_report({"command": "tasks check", "path": str(path), "tasks": len(tasks),
                     "level": dict(Counter(t.level for t in tasks)),
                     "answer_type": dict(Counter(t.answer_type for t in tasks))})
        return
    print(f"ok: {len(tasks)} tasks in {path}")
    for title, counts in (
        ("level", Counter(t.level for t in tasks)),
        ("category", Counter(t.category for t in tasks)),
        ("answer type", Counter(t.answer_type for t in tasks)),
        ("source", Counter(t.source for t in tasks)),
    ):
        print(f"{title}: " + ", ".join(f"{k}={counts[k]}" for k in sorted(counts)))
    print(f"assets: {sum(len(t.assets) for t in tasks)}, with a media file: "
          f"{sum(1 for t in tasks for a in t.assets if a.path)}, without an answer: "
          f"{sum(t.answer is None for t in tasks)}")


@app.command("split")
def split(
    path: Path = typer.Argument(..., help="benchmark file (OmniGAIA test_metadata.json, WorldSense, JSONL, ...)"),
    folds: int = typer.Option(5, "--folds", min=2, help="number of folds"),
    seed: int = typer.Option(0, "--seed", help="shuffle seed (same seed, same folds)"),
    out: Path = typer.Option(..., "--out", help="output folder: folds.json, fold-i/{test,train}_ids.json"),
    fmt: str = typer.Option("auto", "--format", "-f", help="auto, jsonl, omnigaia, worldsense or synthetic"),
    replace: ReplaceOption = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="check --out, load the tasks and deal the folds as the run "
                                                          "does; print the fold sizes and the files it would write; "
                                                          "write nothing"),
) -> None:
    """Split a benchmark's tasks into k disjoint folds by task id (every task in exactly one fold), for k-fold
    training and evaluation: collect/train on `fold-i/train_ids.json`, evaluate on `fold-i/test_ids.json`
    (recipe field `tasks.ids_file`)."""
    try:
        if dry_run:  # the run's own output check, loading and dealing, then nothing written
            check_output(out, [path], replace=replace)
            doc = plan_folds(path, fmt, folds, seed)
            print(json.dumps({"command": "tasks split", "dry_run": True, "tasks": doc["tasks"], "sizes": doc["sizes"],
                              "would_write": [str(f) for f in fold_files(out, folds)]}, indent=2), file=report_out())
            return
        with staged_output(out, [path], command="tasks split", replace=replace) as tmp:
            doc = write_folds(path, fmt, folds, seed, tmp)
    except (TaskFileError, ValueError) as exc:  # OutputError is a ValueError
        _refuse(str(exc), dry_run, "tasks split", 1)
    print(f"{doc['tasks']} tasks of {path} in {folds} folds (seed {seed}), sizes {doc['sizes']} -> {out}")
