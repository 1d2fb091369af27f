"""`omnidecision view RUNS... --out DIR`: an offline HTML site of runs, mounted by `omnidecision/cli.py`.

    omnidecision view runs/eval-teacher --out runs/view              # an eval folder: report figures, plots, runs
    omnidecision view runs/synth-teacher runs/eval-a/trajectories.jsonl --out runs/view
    omnidecision view runs/ablate --out runs/view-ablate             # a folder of eval folders: side-by-side pages
    omnidecision view runs/demo/eval/*/test --figure runs/demo/contrasts.png --out runs/view   # a figure on the index

Unreadable lines are printed as `file:line: reason` (stderr) and listed on the index; the readable runs are
rendered. Exit code 2 when there is no readable run at all, or --out is one of the runs (or holds or lies inside
one), or a non-empty folder this project did not write (`--replace`). `--dry-run`: the same checks, nothing
written.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import typer

from omnidecision.options import ReplaceOption
from omnidecision.outputs import check_output, report_out, staged_output
from omnidecision.protocol.redaction import redact_text
from omnidecision.view.load import Collection, load
from omnidecision.view.render import write_site


def view(
    runs: list[Path] = typer.Argument(..., help="trajectory JSONL files, collection folders or eval folders"),
    out: Path = typer.Option(Path("runs/view"), "--out", help="folder for the site (index.html inside)"),
    title: str = typer.Option("omnidecision runs", help="title of the index page"),
    figure: list[Path] = typer.Option([], "--figure", help="a PNG shown at the top of the index (repeatable), e.g. "
                                      "a run's forest plot of its planned contrasts"),
    replace: ReplaceOption = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="check --out and the figures, read every run as the run "
                                 "does; print what the site would show as JSON; write nothing"),
) -> None:
    """Write a static, offline HTML view of runs: index with filters, one page per run, side-by-side pages. The
    site is written whole (a temporary sibling renamed into place), never over a run it reads or a folder this
    project did not write (unless --replace)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        collection = view_inputs(runs, out, figure, replace)
    except ValueError as exc:
        if dry_run:
            _dry_report({"command": "view", "error": str(exc)})
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    skipped = f"; {len(collection.problems)} unreadable line(s) skipped" if collection.problems else ""
    if dry_run:  # the run's own checks and reading, then nothing written
        _dry_report({"command": "view", "runs": collection.n_runs, "sources": [s.label for s in collection.sources],
                     "unreadable_lines": collection.problems, "would_write": str(out / "index.html")})
        return
    with staged_output(out, [*runs, *figure], command="view", replace=replace) as tmp:
        write_site(collection, tmp, title=title, figures=figure)
    typer.echo(f"{collection.n_runs} runs from {len(collection.sources)} source(s){skipped} → {out / 'index.html'}")


def view_inputs(runs: list[Path], out: Path, figure: list[Path], replace: bool) -> Collection:
    """What `view` checks and reads before it writes, and its dry run reports: --out (`outputs.check_output`:
    never a run it reads, a folder holding one or inside one; never a foreign folder unless `replace`), the
    figures (before the pages: a mistyped figure should not cost the render), every run; the unreadable lines are
    warned about on stderr. A ValueError names what is wrong (no readable run at all is one)."""
    check_output(out, [*runs, *figure], replace=replace)
    missing = [str(f) for f in figure if not f.is_file()]
    if missing:
        raise ValueError(f"--figure: no such file: {', '.join(missing)}")
    collection = load([str(p) for p in runs])
    for problem in collection.problems:
        typer.echo(f"warning: {problem}", err=True)
    if collection.n_runs == 0:
        raise ValueError("no readable run in " + ", ".join(str(p) for p in runs))
    return collection


def _dry_report(doc: dict) -> None:
    """A dry run's JSON report on the stream held for it (`outputs.report_out`: stdout alone)."""
    print(redact_text(json.dumps({"dry_run": True, **doc}, indent=2, default=str)), file=report_out())
