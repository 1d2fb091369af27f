"""Where runs get stuck, by modality: the report's `stuck` table (which need or slot stalled, and on which tool).

    python -m omnidecision.eval.report runs/eval/trajectories.jsonl --out runs/eval   # report.json: "stuck"

Definitions, over the final ledger of each ledger-mode run (react/memory runs have none and are left out):

- a need's *modality*, the sense its evidence comes from: `web` (source web), `compute` (source code), `audio`
  (sources audio and subtitle: the sound track or speech of an audio or video asset), and for the visual sources
  (clip, frame) the type of the asset they look at, `video` or `image`: the need's `asset_id`, else the asset the
  tool picks by default (the first video, else the first image, as `tools.media.get_asset` with the clip and frame
  tools' `prefer`), else `video`. A slot a call aims at (code_executor computing it) is `compute`;
- *open*: a blocking need not `filled` at the end (unfilled, partial or unfillable); supplementary needs are not
  counted (leaving one open does not block an answer);
- *stalled*: open at the end, and its last N tool calls (N = `window`, default the run's `max_attempts`, 3 unless the
  recipe says otherwise) each left it as it was: for a need, status and value unchanged; for a slot (unverified at
  the end), value and verified unchanged. "Left it as it was" compares the snapshot the planner saw at the call's
  step with the next step's (or the final ledger). A need with fewer than N calls did not stall (it was not tried
  enough: a budget or premature-stop failure, not a stuck one). Without step records for a need (a ledger-only
  record) it stalled when `attempts >= N` and it never got a value (status unfilled or unfillable);
- *bottleneck*: the run's `eval.attribution.stalled_need` (the open blocking need the run waited on: the first
  whose dependencies are filled) for runs that ended open, counted by its modality.

Per modality: `runs` (runs whose final ledger has a blocking need of it, or for `compute` a computation slot),
`open` / `stalled` / `bottleneck` (runs where one such need did so), `stuck_rate = stalled / runs` and
`open_rate = open / runs`. `pairs`: the most frequent (need kind = preferred source, tool) pairs over the stalled
needs and slots, the tool being the one called most in the last N calls (ledger-only: the tools the need `tried`).

    >>> from omnidecision.ledger.schema import Ledger, Need
    >>> led = Ledger(initialized=True, needs=[Need(index=0, description="d", preferred_source="web", attempts=3,
    ...                                             tried=["web_search"])])
    >>> [(n.index, n.tool) for n in stalled_items(led, [])]
    [(0, 'web_search')]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from omnidecision.eval.attribution import stalled_need
from omnidecision.ledger.events import ToolCalled
from omnidecision.ledger.schema import SOURCE_TOOL, Ledger, Need
from omnidecision.stats import rate

MODALITIES: tuple[str, ...] = ("video", "audio", "image", "web", "compute")
# The asset types the visual tools look at by default, most preferred first (the `prefer` of tools/clips.py and
# tools/frames.py; eval does not read them from the tools).
VISUAL_PREFER: tuple[str, ...] = ("video", "image")
SOURCE_MODALITY: dict[str, str] = {"web": "web", "code": "compute", "audio": "audio", "subtitle": "audio"}
TOP_PAIRS = 10


@dataclass(frozen=True)
class Stalled:
    """One stalled need (`index`) or slot (`slot`), its modality, its kind (preferred source, or `slot:<kind>`) and
    the tool called most in its last calls."""

    modality: str
    kind: str
    tool: str
    index: int | None = None
    slot: str | None = None


def modality(need: Need, state: Ledger) -> str:
    """The modality of a need (module docstring)."""
    if need.preferred_source in SOURCE_MODALITY:
        return SOURCE_MODALITY[need.preferred_source]
    assets = state.context.assets if state.context is not None else []
    named = next((a for a in assets if need.asset_id is not None and a.id == need.asset_id), None)
    if named is not None and named.type in VISUAL_PREFER:
        return named.type
    default = next((a for kind in VISUAL_PREFER for a in assets if a.type == kind), None)
    return default.type if default is not None else VISUAL_PREFER[0]


def call_progress(steps: Sequence[Any], final: Ledger | None) -> dict[tuple[str, Any], list[tuple[str, bool]]]:
    """(("need", i) | ("slot", name)) → each tool call aimed at it, in order, as (tool, moved): whether the ledger
    after the call's step differs from the one before it for that need (status, value) or slot (value, verified).
    Steps without both snapshots (react/memory, or a missing final ledger) are left out."""
    out: dict[tuple[str, Any], list[tuple[str, bool]]] = {}
    for k, step in enumerate(steps):
        before = getattr(step, "ledger", None)
        after = steps[k + 1].ledger if k + 1 < len(steps) else final
        calls = [e for e in getattr(step, "events", []) if isinstance(e, ToolCalled)]
        if not calls or before is None or after is None:
            continue
        for c in calls:
            if c.need is not None:
                a, b = before.need(c.need), after.need(c.need)
                moved = (a is None) != (b is None) or (a is not None and b is not None and
                                                       (a.status, a.value) != (b.status, b.value))
                out.setdefault(("need", c.need), []).append((c.tool, moved))
            elif c.slot is not None:
                sa, sb = before.slot(c.slot), after.slot(c.slot)
                moved = (sa is None) != (sb is None) or (sa is not None and sb is not None and
                                                         (sa.value, sa.verified) != (sb.value, sb.verified))
                out.setdefault(("slot", c.slot), []).append((c.tool, moved))
    return out


def _tail_tool(calls: list[tuple[str, bool]], window: int) -> str | None:
    """The tool called most in the last `window` calls when none of them moved the ledger, else None."""
    tail = calls[-window:]
    if len(tail) < window or any(moved for _, moved in tail):
        return None
    return Counter(tool for tool, _ in tail).most_common(1)[0][0]


def stalled_items(state: Ledger, steps: Sequence[Any], window: int | None = None) -> list[Stalled]:
    """The stalled blocking needs and slots of one run's final ledger (module docstring)."""
    n = window or state.max_attempts
    progress = call_progress(steps, state)
    out: list[Stalled] = []
    for need in state.needs:
        if need.role != "blocking" or need.status == "filled":
            continue
        calls = progress.get(("need", need.index))
        if calls:
            tool = _tail_tool(calls, n)
        elif need.attempts >= n and need.status in ("unfilled", "unfillable"):
            tool = "+".join(need.tried or [SOURCE_TOOL[need.preferred_source]])
        else:
            tool = None
        if tool is not None:
            out.append(Stalled(modality(need, state), need.preferred_source, tool, index=need.index))
    for slot in state.slots:
        if slot.verified:
            continue
        calls = progress.get(("slot", slot.name))
        tool = _tail_tool(calls, n) if calls else ("code_executor" if slot.attempts >= n else None)
        if tool is not None:
            out.append(Stalled("compute", f"slot:{slot.kind}", tool, slot=slot.name))
    return out


def stuck_table(records: Iterable[Any], window: int | None = None) -> dict[str, Any]:
    """The report's `stuck` dict: per modality runs / open / stalled / bottleneck / rates, and the top pairs."""
    counts = {m: Counter() for m in MODALITIES}
    pairs: Counter[tuple[str, str]] = Counter()
    with_ledger = 0
    for r in records:
        state = r.final_ledger
        if state is None or not state.initialized:
            continue
        with_ledger += 1
        blocking = [nd for nd in state.needs if nd.role == "blocking"]
        has = {modality(nd, state) for nd in blocking}
        if any(s.kind == "computation" for s in state.slots):
            has.add("compute")
        opened = {modality(nd, state) for nd in blocking if nd.status != "filled"}
        stalled = stalled_items(state, r.steps, window)
        bottleneck = stalled_need(state)
        has |= {s.modality for s in stalled}  # a fact slot a call aimed at is `compute` too
        for m in has:
            counts.setdefault(m, Counter())["runs"] += 1
        for m in opened:
            counts[m]["open"] += 1
        for m in {s.modality for s in stalled}:
            counts[m]["stalled"] += 1
        if bottleneck is not None:
            counts[modality(state.needs[bottleneck], state)]["bottleneck"] += 1
        pairs.update((s.kind, s.tool) for s in stalled)
    by_modality = {m: {"runs": c["runs"], "open": c["open"], "stalled": c["stalled"], "bottleneck": c["bottleneck"],
                       "open_rate": rate(c["open"], c["runs"]), "stuck_rate": rate(c["stalled"], c["runs"])}
                   for m, c in counts.items()}
    return {"runs_with_ledger": with_ledger, "window": window or "max_attempts", "by_modality": by_modality,
            "pairs": [{"need_kind": k, "tool": t, "stalled": v} for (k, t), v in pairs.most_common(TOP_PAIRS)]}


def stuck_lines(stuck: dict[str, Any] | None) -> list[str]:
    """report.md's section: the table per modality (only modalities some run had) and the top stalled pairs."""
    if not stuck or not stuck.get("runs_with_ledger"):
        return []

    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.1f}%"

    window = stuck["window"]
    lines = ["", "## Where runs got stuck (by modality)", "",
             f"Over the {stuck['runs_with_ledger']} runs with a ledger. *Open*: a blocking need of that modality was "
             f"not filled at the end; *stalled*: one stayed open through its last {window} tool calls, none of "
             "which changed it; *bottleneck*: the open need the run waited on. Rates are over the runs that had "
             "such a need.", "",
             "| modality | runs with such a need | open at end | stalled | bottleneck | open rate | stuck rate |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {m} | {c['runs']} | {c['open']} | {c['stalled']} | {c['bottleneck']} | {pct(c['open_rate'])} | "
              f"{pct(c['stuck_rate'])} |" for m, c in stuck["by_modality"].items() if c["runs"]]
    if stuck["pairs"]:
        lines += ["", "Stalled (need kind, tool), most frequent first: " + ", ".join(
            f"{p['need_kind']} × {p['tool']} {p['stalled']}" for p in stuck["pairs"])]
    return lines
