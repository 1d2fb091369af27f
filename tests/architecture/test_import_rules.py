"""The import rules (docs/architecture.md, "Layers and import direction") as a table: for each package, the
`omnidecision.*` packages that importing it (and every module inside it) may load. Measured from `sys.modules` in a
fresh interpreter, so lazy imports inside functions do not count, but any module-level import (direct or through
another package) does. `python tests/architecture/test_import_rules.py` prints the table the doc shows.

Breaking a rule on purpose (e.g. `from omnidecision.agent import loop` at the top of
`omnidecision/rewards/checks.py`) makes `test_package_loads_only_what_it_may[rewards]` fail, naming the extra
package.

No import circles among the project's modules, read from the source (`ast`): a module imports another when any
`import`/`from … import` statement in it names that module (or a name inside it). Two graphs are checked: the
module-level imports (a circle there is an import-order failure waiting to happen) and every import, those inside
functions included: a lazy import that closes a circle defers the failure, it does not remove the knot (what one
module needs from the other belongs in a third, lower one). Moving `is_correct` back into `eval/report.py` (which
`eval/outcomes.py` reads) makes `test_no_import_circles[all]` fail, printing the circle.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

LEDGER = {"ledger"}
PROTOCOL = LEDGER | {"protocol"}
TASKS = PROTOCOL | {"tasks"}
TOOLS = TASKS | {"tools"}  # tools read task records
# package -> the omnidecision packages (and top-level modules) its modules may load at import time
ALLOWED: dict[str, set[str]] = {
    "ledger": LEDGER,
    "protocol": PROTOCOL,
    "synthetic": PROTOCOL | {"synthetic"},
    "tools": TOOLS,
    "tasks": TASKS,
    "backends": TOOLS | {"backends"},  # the perception backend decodes frames with the tools' media helpers
    "agent": TOOLS | {"backends", "agent"},
    "rewards": PROTOCOL | {"rewards"},  # never agent, never tasks: rewards score ledger states only
    "sft": PROTOCOL | {"sft", "rewards", "synthetic", "checkpoints", "modeling", "preflight", "provenance"},
    "rl": PROTOCOL | {"rl", "rewards", "synthetic", "checkpoints", "modeling", "stats", "preflight", "provenance"},
    "rollout": TOOLS | {"backends", "agent", "rollout"},
    "collect": TOOLS | {"backends", "agent", "collect", "preflight"},
    "eval": TOOLS | {"backends", "agent", "collect", "eval", "serving", "stats", "preflight"},
    "onpolicy": TOOLS | {"backends", "agent", "collect", "onpolicy"},
    "serving": {"serving"},
    "view": PROTOCOL | {"view"},
    # top-level modules: leaves that the stages share (torch, TRL and the stages themselves load lazily)
    "preflight": {"preflight"},
    "modeling": {"modeling"},
    "checkpoints": {"checkpoints"},
    "launch": {"launch"},
    "export": {"export", "modeling", "provenance"},
    "stats": {"stats"},
    "provenance": {"provenance"},
    "gpustats": {"gpustats"},
    "smoke": {"smoke"},
    # the demo and the experiment are lists of commands: every other package only inside functions (lazily)
    "pipeline": {"pipeline"},
}
# Top-level modules without a row: the command line (it mounts every stage, so it may load everything) and the demo
# (the pipeline's command lists, above every stage).
UNRULED = {"cli", "demo", "__init__", "__main__"}

_PROBE = """
import importlib, json, pkgutil, sys
name = "omnidecision." + sys.argv[1]
pkg = importlib.import_module(name)
for info in pkgutil.walk_packages(getattr(pkg, "__path__", []), name + "."):  # a top-level module: itself only
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
print(json.dumps(sorted({k.split(".")[1] for k in sys.modules if k.startswith("omnidecision.")})))
"""


def loaded_by(package: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE, package], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"importing omnidecision.{package} failed:\n{out.stderr[-2000:]}"
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_loads_only_what_it_may(package: str) -> None:
    extra = loaded_by(package) - ALLOWED[package]
    assert not extra, f"omnidecision.{package} loads {sorted(extra)}, which docs/architecture.md forbids"


def test_provenance_is_a_bottom_module() -> None:
    """`omnidecision.provenance` (written by every trained stage, read by export, eval and serving) loads no other
    project module, so any layer may use it."""
    code = ("import json, sys, omnidecision.provenance; "
            "print(json.dumps(sorted({k.split('.')[1] for k in sys.modules if k.startswith('omnidecision.')})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["provenance"]


def import_graph(root: Path, *, local: bool) -> dict[str, set[str]]:
    """module -> the project modules it imports (module-level only, or with `local` the imports inside functions
    too). `from pkg import name` counts as importing `pkg.name` when that is a module, else `pkg`."""
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def owner(name: str) -> str | None:  # the module a dotted name lives in
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        names = _imported_names(ast.parse(path.read_text("utf-8"), str(path)), package, local)
        graph[module] = {t for t in map(owner, names) if t is not None and t != module}
    return graph


def _imported_names(tree: ast.AST, package: str, local: bool) -> set[str]:
    """Dotted names the `import` statements of a module name (inside functions too with `local`)."""
    names: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]  # (node, inside a function)
    while stack:
        node, in_function = stack.pop()
        if isinstance(node, ast.Import) and (local or not in_function):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (local or not in_function):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([base] if base else []))
            names.update(f"{base}.{a.name}" for a in node.names)
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return names


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (a, b, …, a), or None: depth-first search for an edge back into the current path."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := dfs(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := dfs(start)) is not None:
            return found
    return None


def test_find_circle_finds_one():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


@pytest.mark.parametrize("scope", ["module_level", "all"])
def test_no_import_circles(scope: str) -> None:
    import omnidecision

    graph = import_graph(Path(omnidecision.__file__).parent, local=scope == "all")
    assert len(graph) > 100 and graph["omnidecision.eval.report"], "the import graph was not read"
    circle = find_circle(graph)
    assert circle is None, f"import circle ({scope} imports): {' -> '.join(circle)}"


def render_table() -> str:
    """ALLOWED as the Markdown table docs/architecture.md shows (rows and cells in layer order)."""
    order = ["ledger", "protocol", "tasks", "tools", "backends", "agent", "rollout", "collect", "eval", "onpolicy",
             "rewards", "sft", "rl", "synthetic", "serving", "view", "preflight", "modeling", "checkpoints", "launch",
             "export", "stats", "gpustats", "smoke", "pipeline"]
    rank = {name: i for i, name in enumerate(order)}
    lines = ["| package | may load at import time (besides itself) |", "| --- | --- |"]
    for package in sorted(ALLOWED, key=lambda p: rank.get(p, len(order))):
        others = sorted(ALLOWED[package] - {package}, key=lambda p: (rank.get(p, len(order)), p))
        lines.append(f"| {package} | {', '.join(others) or '—'} |")
    return "\n".join(lines)


def test_architecture_doc_shows_this_table() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text("utf-8")
    assert render_table() in doc, "docs/architecture.md: paste the table `python tests/architecture/" \
        "test_import_rules.py` prints"


def test_every_package_has_a_rule() -> None:
    from pathlib import Path

    import omnidecision

    root = Path(omnidecision.__file__).parent
    packages = {p.parent.name for p in root.glob("*/__init__.py")}
    assert packages - set(ALLOWED) == set(), "a new package needs its row in ALLOWED"
    modules = {p.stem for p in root.glob("*.py")} - UNRULED
    assert modules - set(ALLOWED) == set(), "a new top-level module needs its row in ALLOWED"


if __name__ == "__main__":
    print(render_table())
