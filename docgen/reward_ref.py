"""The reward reference: every name in the one reward registry (`omnidecision.rewards.REWARDS`) that a GRPO recipe's
`reward_funcs` may list, with its kind, its default weight in the closure rubric (checks) and its doc, read from the
registry after every module that registers a reward is imported.

    python -m docgen        # writes docs/reference/rewards.md among the others
"""

from __future__ import annotations

import importlib
import pkgutil

from docgen.common import NOTE, Page, cell, one_line


def entries() -> list:
    import omnidecision.rewards as rewards

    for info in pkgutil.iter_modules(rewards.__path__, "omnidecision.rewards."):
        importlib.import_module(info.name)  # a module registers its names when imported
    return sorted(rewards.REWARDS.values(), key=lambda e: ({"check": 0, "reward": 1, "judge": 2}[e.kind], e.name))


def render() -> Page:
    problems: list[str] = []
    lines = ["# Rewards", "", NOTE, "",
             "The names a GRPO recipe's `reward_funcs` may list (a name that holds a dot is an import path instead, "
             "as in TRL's own `grpo` script). **Checks** are pure functions of (decision, ledger) in [0, 1], each "
             "with its default weight in the `closure` rubric (`closure_weights` changes them); **rewards** and "
             "**judges** are factories of TRL reward functions. For stock TRL scripts, "
             "`omnidecision.rewards.stock` has them as plain functions: [stock TRL scripts](../guide/trl.md).", "",
             "| name | kind | weight in `closure` | defined in | what it scores |", "|---|---|---|---|---|"]
    for e in entries():
        target = e.check if e.check is not None else e.factory
        doc = one_line(target.__doc__)
        if not doc:
            problems.append(f"reward `{e.name}` ({e.origin}) has no doc string")
        weight = "–" if e.weight is None else f"{e.weight:g}"
        lines.append(f"| `{e.name}` | {e.kind} | {weight} | `{e.origin}` | {cell(doc) or '**(no doc string)**'} |")
    return Page("reference/rewards.md", "\n".join([*lines, ""]), problems)
