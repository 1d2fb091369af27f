"""`omnidecision tasks …`: task-suite commands.

    omnidecision tasks synth --n 500 --seed 0 --out runs/synth
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, help="Task suites: generate the synthetic suite, check task files.")


@app.command("synth")
def synth(
    n: int = typer.Option(500, "--n", min=1, help="number of tasks"),
    seed: int = typer.Option(0, "--seed", help="random seed (same seed, byte-identical output)"),
    out: Path = typer.Option(..., "--out", help="output folder: tasks.jsonl, corpus.jsonl, assets/"),
) -> None:
    """Write the seeded synthetic closure suite (multi-hop tasks across modalities) to OUT."""
    from collections import Counter

    from omnidecision.tasks.synth import load_suite, write_suite

    path = write_suite(n, seed, out)
    tasks = load_suite(out)
    levels = Counter(t.level for t in tasks)
    types = Counter(t.answer_type for t in tasks)
    print(f"wrote {len(tasks)} tasks to {path}")
    print("levels: " + ", ".join(f"{k}={levels[k]}" for k in sorted(levels)))
    print("answer types: " + ", ".join(f"{k}={types[k]}" for k in sorted(types)))
    print(f"unanswerable: {sum(not t.answerable for t in tasks)}, with a conflict: "
          f"{sum(bool(t.meta.get('conflict')) for t in tasks)}")
