"""Random but valid ledger states and the rule planner's action for each: data for tests, the tiny tokenizer
corpus and the CPU SFT recipe, with no collected trajectories needed.

Every state is built through the reducer (`InitLedger`, `ToolCalled`, `NeedUpdated`, ...), so it is a state the
agent could really reach. The action is the rule planner's (`omnidecision.protocol.rule`).

    python -m omnidecision.synthetic.states OUT_DIR --train 2000 --validation 200
    # writes OUT_DIR/train.jsonl and OUT_DIR/validation.jsonl (SFT rows, `datasets.load_dataset(OUT_DIR)` reads them)
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from collections.abc import Callable
from pathlib import Path

from omnidecision.ledger import (
    SOURCE_TOOL,
    SOURCES,
    ConflictRaised,
    ConflictValue,
    InitLedger,
    Ledger,
    NeedSpec,
    NeedUpdated,
    Slot,
    SlotUpdated,
    SourceRef,
    ToolCalled,
    actionable_need_indices,
    can_advance,
    composed_query,
    reduce,
)
from omnidecision.protocol import rows
from omnidecision.protocol.prompts import render_planner_messages
from omnidecision.protocol.rule import rule_decision_text

logger = logging.getLogger(__name__)

_SUBJECTS = [
    "the narrator", "the speaker", "the chef", "the guitarist", "the woman in red", "the lecturer", "the driver",
    "the interviewer", "the goalkeeper", "the painter", "the host", "the second runner", "the child", "the pilot",
]
_OBJECTS = [
    "the bridge", "the red car", "the poster", "the trophy", "the building on the left", "the book", "the ship",
    "the mountain", "the statue", "the album cover", "the menu board", "the team logo", "the clock tower",
]
_FIRST = [
    ("name of {s}", "who is {s}"), ("city where {s} lives", "where does {s} live"),
    ("year {o} was built", "when was {o} built"), ("name of {o}", "what is {o} called"),
    ("song played by {s}", "which song does {s} play"), ("number of people near {o}", "how many people are near {o}"),
    ("brand shown on {o}", "which brand is on {o}"), ("language spoken by {s}", "which language does {s} speak"),
    ("date mentioned by {s}", "which date does {s} mention"), ("price written on {o}", "what price is on {o}"),
]
_HOP = [
    "birth year of {#}", "population of {#}", "founder of {#}", "height of {#} in meters",
    "country of {#}", "release year of {#}", "architect of {#}", "capital of {#}", "age of {#} in 2020",
    "distance from {#} to Paris in km", "official language of {#}", "first album of {#}",
]
_VALUES = [
    "Ada Lovelace", "Lisbon", "1889", "Golden Gate", "Yesterday", "7", "Nike", "Spanish", "12 May 1998", "$4.50",
    "Gustave Eiffel", "Portugal", "Oslo", "330", "1932", "Miles Davis", "Kind of Blue", "Tokyo", "42", "Norway",
    "Marie Curie", "Warsaw", "1867", "Abbey Road", "French", "3.7 million", "Frank Gehry", "Bilbao", "1997",
]
_ERRORS = ["timeout", "no results", "asset not found", "rate limited", "empty transcript"]


def random_ledger(rng: random.Random, *, max_steps: int = 10) -> Ledger:
    """A reachable ledger: a random decomposition (3-7 needs, a DAG), then 0..`max_steps` random tool steps."""
    n = rng.randint(3, 7)
    specs: list[NeedSpec] = []
    s, o = rng.choice(_SUBJECTS), rng.choice(_OBJECTS)
    for i in range(n):
        deps = sorted(rng.sample(range(i), k=rng.randint(1, min(2, i)))) if i and rng.random() < 0.6 else []
        if deps:
            focus = rng.choice(_HOP).replace("{#}", f"{{#{deps[0]}}}")
            if len(deps) > 1:
                focus += f" and {{#{deps[1]}}}"
            desc = focus
            for d in deps:
                desc = desc.replace(f"{{#{d}}}", f"need {d}")
        else:
            focus, desc = (t.format(s=s, o=o) for t in rng.choice(_FIRST))
        preferred = rng.choice(SOURCES)
        # some needs list other sources (the planner switches to one after the listed source came back empty)
        alts = rng.sample([x for x in SOURCES if x != preferred], k=1) if rng.random() < 0.2 else []
        specs.append(NeedSpec(description=desc, role="blocking" if rng.random() < 0.7 else "supplementary",
                              query_focus=focus, preferred_source=preferred, depends_on=deps, alt_sources=alts))
    slots = []
    if rng.random() < 0.3:
        slots.append(Slot(name="answer", kind=rng.choice(["fact", "computation"]),
                          needs=sorted(rng.sample(range(n), k=min(n, 2)))))
    question = f"{rng.choice(_FIRST)[1].format(s=s, o=o).capitalize()}, and what is the {specs[-1].query_focus}?"
    state = reduce(Ledger(), InitLedger(question=question, needs=specs, slots=slots,
                                        step_budget=rng.choice([10, 15, 20]), max_attempts=rng.choice([2, 3]),
                                        max_tool_calls=n + rng.randint(0, 3) if rng.random() < 0.2 else None))
    for _ in range(rng.randint(0, max_steps)):
        if state.step >= state.step_budget - 1 or not can_advance(state):
            break
        actionable = actionable_need_indices(state)
        if not actionable:
            break
        state = _random_step(rng, state, rng.choice(actionable))
    for slot in state.slots:
        if all(state.needs[i].status == "filled" for i in slot.needs) and rng.random() < 0.7:
            state = reduce(state, SlotUpdated(slot=slot.name, value=rng.choice(_VALUES), verified=True, source="code"))
    return state


def _random_step(rng: random.Random, state: Ledger, i: int) -> Ledger:
    need = state.needs[i]
    tool = SOURCE_TOOL[need.preferred_source] if rng.random() < 0.85 else rng.choice(list(SOURCE_TOOL.values()))
    query = composed_query(state, i)
    r = rng.random()
    if r < 0.12:
        return reduce(state, ToolCalled(need=i, tool=tool, query=query, ok=False, error=rng.choice(_ERRORS)))
    state = reduce(state, ToolCalled(need=i, tool=tool, query=query))
    if r < 0.7:
        return reduce(state, NeedUpdated(need=i, status="filled", value=rng.choice(_VALUES), filled_by=tool))
    if r < 0.8:
        return reduce(state, NeedUpdated(need=i, verdict="omits", status="partial", value=rng.choice(_VALUES)))
    if r < 0.88 and not any(c.need == i and not c.resolved for c in state.conflicts):
        # (an unresolved conflict on an unfillable need would leave can_advance=yes with no legal call)
        return reduce(state, NeedUpdated(need=i, verdict="omits", status="unfillable"))
    if r < 0.94:
        a, b = rng.sample(_VALUES, 2)
        values = [ConflictValue(value=a, source=SourceRef(tool=tool)),
                  ConflictValue(value=b, source=SourceRef(tool="web_search"))]
        return reduce(state, ConflictRaised(need=i, values=values))
    return reduce(state, NeedUpdated(need=i, verdict="omits"))


def sft_row(state: Ledger, *, task_id: str = "synthetic", step: int = 0, explicit_query: bool = False) -> dict:
    """One state-SFT row (`protocol.rows`): the planner messages of `state` and the rule decision."""
    return rows.sft_row(render_planner_messages(state), rule_decision_text(state, explicit_query), task_id=task_id,
                        run_id="rule", step=step, level="1", source="rule")


def sft_rows(n: int, seed: int = 0) -> list[dict]:
    """`n` rows from independent random ledgers; the same seed gives the same rows."""
    rng = random.Random(seed)
    return [sft_row(random_ledger(rng), task_id=f"syn-{seed}-{k}", step=0) for k in range(n)]


def write_splits(out: Path, rows: Callable[[int, int], list[dict]], n_train: int, n_validation: int,
                 seed: int) -> None:
    """`train.jsonl` (`rows(n_train, seed)`) and `validation.jsonl` (`rows(n_validation, seed + 1_000_003)`: a seed
    no train set near `seed` uses, so the splits share no state) under `out`, created if missing."""
    out.mkdir(parents=True, exist_ok=True)
    for name, n, s in (("train", n_train, seed), ("validation", n_validation, seed + 1_000_003)):
        with (out / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            for row in rows(n, s):
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_sft_dataset(out_dir: str | Path, n_train: int = 2000, n_validation: int = 200, seed: int = 0) -> Path:
    """Write `train.jsonl` and `validation.jsonl` under `out_dir` (disjoint seeds) and return the folder."""
    out = Path(out_dir)
    write_splits(out, sft_rows, n_train, n_validation, seed)
    logger.info("wrote %d train and %d validation rows to %s", n_train, n_validation, out)
    return out


def splits_main(write: Callable[[str, int, int, int], Path], doc: str | None, argv: list[str] | None = None) -> None:
    """The command line of a synthetic split writer (`write(out_dir, n_train, n_validation, seed)`, this module's
    `write_sft_dataset`): OUT_DIR [--train 2000] [--validation 200] [--seed 0]."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--train", type=int, default=2000)
    p.add_argument("--validation", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    write(a.out_dir, a.train, a.validation, a.seed)


if __name__ == "__main__":
    splits_main(write_sft_dataset, __doc__)
