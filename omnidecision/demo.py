"""`omnidecision demo`: the whole pipeline on CPU, offline (placeholder until the demo stage lands)."""

from pathlib import Path

import typer


def demo(out: Path = typer.Option(Path("runs/demo"), help="output directory")) -> None:
    """Run collect → harvest → SFT → GRPO → export → serve → eval on CPU (not built yet)."""
    print(f"omnidecision demo: not built yet (would write to {out})")
