"""The generated references hold every command, option and recipe field, each with its doc string, and the
generator fails on one without: `python -m docgen` (run by `make docs`) exits 1 naming it.

    pytest -q tests/docs/test_reference.py
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import typer

from docgen import cli_ref, recipe_ref, schema_ref
from docgen.build import render_all


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    rendered = render_all()
    problems = [p for page in rendered for p in page.problems]
    assert not problems, "undocumented (add the doc string in the code):\n" + "\n".join(problems)
    return {page.path: page.text for page in rendered}


def _section(text: str, heading: str) -> str:
    """The text of a `## heading` section (up to the next `## `)."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_every_command_and_option_is_in_the_cli_reference_with_its_help(pages):
    text = pages["reference/cli.md"]
    commands = [(path, cmd) for path, cmd in cli_ref.walk(cli_ref.root()) if path]
    assert len(commands) >= 25, [p for p, _ in commands]  # every stage is mounted
    for path, cmd in commands:
        section = _section(text, " ".join(path))
        assert cli_ref.command_help(cmd) and cli_ref.command_help(cmd) in section, path
        for param in cli_ref.params(cmd):
            help_text = cli_ref.param_help(param)
            assert help_text, f"omnidecision {' '.join(path)} {cli_ref.param_names(param)}: no help text"
            row = next((line for line in section.splitlines() if line.startswith(f"| `{cli_ref.param_names(param)}`")),
                       None)
            assert row is not None, f"omnidecision {' '.join(path)}: {cli_ref.param_names(param)} is not listed"


def test_every_recipe_field_is_in_the_recipe_reference_with_its_doc(pages):
    text = pages["reference/recipes.md"]
    fields = recipe_ref.all_fields()
    # the project's recipes: TRL subclasses for sft/grpo/judge, the pydantic models for collect, eval and the rest
    for name in ("omnidecision.sft.config.PlannerSFTConfig", "omnidecision.rl.config.PlannerGRPOConfig",
                 "omnidecision.rl.config.GRPOScriptArguments", "omnidecision.pipeline.experiment.ExperimentRecipe",
                 "omnidecision.onpolicy.rounds.RoundsRecipe"):
        assert fields.get(name), name
    assert any(name.endswith(".CollectRecipe") for name in fields) and any(n.endswith(".EvalRecipe") for n in fields)
    for cls_name, names in fields.items():
        section = text[text.index(f"\n### {cls_name.rsplit('.', 1)[1]}\n"):]
        section = section[:section.find("\n### ", 1) if "\n### " in section[1:] else None]
        for field in names:
            row = next((line for line in section.splitlines() if line.startswith(f"| `{field}` |")), None)
            assert row is not None, f"{cls_name}.{field} is not in the recipe reference"
            assert "(no doc string)" not in row and row.rstrip(" |").rsplit("|", 1)[1].strip(), row


def test_only_the_projects_own_trl_fields_are_listed():
    """A TRL config subclass lists the fields the project declares or overrides, not TRL's hundreds."""
    import trl

    from omnidecision.rl.config import PlannerGRPOConfig

    ours = {f.name for f in recipe_ref.dataclass_fields(PlannerGRPOConfig)}
    theirs = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    assert ours and len(ours) < len(theirs) / 3
    assert "learning_rate" not in ours or "learning_rate" in PlannerGRPOConfig.__dict__.get("__annotations__", {})


def test_every_schema_field_is_documented(pages):
    text = pages["reference/schemas.md"]
    fields = schema_ref.all_fields()
    assert {"omnidecision.protocol.records.RunRecord", "omnidecision.protocol.rows.SFTRow",
            "omnidecision.protocol.rows.RLRow"} <= set(fields)
    from omnidecision.protocol.rows import RL_COLUMNS, SFT_COLUMNS

    assert set(SFT_COLUMNS) <= set(fields["omnidecision.protocol.rows.SFTRow"])
    assert set(RL_COLUMNS) <= set(fields["omnidecision.protocol.rows.RLRow"])
    for cls_name, names in fields.items():
        for field in names:
            assert re.search(rf"^\| `{field}` \| .* \| [^|*\s][^|]* \|$", text, re.M), f"{cls_name}.{field}"


def test_an_undocumented_option_and_field_fail_the_build():
    """The generator reports what has no doc string: a command option without help, a recipe field without one."""
    from pydantic import BaseModel, Field

    app = typer.Typer()

    @app.command()
    def run(documented: int = typer.Option(1, help="has help"), bare: int = typer.Option(2)) -> None:
        """A command."""

    @app.command()
    def other() -> None:  # no docstring: the command has no help either
        pass

    page = cli_ref.render(typer.main.get_command(app))
    assert any("--bare has no help text" in p for p in page.problems), page.problems
    assert any("`omnidecision other` has no help text" in p for p in page.problems), page.problems
    assert not any("--documented" in p for p in page.problems)

    class Recipe(BaseModel):
        """A recipe.

        Attributes:
            in_docstring: documented in the class docstring
        """

        described: int = Field(1, description="documented by its description")
        in_docstring: int = 2
        attribute: int = 3
        """documented by the string under it"""
        bare: int = 4

    rows = {row.name: row.doc for row, _ in recipe_ref.model_fields(Recipe)}
    assert rows == {"described": "documented by its description", "in_docstring": "documented in the class docstring",
                    "attribute": "documented by the string under it", "bare": ""}
    problems: list[str] = []
    recipe_ref._table([row for row, _ in recipe_ref.model_fields(Recipe)], "test recipe", problems)
    assert problems == ["test recipe: field `bare` (declared in Recipe) has no doc string"]


def test_docgen_exits_1_naming_the_undocumented(monkeypatch, capsys):
    import docgen.__main__ as entry
    from docgen.common import Page

    monkeypatch.setattr(entry, "generate", lambda out: ([Page("reference/x.md", "", ["field `y` has no doc"])],
                                                        ["field `y` has no doc"]))
    assert entry.main(["--check"]) == 1
    assert "field `y` has no doc" in capsys.readouterr().err


def test_docgen_doctests():
    import doctest

    import docgen.cli_ref
    import docgen.common
    import docgen.recipe_ref

    for module in (docgen.common, docgen.recipe_ref, docgen.cli_ref):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
    assert doctest.testmod(docgen.common).attempted >= 4
