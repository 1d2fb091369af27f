"""The README is the front door (issue 56): its headline figures are its result file's, its links resolve, its
command table names every command of the CLI, CI runs the test command it gives, and every `omnidecision` command
written in the user-facing pages parses with the CLI (the cluster guide's and the README quick start's are also dry
run: tests/cluster/test_docs_commands.py).

    pytest -q tests/docs/test_front_door.py
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.cluster.test_docs_commands import _parse_only, bash_blocks

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")
HEADLINE = "docs/results/sft-sized.json"
# the pages a user copies commands from (the cluster guide's commands are dry run by tests/cluster)
USER_PAGES = ["README.md", "docs/getting-started.md", *sorted(p.relative_to(ROOT).as_posix()
                                                             for p in (ROOT / "docs" / "guide").glob("*.md"))]


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _signed(x: float) -> str:
    return f"{x:+.3f}".replace("+-", "-")


def _cells(data: dict) -> dict[str | None, dict]:
    """The pooled results a headline quotes, by the N of teacher-run tasks its sentences name (None: one
    experiment's file, which names no N)."""
    return dict(data["by_n"]) if data.get("kind") == "teacher-curve" else {None: data}


def _parts(text: str, cells: dict[str | None, dict]) -> list[tuple[str | None, str]]:
    """The section cut where it names an N (`N = 15`): each piece's figures are that N's. A file of one experiment,
    or a curve of one N named as `SFT on N teacher-run tasks`, is one piece."""
    if None in cells:
        return [(None, text)]
    pieces = re.split(r"\bN = (\d+)\b", text)
    if len(pieces) == 1:
        (n,) = cells  # one N, named once
        assert f"SFT on {n} teacher-run tasks" in text, "a headline from a curve names the N it quotes"
        return [(n, text)]
    assert not re.findall(r"\d\.\d{3}", pieces[0]), "a figure before the headline names its N"
    parts = list(zip(pieces[1::2], pieces[2::2], strict=True))
    assert all(n in cells for n, _ in parts), ([n for n, _ in parts], sorted(cells))
    return parts


def test_the_readme_headline_is_its_result_files():
    """Every figure of the "Current result" section: the file's means (`ARM 0.xxx [low, high]`), its planned
    contrasts (`b − a +0.xxx [low, high]`), each of the N its sentence names where the file is a curve, its starts,
    replicates and test tasks; and nothing else is quoted there."""
    section = _section(README, "## Current result")
    assert HEADLINE in section and "docs/research/index.md" in section
    assert len([line for line in section.splitlines()[1:] if line.strip()]) <= 5, "the headline is at most 5 lines"
    cells = _cells(json.loads((ROOT / HEADLINE).read_text("utf-8")))
    text = " ".join(section.split())
    quoted, used = 0, []
    for n, part in _parts(text, cells):
        c = cells[n]["contrasts"]
        here = 0
        for arm, value, low, high in re.findall(r"\b(\w+) (\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\]", part):
            m = c["means"][arm]
            assert (value, low, high) == (f"{m['estimate']:.3f}", f"{m['low']:.3f}", f"{m['high']:.3f}"), (n, arm)
            here += 1
        for b, a, value, low, high in re.findall(
                r"\b(\w+) − (\w+) ([+-]\d\.\d{3}) \[([+-]\d\.\d{3}), ([+-]\d\.\d{3})\]", part):
            m = c["planned"][f"{b}-{a}"]
            assert (value, low, high) == (_signed(m["estimate"]), _signed(m["low"]), _signed(m["high"])), \
                (n, f"{b} − {a}")
            here += 1
        # every decimal figure in the piece is one the checks above read
        assert len(re.findall(r"[+-]?\d\.\d{3}", part)) == 3 * here, (n, part)
        quoted += here
        used.append(c)
    assert quoted >= 4, "the headline quotes the SFT planner, the teacher and two contrasts"
    starts = {m["n_starts"] for c in used for m in c["means"].values()}
    tasks = {m["n_tasks"] for c in used for m in c["means"].values()}
    assert f"{starts.pop()} SFT starts" in text and f"{tasks.pop()} test tasks" in text and not starts and not tasks
    # the RL arms' replicates (a contrast of two SFT planners, sft − sft_fixed, has one per start)
    replicates = {len({r["replicate"] for r in m["per_replicate"]}) for c in used for m in c["planned"].values()
                  if m.get("per_replicate")} - {1}
    assert len(replicates) == 1, replicates
    assert f"× {replicates.pop()} RL replicates" in text


def test_a_figure_of_another_n_is_caught(monkeypatch):
    """A curve's headline names the N of each figure: the same figures under swapped N fail."""
    ns = re.findall(r"\bN = (\d+)\b", _section(README, "## Current result"))
    assert len(set(ns)) >= 2, "the headline quotes a curve at two N"
    a, b = ns[0], next(n for n in ns if n != ns[0])
    bad = README.replace(f"N = {a}", "N = @", 1).replace(f"N = {b}", f"N = {a}", 1).replace("N = @", f"N = {b}", 1)
    assert bad != README
    monkeypatch.setitem(test_the_readme_headline_is_its_result_files.__globals__, "README", bad)
    with pytest.raises(AssertionError):
        test_the_readme_headline_is_its_result_files()


def test_a_changed_headline_figure_is_caught(monkeypatch):
    section = _section(README, "## Current result")
    first = re.search(r"\b\w+ (\d\.\d{3}) \[\d\.\d{3}, \d\.\d{3}\]", section)
    assert first is not None, "the headline quotes a mean"
    value = first[1]
    changed = first[0].replace(value, f"{float(value) + 0.001:.3f}", 1)
    bad = README.replace(first[0], changed, 1)
    assert bad != README
    monkeypatch.setitem(test_the_readme_headline_is_its_result_files.__globals__, "README", bad)
    with pytest.raises(AssertionError):
        test_the_readme_headline_is_its_result_files()


def test_every_readme_link_resolves():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 15
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


def test_the_readme_command_table_names_every_command():
    import typer.main

    from omnidecision.cli import app

    table = _section(README, "## Commands")
    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():
        subs = list(getattr(cmd, "commands", {}) or {})
        row = next((line for line in table.splitlines() if line.startswith(f"| `omnidecision {name}")), None)
        assert row is not None, f"the README's command table has no row for `omnidecision {name}`"
        assert all(s in row for s in subs), (name, subs, row)


def test_ci_runs_the_readme_test_command_and_builds_the_docs():
    setup = _section(README, "## Set-up")
    assert re.search(r"^make test\b", "\n".join(bash_blocks(setup)), re.M), "the README gives `make test`"
    ci = [line.split("#")[0].strip() for line in (ROOT / ".ci" / "run").read_text("utf-8").splitlines()]
    assert "make test" in ci and "make docs" in ci
    makefile = (ROOT / "Makefile").read_text("utf-8")
    assert re.search(r"^docs: install\n\t\$\(BIN\)/python -m docgen\n\t\$\(BIN\)/zensical build --strict", makefile,
                     re.M)
    assert '".[train,media,report,dev,docs]"' in makefile


def documented_commands(text: str) -> list[list[str]]:
    """Every `omnidecision ...` command of the page's bash blocks, as argument lists (comments dropped)."""
    out = []
    for block in bash_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value before the command
                words = words[1:]
            if words[:1] == ["omnidecision"]:
                out.append(words[1:])
    return out


@pytest.mark.parametrize("page", USER_PAGES)
def test_every_command_on_a_user_page_parses(page):
    commands = documented_commands((ROOT / page).read_text("utf-8"))
    if page != "docs/guide/view.md":
        assert commands or page == "docs/guide/testbed.md", f"{page}: no command found"
    for args in commands:
        try:
            _parse_only(args)
        except Exception as exc:
            raise AssertionError(f"{page}: `omnidecision {shlex.join(args)}` does not parse: {exc}") from exc


def test_a_wrong_option_on_a_page_is_caught():
    with pytest.raises(Exception):  # noqa: B017  (click's UsageError/NoSuchOption, from Typer's copy)
        _parse_only(["harvest", "runs/collect", "--out", "data/harvest", "--no-such-option"])
    with pytest.raises(AssertionError):
        _parse_only(["tasks", "synthesize", "--n", "3"])
