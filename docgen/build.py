"""Render every reference page and write them (only when one changed, so a watching server does not loop).

    python -m docgen
"""

from __future__ import annotations

from pathlib import Path

from docgen import bench_ref, changelog_ref, cli_ref, recipe_ref, reward_ref, schema_ref
from docgen.common import Page


def render_all() -> list[Page]:
    return [cli_ref.render(), recipe_ref.render(), schema_ref.render(), reward_ref.render(), bench_ref.render(),
            changelog_ref.render()]


def generate(docs: Path | None) -> tuple[list[Page], list[str]]:
    """Render the pages; with `docs`, write each to docs/<page.path>. Returns the pages and every problem."""
    pages = render_all()
    if docs is not None:
        for page in pages:
            path = docs / page.path
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_file() or path.read_text("utf-8") != page.text:
                path.write_text(page.text, "utf-8")
    return pages, [problem for page in pages for problem in page.problems]
