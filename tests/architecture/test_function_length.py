"""No function in `omnidecision/` runs over 80 lines (DESIGN.md §6: a stage entry is a straight-line `main()` over
named steps, each a function with its docstring). A longer one fails the test unless it is listed in `EXCEPTIONS`
below with the reason it stays whole. Lines are counted from the `def` line to the function's last line (decorators
not counted, nested functions inside their parent).

    python tests/architecture/test_function_length.py     # every function of the package over the limit

Inlining the named steps of `rl/train.py:main` back into it makes `test_no_function_over_the_limit`
fail, naming the function, its file and line, and its length.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "omnidecision"
LIMIT = 80
# "path/inside/omnidecision.py:function" -> why it stays longer than LIMIT (empty today: every function fits)
EXCEPTIONS: dict[str, str] = {}


def long_functions(package: Path = PACKAGE, limit: int = LIMIT) -> dict[str, tuple[int, int]]:
    """"path:function" (path relative to `package`, methods as Class.method) -> (first line, length) for every
    function longer than `limit` lines."""
    found: dict[str, tuple[int, int]] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, qualname in _functions(tree):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found[f"{path.relative_to(package).as_posix()}:{qualname}"] = (node.lineno, length)
    return found


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Every function under `tree` with its qualified name (Class.method, outer.inner)."""
    out = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node, prefix + node.name))
            out.extend(_functions(node, f"{prefix}{node.name}."))
        elif isinstance(node, ast.ClassDef):
            out.extend(_functions(node, f"{prefix}{node.name}."))
        else:
            out.extend(_functions(node, prefix))
    return out


def test_no_function_over_the_limit():
    over = {k: v for k, v in long_functions().items() if k not in EXCEPTIONS}
    assert not over, "functions over %d lines (split them into named steps, or list them in EXCEPTIONS with a " \
        "reason):\n%s" % (LIMIT, "\n".join(f"  omnidecision/{k} (line {line}): {n} lines"
                                           for k, (line, n) in sorted(over.items())))


def test_every_exception_is_still_long_and_has_a_reason():
    found = long_functions()
    stale = [k for k in EXCEPTIONS if k not in found]
    assert not stale, f"listed in EXCEPTIONS but no longer over {LIMIT} lines (remove them): {stale}"
    assert all(reason.strip() for reason in EXCEPTIONS.values()), "every exception needs its reason"


def test_the_walk_sees_a_long_function(tmp_path):
    """The walk itself: a planted 81-line method and nested function are found, an 80-line function is not."""
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    (tmp_path / "mod.py").write_text(
        f"def fits():\n{body}\n"
        f"class C:\n    def long(self):\n{''.join('    ' + line for line in body.splitlines(True))}        pass\n\n"
        f"def outer():\n    def inner():\n{''.join('    ' + line for line in body.splitlines(True))}        pass\n"
        "    return inner\n", encoding="utf-8")
    found = long_functions(tmp_path)
    assert set(found) == {"mod.py:C.long", "mod.py:outer", "mod.py:outer.inner"}, found
    assert found["mod.py:C.long"][1] == 81


if __name__ == "__main__":
    for name, (line, n) in sorted(long_functions(limit=LIMIT).items(), key=lambda kv: -kv[1][1]):
        print(f"{n:4d}  omnidecision/{name} (line {line})")
