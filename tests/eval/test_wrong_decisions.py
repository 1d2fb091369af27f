"""scripts/analysis/wrong_decisions.py: a decision is compared with the rule's at the same state, an unnamed tool read
as the one the loop runs (the first of the line's sources=)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from omnidecision.ledger import Ledger, Need
from omnidecision.protocol.actions import CallAction, FinishAction

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("wrong_decisions", ROOT / "scripts/analysis/wrong_decisions.py")
wrong_decisions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wrong_decisions)


def test_kinds_at_a_switch_state():
    # need 0: audio came back empty, subtitles listed and untried; need 1 supplementary
    state = Ledger(needs=[Need(index=0, description="who speaks", preferred_source="audio", alt_sources=["subtitle"],
                               tried=["audio_scouting"], attempts=1),
                          Need(index=1, description="colour", preferred_source="frame", role="supplementary")],
                   initialized=True)
    kind = wrong_decisions.kind
    assert kind(state, CallAction(need=0)) is None  # the short form runs the untried subtitles: the rule's call
    assert kind(state, CallAction(need=0, tool="subtitle_grounding")) is None
    assert kind(state, CallAction(need=0, tool="audio_scouting")) == "tool"  # the repeat after an empty return
    assert kind(state, CallAction(need=1)) == "need"
    assert kind(state, FinishAction()) == "finish_for_call"
    done = Ledger(needs=[Need(index=0, description="x", status="filled", value="v")], initialized=True)
    assert kind(done, CallAction(need=0)) == "call_for_finish" and kind(done, FinishAction()) is None
