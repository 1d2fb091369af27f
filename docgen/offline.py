"""Make a built site searchable from disk (file://): write the search index as a script beside the JSON index.

Opened as file://, the theme loads its search index with a <script> tag (`search.js`, defining `__index`) instead
of fetching `search.json`, which a browser refuses there; neither builder writes that script without the `offline`
plugin, and that plugin adds a script from unpkg.com. This writes it for Zensical (`search.json` → `search.js`) and
for Material for MkDocs (`search/search_index.json` → `search/search_index.js`); `docs/javascripts/file-worker.js`
(mkdocs.yml `extra.polyfills`) runs the search worker where a browser will not start one from disk. `make docs`
runs it after `zensical build`; docgen/hook.py runs it after `mkdocs build`.

    python -m docgen.offline site
"""

from __future__ import annotations

import argparse
from pathlib import Path

INDEXES = ("search.json", "search/search_index.json")


def write_search_scripts(site: Path) -> list[Path]:
    """Write `<index>.js` (`var __index = <index>;`) beside each search index of `site`; return what was written."""
    written = []
    for rel in INDEXES:
        index = site / rel
        if index.is_file():
            script = index.with_suffix(".js")
            script.write_text(f"var __index = {index.read_text('utf-8')};\n", "utf-8")
            written.append(script)
    if not written:
        raise FileNotFoundError(f"{site}: no search index ({' or '.join(INDEXES)}); build the site first")
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", type=Path, nargs="?", default=Path("site"), help="the built site folder")
    args = ap.parse_args(argv)
    for path in write_search_scripts(args.site):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
