"""Phases hand each other typed objects, not eight loose parameters (DESIGN.md §6). No function in `omnidecision/`
takes `LIMIT` (8) parameters or more, counted from its signature: `self`/`cls` of a method not counted, `*args` and
`**kwargs` one each. Two kinds of function may:

- the command functions the command line mounts (each option of a command is a parameter: Typer reads them from the
  signature), read from the app (`omnidecision/cli.py`'s mount table, every command and group callback), not listed;
- the entries of `REASONS`, each with why its parameters stay loose. An entry that no longer needs to be there fails
  too (the list stays honest).

    python tests/architecture/test_signatures.py      # every function at or over the limit, with its count
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import typer

from omnidecision.cli import app
from tests.architecture.test_flag_spelling import commands

PACKAGE = Path(__file__).resolve().parents[2] / "omnidecision"
LIMIT = 8
# "module:qualified name" -> why it keeps LIMIT parameters or more
REASONS: dict[str, str] = {
    "omnidecision.launch:launch_stage":
        "the body every stage command calls: the stage, its arguments, its entry and check, and the three launcher "
        "options (declared once in launch.py) each command passes by keyword from its own signature",
    "omnidecision.modeling:generate_decisions":
        "keyword-only decoding options, one per `generate` argument it passes (do_sample, num_return_sequences, "
        "temperature, top_p, top_k, max_new_tokens): each caller names the few it sets",
    "omnidecision.provenance:record_training":
        "the fields of the Provenance record it writes, by keyword (each trained stage passes those it has); the "
        "typed record is what it builds",
    "omnidecision.protocol.rows:rl_row": "the fields of the RLRow it builds and validates, by keyword",
    "omnidecision.protocol.rows:sft_row": "the fields of the SFTRow it builds and validates, by keyword",
    "omnidecision.rewards.llm_judge:RewardJudge.from_options":
        "the `judge_*` options of a GRPO recipe, one keyword each, as the recipe spells them",
    "omnidecision.serving.vllm_server:VLLMServer.__init__":
        "the server's settings, one keyword per vLLM flag or process setting that `serve` and an eval recipe's "
        "`serve:` block pass",
    "omnidecision.synthetic.tiny:build_tiny_planner":
        "the tiny model's size fields (hidden, layers, heads, ...) by keyword, as the transformers config takes them",
    "omnidecision.synthetic.tiny_vlm:build_tiny_vlm":
        "the tiny VLM's size fields (hidden, layers, heads, image and patch size, ...) by keyword, as its config "
        "takes them",
    "omnidecision.tasks.synth:web_hop":
        "one step of the synthetic suite's builder: the build, the entity and its kind, and the switches that shape "
        "the fact (fillable, conflict, settle_in_frame), each a keyword",
}


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> int:
    """Parameters of a signature: `self`/`cls` of a method left out, `*args` and `**kwargs` one each."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    if method and positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    return len(positional) + len(args.kwonlyargs) + (args.vararg is not None) + (args.kwarg is not None)


def _functions(tree: ast.AST, prefix: str = "", in_class: bool = False):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, prefix + node.name, in_class
            yield from _functions(node, f"{prefix}{node.name}.", False)
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.", True)
        else:
            yield from _functions(node, prefix, in_class)


def long_signatures(package: Path = PACKAGE, limit: int = LIMIT) -> dict[str, tuple[str, int]]:
    """"module:qualname" -> (path:line, parameter count) for every function of `package` with `limit` or more."""
    found: dict[str, tuple[str, int]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node, qualname, method in _functions(ast.parse(path.read_text("utf-8"), str(path))):
            n = parameter_count(node, method)
            if n >= limit:
                found[f"{module}:{qualname}"] = (f"{path.relative_to(package.parent)}:{node.lineno}", n)
    return found


def mounted_functions(root: typer.Typer = app) -> set[str]:
    """"module:qualname" of every function the command line runs as a command or a group's callback."""
    found = set()
    for cmd in commands(root).values():
        fn = inspect.unwrap(cmd.callback)  # Typer wraps each command function (functools.update_wrapper)
        found.add(f"{fn.__module__}:{fn.__qualname__}")
    return found


def test_no_function_takes_eight_parameters_or_more():
    mounted = mounted_functions()
    over = {k: v for k, v in long_signatures().items() if k not in mounted and k not in REASONS}
    listing = "\n".join(f"  {where} {k}: {n}" for k, (where, n) in sorted(over.items()))
    assert not over, (f"functions with {LIMIT} parameters or more (hand them a typed record, or list them in "
                      f"REASONS with why):\n{listing}")


def test_every_reason_is_still_needed():
    found, mounted = long_signatures(), mounted_functions()
    stale = sorted(k for k in REASONS if k not in found or k in mounted)
    assert not stale, f"REASONS lists functions under {LIMIT} parameters (or commands): remove {stale}"


def test_the_count_and_the_commands_are_read_right():
    """The test of the test: a planted signature is counted as the rule says, and the mounted commands are found."""
    source = ("def f(a, b, /, c, *args, d, e=1, **kwargs): ...\n"
              "class C:\n    def m(self, a, b, c, d, e, f, g): ...\n    @classmethod\n    def k(cls, *, a): ...\n")
    counted = {q: parameter_count(n, m) for n, q, m in _functions(ast.parse(source))}
    assert counted == {"f": 7, "C.m": 7, "C.k": 1}
    mounted = mounted_functions()
    assert {"omnidecision.collect.cli:harvest", "omnidecision.eval.cli:eval_cmd"} <= mounted
    assert "omnidecision.cli:version" in mounted and len(mounted) >= 28


if __name__ == "__main__":
    commands_run = mounted_functions()
    for key, (where, n) in sorted(long_signatures().items(), key=lambda kv: -kv[1][1]):
        print(f"{n:>3}  {where}  {key}" + ("  (command)" if key in commands_run else "  (listed)" if key in REASONS
                                           else ""))
