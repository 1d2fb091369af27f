"""Shared pieces of the reference generators: the problem list, one-line docs, Markdown escaping.

    >>> one_line("First sentence.  More\\n\\nsecond paragraph")
    'First sentence. More'
    >>> cell("a | b\\nc")
    'a \\\\| b c'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NOTE = ("*Generated from the code by `python -m docgen` at every `make docs`; edit the doc strings in the code, "
        "not this page.*")


@dataclass
class Page:
    """One generated page and the undocumented things found while writing it (each one fails the build)."""

    path: str  # relative to docs/
    text: str
    problems: list[str] = field(default_factory=list)


def one_line(text: str | None) -> str:
    """The first paragraph of a doc string on one line (whitespace collapsed)."""
    if not text:
        return ""
    first = re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0]
    return " ".join(first.split())


def cell(text: object) -> str:
    """`text` made safe for a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: object) -> str:
    """`text` as inline code inside a table cell (Python-Markdown's tables leave a pipe inside a code span alone).

    >>> code("str | None"), code("a`b")
    ('`str | None`', '`` a`b ``')
    """
    s = " ".join(str(text).split())
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def type_text(annotation: object) -> str:
    """A type annotation as a reader writes it: `list[Path]`, `str | None`, `Literal['all', 'balanced']`; a
    validator riding on a type (`Annotated[str, AfterValidator(...)]`) is the field's description's to say.

    >>> from pathlib import Path
    >>> from typing import Annotated
    >>> from pydantic import AfterValidator
    >>> type_text(list[Path]), type_text(int | None), type_text("float")
    ('list[Path]', 'int | None', 'float')
    >>> type_text(list[Annotated[str, AfterValidator(str.strip)]] | None)
    'list[str] | None'
    """
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    text = str(annotation).replace("typing.", "").replace("NoneType", "None")
    text = re.sub(r"Annotated\[([\w.]+), [^\[\]]*\]", r"\1", text)
    return re.sub(r"<class '([\w.]+)'>", lambda m: m.group(1).rsplit(".", 1)[-1],
                  re.sub(r"\b(?:[a-z_][\w]*\.)+([A-Za-z_]\w*)", r"\1", text))


def portable(value: object) -> object:
    """A default that is a path inside this checkout, as a path relative to the repository (the reference must not
    carry the machine's folders); anything else unchanged.

    >>> portable(ROOT / "configs" / "x.yaml"), portable(3)
    ('configs/x.yaml', 3)
    """
    if isinstance(value, (str, Path)) and str(value).startswith(str(ROOT) + "/"):
        return Path(value).relative_to(ROOT).as_posix()
    return value
