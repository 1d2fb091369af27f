"""The report's stuck-rate table (issue 29): per modality, the runs where a blocking need stayed open or stalled (no
change over its last N tool calls), from runs played through the reducer step by step (so the snapshots the table
compares are the ones a real run records), and from ledger-only records.

    .venv/bin/pytest tests/eval/test_stuck_table.py -q
"""

from __future__ import annotations

import pytest

from omnidecision.eval.report import build_report, render_markdown
from omnidecision.eval.stuck import modality, stalled_items, stuck_table
from omnidecision.ledger import InitLedger, NeedSpec, NeedUpdated, ToolCalled, reduce
from omnidecision.ledger.schema import AssetRef, Ledger, Need, Slot, TaskContext
from omnidecision.protocol.records import JudgeResult, RunRecord, StepRecord

VIDEO = TaskContext(assets=[AssetRef(id="v", type="video", duration=60.0)])
IMAGE = TaskContext(assets=[AssetRef(id="img", type="image")])


def play(name: str, needs: list[NeedSpec], steps: list[list], context: TaskContext = VIDEO,
         slots: list[Slot] | None = None, outcome: str = "budget") -> RunRecord:
    """A run whose steps apply the given events in order, each step recording the snapshot it saw."""
    init = InitLedger(question="q", needs=needs, slots=slots or [], context=context)
    state = reduce(Ledger(), init)
    records = []
    for k, events in enumerate(steps):
        records.append(StepRecord(step=k, ledger=state, planner_messages=[], events=events))
        for e in events:
            state = reduce(state, e)
    return RunRecord(run_id=name, task_id=name, outcome=outcome, initial_events=[init], steps=records,
                     final_ledger=state, judge=JudgeResult(correct=False, method="x"))


def empty(i: int, tool: str) -> list:
    """A tool call on need i that changed nothing."""
    return [ToolCalled(need=i, tool=tool, query="q", ok=False, error="nothing")]


def partial(i: int, tool: str, value: str) -> list:
    return [ToolCalled(need=i, tool=tool, query="q"), NeedUpdated(need=i, status="partial", value=value)]


def filled(i: int, tool: str) -> list:
    return [ToolCalled(need=i, tool=tool, query="q"), NeedUpdated(need=i, status="filled", value="v")]


AUDIO = NeedSpec(description="what is said", preferred_source="audio")
WEB = NeedSpec(description="when", preferred_source="web")
CLIP = NeedSpec(description="what happens", preferred_source="clip")


@pytest.fixture()
def runs() -> list[RunRecord]:
    return [
        # the audio need came back empty three times: stalled (window 3, its max_attempts)
        play("audio-stuck", [AUDIO, CLIP], [empty(0, "audio_scouting")] * 3 + [filled(1, "clip_grounding")]),
        # the web need moved (partial) on its first call, then twice nothing: open, stalled only with window 2
        play("web-slow", [WEB], [partial(0, "web_search", "1999"), empty(0, "web_search"), empty(0, "page_reader")]),
        # filled: neither open nor stalled
        play("clip-ok", [CLIP], [filled(0, "clip_grounding")], outcome="accepted"),
        # an image task: the frame need got one call, open but not stalled
        play("image-open", [NeedSpec(description="colour", preferred_source="frame")],
             [empty(0, "frame_confirmation")], context=IMAGE),
        # a react run has no ledger: not counted
        RunRecord(run_id="react", task_id="react", mode="react", outcome="forced"),
    ]


def test_modalities_follow_the_sense_of_the_evidence():
    led = Ledger(initialized=True, context=TaskContext(assets=[AssetRef(id="a", type="audio"),
                                                               AssetRef(id="i", type="image")]))
    kinds = {src: modality(Need(index=0, description="d", preferred_source=src), led)
             for src in ("subtitle", "audio", "clip", "frame", "web", "code")}
    assert kinds == {"subtitle": "audio", "audio": "audio", "clip": "image", "frame": "image", "web": "web",
                     "code": "compute"}
    # a named asset wins; a visual need on a task without assets is video
    both = Ledger(initialized=True, context=TaskContext(assets=[AssetRef(id="v", type="video"),
                                                                AssetRef(id="i", type="image")]))
    assert modality(Need(index=0, description="d", preferred_source="frame"), both) == "video"
    assert modality(Need(index=0, description="d", preferred_source="frame", asset_id="i"), both) == "image"
    assert modality(Need(index=0, description="d", preferred_source="clip"), Ledger()) == "video"


def test_table_counts_open_and_stalled_runs_per_modality(runs):
    t = stuck_table(runs)
    assert t["runs_with_ledger"] == 4
    m = t["by_modality"]
    assert (m["audio"]["runs"], m["audio"]["open"], m["audio"]["stalled"]) == (1, 1, 1)
    assert m["audio"]["stuck_rate"] == 1.0 and m["audio"]["bottleneck"] == 1
    assert (m["video"]["runs"], m["video"]["open"], m["video"]["stalled"]) == (2, 0, 0)
    assert m["video"]["stuck_rate"] == 0.0 and m["video"]["open_rate"] == 0.0
    assert (m["web"]["runs"], m["web"]["open"], m["web"]["stalled"]) == (1, 1, 0)
    assert (m["image"]["runs"], m["image"]["open"], m["image"]["stalled"]) == (1, 1, 0)
    assert m["compute"]["runs"] == 0 and m["compute"]["stuck_rate"] is None
    assert t["pairs"] == [{"need_kind": "audio", "tool": "audio_scouting", "stalled": 1}]


def test_a_shorter_window_counts_the_need_that_moved_earlier(runs):
    t = stuck_table(runs, window=2)
    assert t["by_modality"]["web"]["stalled"] == 1 and t["window"] == 2
    # the last two calls were web_search and page_reader: one each, the first called most wins the tie
    assert {"need_kind": "web", "tool": "web_search", "stalled": 1} in t["pairs"]
    # window 4: the audio need had only three calls, so nothing stalled
    assert all(v["stalled"] == 0 for v in stuck_table(runs, window=4)["by_modality"].values())


def test_a_computation_slot_that_never_computes_is_a_stalled_compute_item():
    slot = Slot(name="total", kind="computation", needs=[0])
    run = play("slot", [WEB], [filled(0, "web_search")] + [[ToolCalled(slot="total", tool="code_executor",
                                                                       ok=False, error="SyntaxError")]] * 3,
               slots=[slot])
    items = stalled_items(run.final_ledger, run.steps)
    assert [(s.modality, s.kind, s.tool, s.slot) for s in items] == [("compute", "slot:computation",
                                                                      "code_executor", "total")]
    t = stuck_table([run])
    assert t["by_modality"]["compute"] == {"runs": 1, "open": 0, "stalled": 1, "bottleneck": 0, "open_rate": 0.0,
                                           "stuck_rate": 1.0}


def test_ledger_only_records_use_attempts():
    def need(status: str, attempts: int) -> Need:
        return Need(index=0, description="d", preferred_source="web", status=status, attempts=attempts,
                    tried=["web_search"], value="x" if status == "partial" else None)

    def run(name: str, n: Need) -> RunRecord:
        return RunRecord(run_id=name, task_id=name, outcome="insufficient",
                         final_ledger=Ledger(initialized=True, needs=[n]))

    t = stuck_table([run("a", need("unfilled", 3)), run("b", need("partial", 3)), run("c", need("unfilled", 2))])
    assert t["by_modality"]["web"] == {"runs": 3, "open": 3, "stalled": 1, "bottleneck": 3, "open_rate": 1.0,
                                       "stuck_rate": pytest.approx(1 / 3)}


def test_report_and_markdown_carry_the_table(runs):
    rep = build_report(runs)
    assert rep["stuck"]["by_modality"]["audio"]["stalled"] == 1
    md = render_markdown(rep)
    assert "## Where runs got stuck (by modality)" in md
    assert "| audio | 1 | 1 | 1 | 1 | 100.0% | 100.0% |" in md
    assert "| compute |" not in md  # no run had a compute need
    assert "audio × audio_scouting 1" in md
