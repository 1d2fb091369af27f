"""Command-line options that several commands declare alike, declared once (Typer `Annotated` types).

    from omnidecision.options import ReplaceOption

    def view(..., replace: ReplaceOption = False) -> None: ...

A leaf beside `outputs` (Typer only): every command that writes a folder through `outputs.staged_output` may use it,
whatever its layer. The launcher options of the training stages live with the launcher (`launch.py`).
"""

from __future__ import annotations

from typing import Annotated

import typer

# what `--replace` may and may not replace is `outputs.output_problems`' rule, the same for every command: a foreign
# non-empty folder only when asked, never one that is, holds or lies inside an input
ReplaceOption = Annotated[bool, typer.Option(
    "--replace", help="replace a non-empty --out folder this project did not write (never one that is, holds or "
                      "lies inside one of the command's inputs)")]
