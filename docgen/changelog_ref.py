"""The changelog page: CHANGELOG.md as it stands, under the package version the site documents.

    python -m docgen   # writes docs/reference/changelog.md
"""

from __future__ import annotations

import tomllib

from docgen.common import ROOT, Page


def version() -> str:
    """The version in pyproject.toml (what `pip install` of this checkout reports)."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["version"]


def render() -> Page:
    text = (ROOT / "CHANGELOG.md").read_text("utf-8")
    body = text.split("\n", 1)[1] if text.startswith("# ") else text  # the page's own title replaces the file's
    head = (f"# Changelog\n\nThis site documents **omnidecision {version()}** (`pyproject.toml`), with the changes "
            "since that release under *Unreleased*. The page is `CHANGELOG.md` of the repository, copied at every "
            "`make docs`.\n")
    return Page("reference/changelog.md", head + body)
