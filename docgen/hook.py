"""MkDocs hook (mkdocs.yml `hooks:`): generate the reference pages before Material for MkDocs reads the docs
folder, and fail the build on an undocumented command, option or field; after the build, write the search index as
a script so that search works from disk (docgen/offline.py). Zensical does not run hooks; `make docs` runs
`python -m docgen` before `zensical build` and `python -m docgen.offline site` after it.

    mkdocs build --strict
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def on_pre_build(config: Any) -> None:
    if str(ROOT) not in sys.path:  # mkdocs loads this file by path: make `docgen` and `omnidecision` importable
        sys.path.insert(0, str(ROOT))
    from mkdocs.exceptions import PluginError

    from docgen.build import generate

    _, problems = generate(Path(config["docs_dir"]))
    if problems:
        raise PluginError("undocumented items (add the doc string in the code):\n" + "\n".join(problems))


def on_post_build(config: Any) -> None:
    from docgen.offline import write_search_scripts

    write_search_scripts(Path(config["site_dir"]))
