"""The typed hand-offs of the training stages: one GRPO recipe record instead of three configs threaded through
every phase, the closure evaluation's decoding as one record, and no long parameter lists in rl, grounding,
onpolicy and sft (a command function, whose parameters are its options, excepted)."""

from __future__ import annotations

import ast
import warnings
from dataclasses import asdict
from pathlib import Path

import pytest

from omnidecision.rl.evaluate import ClosureDecoding

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rl", "grounding", "onpolicy", "sft")
MAX_PARAMETERS = 7  # a function that needs more takes a record (rl/config.py:GRPORecipe, ClosureDecoding, ...)


def _is_command(node: ast.FunctionDef) -> bool:
    """A Typer command: its parameters are declared with typer.Option / typer.Argument."""
    defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    return any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and isinstance(d.func.value, ast.Name)
               and d.func.value.id == "typer" for d in defaults)


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters of a function: `self`/`cls` not counted, `*args` and `**kwargs` one each.

    >>> parameter_count(ast.parse("def f(self, a, *b, c, **d): pass").body[0])
    4
    """
    a = node.args
    names = [*a.posonlyargs, *a.args]
    n = len(names) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    return n - (1 if names and names[0].arg in ("self", "cls") else 0)


def long_parameter_lists(root: Path = ROOT / "omnidecision") -> list[str]:
    out = []
    for package in PACKAGES:
        for path in sorted((root / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_command(node) \
                        and (n := parameter_count(node)) > MAX_PARAMETERS:
                    out.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: {n} parameters")
    return out


def test_no_long_parameter_lists_in_the_training_stages():
    assert long_parameter_lists() == []


def test_the_check_catches_a_planted_long_list(tmp_path):
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "planted.py").write_text("def f(a, b, c, d, e, f, g, *, h=1): pass\n", "utf-8")
    assert long_parameter_lists(tmp_path) == ["rl/planted.py:1 f: 8 parameters"]


@pytest.fixture(scope="module")
def recipe():
    from omnidecision.rl.config import GRPORecipe, parse_args

    return GRPORecipe(*parse_args(["--config", str(ROOT / "configs/grpo/tiny-cpu.yaml"), "--output_dir", "/tmp/x",
                                   "--eval_closure_mode", "sampled", "--eval_closure_samples", "3"]))


def test_the_recipe_derives_the_evaluations_decoding_once(recipe):
    script, training = recipe.script, recipe.training
    assert recipe.decoding == ClosureDecoding(
        mode="sampled", samples=3, temperature=training.temperature, seed=training.seed,
        max_new_tokens=training.max_completion_length, batch_size=script.eval_batch_size,
        weights=script.closure_weights, gate_on_tool=script.closure_gate_on_tool,
        chat_template_kwargs=training.chat_template_kwargs)
    assert str(recipe.out) == "/tmp/x" and set(recipe.as_dict()) == {"script", "model", "training"}


def test_the_old_phase_helpers_warn_and_give_the_same(recipe):
    from omnidecision.rl import train

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kwargs = train.closure_eval_kwargs(recipe.script, recipe.training, "TOKENIZER")
        card = train.run_recipe(recipe.script, recipe.training, recipe.model)
    assert [w.category for w in caught] == [DeprecationWarning, DeprecationWarning]
    assert kwargs == {"n": recipe.script.eval_closure_n, "tokenizer": "TOKENIZER", **asdict(recipe.decoding)}
    assert card == recipe.as_dict()
