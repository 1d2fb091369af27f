"""Imports at the top of the module, where a reader looks for them (DESIGN.md §6). An internal import
(`import omnidecision…`, `from omnidecision… import …`, or a relative import) inside a function body, at any depth,
is allowed only to defer a heavy third-party library that the target loads when it is imported (torch, TRL,
transformers, vLLM, ...), or for another reason, and then says so in a comment on its line (on the first line of a
multi-line `from x import (…)`): `# heavy: loads torch/trl; keeps omnidecision --help fast`.

- `test_every_import_inside_a_function_says_why`: each one without a comment is listed as path:line;
- `test_few_imports_sit_inside_functions`: their share of all internal imports stays at or under `CEILING` (the
  count, the total and the share are printed, and named in the failure);
- `test_a_planted_import_is_counted`: the test of the test, on a planted module.

    python tests/architecture/test_imports_at_top.py      # the count, the share, and every one of them
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "omnidecision"
CEILING = 0.05  # the share of internal imports that may sit inside functions (issue 62, item 4)


@dataclass(frozen=True)
class InternalImport:
    """One `import` statement of a project module: where it is, whether inside a function, and its line's comment."""

    path: str  # relative to the repository root
    line: int
    in_function: bool
    comment: str  # the reason the `# …` on the statement's (first) line gives, "" when none


def is_internal(node: ast.Import | ast.ImportFrom) -> bool:
    """`import omnidecision…`, `from omnidecision… import …`, or a relative import."""
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "omnidecision"
    return any(alias.name.split(".")[0] == "omnidecision" for alias in node.names)


# a tool's pragma is no reason: ruff's noqa, mypy's type-ignore, coverage's pragma, the formatter's fmt
PRAGMA = re.compile(r"^(noqa(:\s*[A-Z]+\d+(\s*,\s*[A-Z]+\d+)*)?|type:\s*ignore(\[[\w,-]*\])?|pragma:[^#]*"
                    r"|fmt:\s*\w+)\s*", re.I)


def reason(comment: str) -> str:
    """The words of a comment once the tools' pragmas are taken off its front."""
    text = comment.lstrip("#").strip()
    while (match := PRAGMA.match(text)) and match.group(0):
        text = text[match.end():].lstrip("#").strip()
    return text


def line_comments(source: str) -> dict[int, str]:
    """line -> the reason a `#` comment on it gives (tokens, so a `#` inside a string is no comment)."""
    return {tok.start[0]: reason(tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT}


def internal_imports(source: str, path: str) -> list[InternalImport]:
    """Every internal import statement of one module, in line order."""
    comments = line_comments(source)
    found: list[InternalImport] = []
    stack: list[tuple[ast.AST, bool]] = [(ast.parse(source, path), False)]  # (node, inside a function)
    while stack:
        node, in_function = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)) and is_internal(node):
            found.append(InternalImport(path, node.lineno, in_function, comments.get(node.lineno, "")))
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return sorted(found, key=lambda imp: imp.line)


def package_imports(package: Path = PACKAGE) -> list[InternalImport]:
    """Every internal import statement of every module under `package`."""
    root = package.parent
    return [imp for path in sorted(package.rglob("*.py"))
            for imp in internal_imports(path.read_text("utf-8"), path.relative_to(root).as_posix())]


def tally(imports: list[InternalImport]) -> str:
    inside = sum(imp.in_function for imp in imports)
    share = inside / len(imports) if imports else 0.0
    return f"{inside} of {len(imports)} internal imports sit inside functions ({share:.1%}; ceiling {CEILING:.0%})"


def test_every_import_inside_a_function_says_why():
    imports = package_imports()
    bare = [f"{imp.path}:{imp.line}" for imp in imports if imp.in_function and not imp.comment]
    print(tally(imports))
    assert not bare, (f"{tally(imports)}; {len(bare)} without a reason (move each to the module's top, or say on "
                      "its line why it stays, e.g. `# heavy: loads torch`):\n" + "\n".join(bare))


def test_few_imports_sit_inside_functions():
    imports = package_imports()
    share = sum(imp.in_function for imp in imports) / len(imports)
    print(tally(imports))
    assert share <= CEILING, tally(imports)


def test_a_planted_import_is_counted():
    source = ('"""A module."""\n\nfrom omnidecision import outputs\nimport json\n\n\n'
              "def f():\n    from . import inputs  # noqa: F401\n    import omnidecision.stats  # heavy: a reason\n"
              "    from omnidecision.outputs import (  # multi-line, reason on its first line\n"
              "        atomic_write,\n    )\n    import torch\n\n    return lambda: __import__('x')\n")
    found = internal_imports(source, "planted.py")
    assert [(imp.line, imp.in_function, bool(imp.comment)) for imp in found] == [
        (3, False, False), (8, True, False), (9, True, True), (10, True, True)]
    assert reason("# noqa: E402, F401 # type: ignore[attr-defined]  # heavy: loads torch") == "heavy: loads torch"
    assert reason("# noqa: F401") == "" and reason("# noqa") == ""
    assert tally(found).startswith("3 of 4 internal imports sit inside functions (75.0%")


if __name__ == "__main__":
    everything = package_imports()
    for imp in everything:
        if imp.in_function:
            print(f"{imp.path}:{imp.line}  {imp.comment or '(no reason)'}")
    print(tally(everything))
