"""An offline HTML viewer of trajectories and ledger evolution: `omnidecision view RUNS... --out DIR`.

RUNS are trajectory files, collection folders or eval folders (with report.json and plots). The site is static
(jinja2 templates, a little plain JS, no network): open DIR/index.html in a browser.

    omnidecision view runs/eval-teacher runs/eval-react --out runs/view
    python -c "from omnidecision.view import write_view; write_view(['runs/eval-teacher'], 'runs/view')"
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from omnidecision.view.load import load
from omnidecision.view.render import write_site

logger = logging.getLogger(__name__)


def write_view(eval_dirs: Iterable[str | Path], out_dir: str | Path, *, title: str = "omnidecision runs",
               figures: Iterable[str | Path] = (), pages: bool = True) -> Path:
    """Render the runs of `eval_dirs` (eval or collection folders, or JSONL files) into `out_dir`; returns the
    path of index.html. Unreadable lines are logged as warnings (file:line) and listed on the index page.
    `figures` head the index; `pages=False` rewrites the index only (render.write_site)."""
    collection = load(list(eval_dirs))
    for problem in collection.problems:
        logger.warning("view: %s", problem)
    return write_site(collection, out_dir, title=title, figures=[Path(f) for f in figures], pages=pages)


__all__ = ["write_view"]
