"""`omnidecision view RUNS... --out DIR`: an offline HTML site of runs, mounted by `omnidecision/cli.py`.

    omnidecision view runs/eval-teacher --out runs/view              # an eval folder: report figures, plots, runs
    omnidecision view runs/synth-teacher runs/eval-a/trajectories.jsonl --out runs/view
    omnidecision view runs/ablate --out runs/view-ablate             # a folder of eval folders: side-by-side pages
    omnidecision view runs/demo/eval/*/test --figure runs/demo/contrasts.png --out runs/view   # a figure on the index

Unreadable lines are printed as `file:line: reason` (stderr) and listed on the index; the readable runs are
rendered. Exit code 2 when there is no readable run at all.
"""

from __future__ import annotations

import logging
from pathlib import Path

import typer


def view(
    runs: list[Path] = typer.Argument(..., help="trajectory JSONL files, collection folders or eval folders"),
    out: Path = typer.Option(Path("runs/view"), "--out", help="folder for the site (index.html inside)"),
    title: str = typer.Option("omnidecision runs", help="title of the index page"),
    figure: list[Path] = typer.Option([], "--figure", help="a PNG shown at the top of the index (repeatable), e.g. "
                                      "a run's forest plot of its planned contrasts"),
) -> None:
    """Write a static, offline HTML view of runs: index with filters, one page per run, side-by-side pages."""
    from omnidecision.view.load import load
    from omnidecision.view.render import write_site

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    missing = [str(f) for f in figure if not f.is_file()]
    if missing:  # before the pages are written: a mistyped figure should not cost the render
        raise typer.BadParameter(f"no such file: {', '.join(missing)}", param_hint="--figure")
    collection = load([str(p) for p in runs])
    for problem in collection.problems:
        typer.echo(f"warning: {problem}", err=True)
    if collection.n_runs == 0:
        typer.echo("error: no readable run in " + ", ".join(str(p) for p in runs), err=True)
        raise typer.Exit(2)
    index = write_site(collection, out, title=title, figures=figure)
    skipped = f"; {len(collection.problems)} unreadable line(s) skipped" if collection.problems else ""
    typer.echo(f"{collection.n_runs} runs from {len(collection.sources)} source(s){skipped} → {index}")
