"""`omnidecision tasks …`: task-suite commands.

    omnidecision tasks synth --n 500 --seed 0 --out runs/synth
    omnidecision tasks split data/omnigaia/test_metadata.json --folds 5 --seed 0 --out data/omnigaia/folds [--dry-run]
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True,
                  help="Task suites: generate the synthetic suite, check task files, split a benchmark into folds.")


@app.command("synth")
def synth(
    n: int = typer.Option(500, "--n", min=1, help="number of tasks"),
    seed: int = typer.Option(0, "--seed", help="random seed (same seed, byte-identical output)"),
    out: Path = typer.Option(..., "--out", help="output folder: tasks.jsonl, corpus.jsonl, assets/"),
) -> None:
    """Write the seeded synthetic closure suite (multi-hop tasks across modalities) to OUT."""
    from collections import Counter

    from omnidecision.tasks.synth import FAMILIES, load_suite, write_suite

    path = write_suite(n, seed, out)
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


@app.command("check")
def check(
    path: Path = typer.Argument(..., help="task file or folder (JSONL, OmniGAIA, WorldSense, synthetic dir)"),
    fmt: str = typer.Option("auto", "--format", "-f", help="auto, jsonl, omnigaia, worldsense or synthetic"),
    media_dir: Path | None = typer.Option(None, "--media-dir", help="OmniGAIA: folder holding the media files"),
    srt_dir: Path | None = typer.Option(None, "--srt-dir", help="WorldSense: folder holding <video_id>.srt"),
) -> None:
    """Validate a task file and print counts per level, category and answer type.

    A bad record is reported with its file, record (line or key) and field; the exit code is then 1.
    """
    from collections import Counter

    from omnidecision.tasks.loaders import TaskFileError, format_names, load_tasks

    if fmt not in format_names():
        choices = ", ".join(format_names())
        raise typer.BadParameter(f"unknown format {fmt!r}; expected one of {choices}", param_hint="--format")
    options = {k: v for k, v in {"media_dir": media_dir, "srt_dir": srt_dir}.items() if v is not None}
    try:
        tasks = load_tasks(path, fmt, **options)
    except TaskFileError as exc:
        typer.echo(f"error: {exc}", err=True)
        typer.echo(f"  file: {exc.path}\n  record: {exc.record or '-'}\n  field: {exc.field or '-'}", err=True)
        raise typer.Exit(1) from exc
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
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
    dry_run: bool = typer.Option(False, "--dry-run", help="load the tasks and deal the folds as the run does; print "
                                                          "the fold sizes and the files it would write; write "
                                                          "nothing"),
) -> None:
    """Split a benchmark's tasks into k disjoint folds by task id (every task in exactly one fold), for k-fold
    training and evaluation: collect/train on `fold-i/train_ids.json`, evaluate on `fold-i/test_ids.json`
    (recipe field `tasks.ids_file`)."""
    import json

    from omnidecision.outputs import report_out
    from omnidecision.tasks.folds import fold_files, plan_folds, write_folds
    from omnidecision.tasks.loaders import TaskFileError

    try:
        if dry_run:  # the run's own loading and dealing, then nothing written
            doc = plan_folds(path, fmt, folds, seed)
            print(json.dumps({"command": "tasks split", "dry_run": True, "tasks": doc["tasks"], "sizes": doc["sizes"],
                              "would_write": [str(f) for f in fold_files(out, folds)]}, indent=2), file=report_out())
            return
        doc = write_folds(path, fmt, folds, seed, out)
    except (TaskFileError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    print(f"{doc['tasks']} tasks of {path} in {folds} folds (seed {seed}), sizes {doc['sizes']} -> {out}")
