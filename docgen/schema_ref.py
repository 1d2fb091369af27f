"""The records and datasets reference: the trajectory record (one JSON line per run) and the state-SFT and RL rows
(the harvest's datasets), read from their pydantic models, nested models in sections of their own.

    python -m docgen        # writes docs/reference/schemas.md among the others
"""

from __future__ import annotations

from pydantic import BaseModel

from docgen.common import NOTE, Page, one_line
from docgen.recipe_ref import _anchor, _table, load, model_fields

SCHEMAS: tuple[tuple[str, str, str], ...] = (
    ("The task record", "omnidecision.tasks.schema:Task",
     "One task per line of a JSONL task file (`format: jsonl`, or `auto` on a `.jsonl` file): what `collect` and "
     "`eval` read with `tasks.path`, and what `omnidecision tasks check` validates. Relative paths (assets, "
     "`corpus`, `base_dir`) resolve against the file's folder. An example line, from "
     "`tests/data/jsonl/tasks.jsonl`:\n\n```json\n"
     '{"id": "j1", "question": "How many moons does Mars have?", "answer": "2", "answer_type": "number", '
     '"level": "easy", "category": "science", "pages": [{"url": "https://example.org/mars", '
     '"text": "Mars has two moons, Phobos and Deimos."}]}\n```'),
    ("The trajectory record", "omnidecision.protocol.records:RunRecord",
     "One JSON line per run in `trajectories*.jsonl` (collect, eval, rounds): every step the agent took, the "
     "outcome and the judge's verdict. Replaying `initial_events`, each step's `events` and `final_events` with "
     "the reducer reproduces every ledger snapshot byte for byte (`omnidecision replay`)."),
    ("The state-SFT row", "omnidecision.protocol.rows:SFTRow",
     "One row per planner decision of a judge-correct run, in the harvest's `sft/` dataset: `messages` is exactly "
     "what the planner was sent, then the decision as the assistant turn (TRL's conversational format)."),
    ("The RL state row", "omnidecision.protocol.rows:RLRow",
     "One row per ledger state of every run, in the harvest's `rl/` dataset: `prompt` is what the planner was "
     "sent (TRL's conversational prompt format) and the other columns are what the rewards read."),
)
# Models documented by name only: the ledger's own schema and its typed events have their pages in the code
# (omnidecision/ledger/schema.py, events.py); the records hold them as they are.
SHALLOW = ("omnidecision.ledger.",)
# the synthetic suite's gold decomposition (read by the rule planner and the teacher, never written by a user)
SHALLOW_MODELS = ("GoldDecomposition",)


def render() -> Page:
    problems: list[str] = []
    lines = ["# Records and datasets", "", NOTE, ""]
    documented: set[type] = set()
    for title, ref, intro in SCHEMAS:
        lines += [f"## {title}", "", intro, ""]
        queue: list[type[BaseModel]] = [load(ref)]
        while queue:
            cls = queue.pop(0)
            if cls in documented:
                continue
            documented.add(cls)
            doc = one_line(cls.__doc__) if cls.__doc__ and cls.__doc__ is not BaseModel.__doc__ else ""
            lines += [f"### {cls.__name__}", "", f"`{cls.__module__}.{cls.__name__}`" + (f": {doc}" if doc else ""),
                      ""]
            rows = []
            for row, nested in model_fields(cls):
                rows.append(row)
                queue += [m for m in nested if m not in queue and not m.__module__.startswith(SHALLOW)
                          and m.__name__ not in SHALLOW_MODELS]
            lines += _table(rows, f"schema {cls.__module__}.{cls.__name__}", problems)
    lines += ["The ledger (`Ledger`, with its needs, slots, evidence and conflicts) and its typed events are "
              "defined in `omnidecision/ledger/schema.py` and `omnidecision/ledger/events.py`; "
              "[concepts](../concepts.md) explains them.", ""]
    _ = _anchor
    return Page("reference/schemas.md", "\n".join(lines), problems)


def all_fields() -> dict[str, list[str]]:
    """class path -> its field names, for every model the page documents (the test's side of the contract)."""
    out: dict[str, list[str]] = {}
    for _, ref, _ in SCHEMAS:
        queue: list[type[BaseModel]] = [load(ref)]
        while queue:
            cls = queue.pop(0)
            key = f"{cls.__module__}.{cls.__name__}"
            if key in out:
                continue
            out[key] = []
            for row, nested in model_fields(cls):
                out[key].append(row.name)
                queue += [m for m in nested
                          if not m.__module__.startswith(SHALLOW) and m.__name__ not in SHALLOW_MODELS]
    return out
