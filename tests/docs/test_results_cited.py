"""Every file under docs/results/ (recursively) is cited by a page: a .md file under docs/ or README.md names it as
`results/<its path under docs/results>`. A result file no page cites is a figure nobody can find; delete it (git
keeps it) or cite it from the page that reads it.

    pytest -q tests/docs/test_results_cited.py
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pages(root: Path) -> list[Path]:
    return sorted([*(root / "docs").rglob("*.md"), root / "README.md"])


def uncited(root: Path) -> list[str]:
    """The paths under root/docs/results that no page of `root` names."""
    text = "\n".join(p.read_text("utf-8") for p in pages(root) if p.is_file())
    results = root / "docs" / "results"
    files = sorted(p.relative_to(results).as_posix() for p in results.rglob("*") if p.is_file())
    return [f for f in files if f"results/{f}" not in text]


def test_every_result_file_is_cited_by_a_page():
    assert (ROOT / "docs" / "results").is_dir()
    missing = uncited(ROOT)
    assert not missing, f"docs/results/ files that no page under docs/ or README.md cites: {missing}"


def test_an_uncited_file_is_reported(tmp_path: Path):
    """A file in a subfolder that no page names is reported; one named by a nested page, or by README.md, is not."""
    (tmp_path / "docs" / "results" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "guide").mkdir()
    for name in ("cited.json", "sub/also.png", "sub/orphan.json", "readme.json"):
        (tmp_path / "docs" / "results" / name).write_text("{}")
    (tmp_path / "docs" / "guide" / "page.md").write_text("see `docs/results/cited.json` and ../results/sub/also.png\n")
    (tmp_path / "README.md").write_text("[x](docs/results/readme.json)\n")
    assert uncited(tmp_path) == ["sub/orphan.json"]
