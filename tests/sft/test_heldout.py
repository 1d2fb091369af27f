"""Closure scoring of planner outputs on held-out states (pure, no model).

    .venv/bin/pytest tests/sft/test_heldout.py -q
"""

from __future__ import annotations

import random

from omnidecision.ledger import SOURCE_TOOL, actionable_need_indices, blocked_need_indices
from omnidecision.protocol.actions import CallAction, render_action
from omnidecision.protocol.rule import candidate_tools, rule_action
from omnidecision.sft.heldout import score_output
from omnidecision.synthetic.states import random_ledger


def test_teacher_action_scores_perfectly():
    rng = random.Random(3)
    for _ in range(50):
        state = random_ledger(rng)
        assert all(v for k, v in score_output(render_action(rule_action(state)), state).items() if k != "is_call")


def test_wrong_outputs_are_caught():
    rng = random.Random(4)
    seen_blocked = seen_wrong_tool = False
    for _ in range(200):
        state = random_ledger(rng)
        assert score_output("not json", state)["valid"] is False
        assert score_output('{"action": "call", "need": 1, "tool": "web_grounding"}', state)["valid"] is False
        blocked = blocked_need_indices(state)
        if blocked:
            s = score_output(render_action(CallAction(need=blocked[0])), state)
            assert s["valid"] and not s["sound"] and not s["exact"]
            seen_blocked = True
        act = actionable_need_indices(state)
        if act:
            need = state.needs[act[0]]
            other = next(t for t in SOURCE_TOOL.values() if t not in candidate_tools(need))  # none of its sources
            s = score_output(render_action(CallAction(need=act[0], tool=other)), state)
            assert s["valid"] and not s["sound"]
            seen_wrong_tool = True
    assert seen_blocked and seen_wrong_tool



def test_evaluate_rows_scores_each_output_against_its_rows_assistant_turn(tmp_path, monkeypatch):
    """`--rows`: valid JSON, the same target (need / slot / finish), the same whole action, per row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from omnidecision.sft import heldout

    call = '{"action":"call","need":1,"tool":"web_search"}'
    refs = [call, call, call, '{"action":"finish"}']
    outputs = [call, '{"action":"call","need":1,"tool":"page_reader"}', "not json", '{"action":"call","need":0}']
    rows = [{"messages": [{"role": "user", "content": f"digest {i}"}, {"role": "assistant", "content": ref}]}
            for i, ref in enumerate(refs)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "validation-00000.parquet")
    seen = []
    monkeypatch.setattr(heldout, "generate", lambda model, prompts, batch_size=32: seen.extend(prompts) or outputs)
    res = heldout.evaluate_rows("model", tmp_path, n=10)
    assert seen == [r["messages"][:-1] for r in rows]  # the rows' prompts as stored
    assert (res["n"], res["valid"], res["target_right"], res["exact"]) == (4, 0.75, 0.5, 0.25)
    assert res["distinct_outputs"] == 4


def test_state_kind_names_what_the_rule_decision_asks_of_the_planner():
    from omnidecision.ledger import InitLedger, Ledger, NeedSpec, ToolCalled, reduce
    from omnidecision.sft.heldout import state_kind

    def one_need(alt: list[str], tried: list[str]) -> Ledger:
        s = reduce(Ledger(), InitLedger(question="q", needs=[
            NeedSpec(description="guest", preferred_source="subtitle", alt_sources=alt, query_focus="g")]))
        for tool in tried:
            s = reduce(s, ToolCalled(need=0, tool=tool, query="g"))
        return s

    assert state_kind(one_need([], [])) == "copy"
    assert state_kind(one_need(["audio"], [])) == "first_of_several"
    assert state_kind(one_need(["audio"], ["subtitle_grounding"])) == "switch"
    assert state_kind(one_need([], ["subtitle_grounding"])) == "retry"
    assert state_kind(one_need(["audio"], ["subtitle_grounding", "audio_scouting"])) == "retry"
    assert state_kind(Ledger()) == "finish"
    rng = random.Random(5)  # every kind named is one of STATE_KINDS, on random states too
    from omnidecision.sft.heldout import STATE_KINDS
    assert {state_kind(random_ledger(rng)) for _ in range(200)} <= set(STATE_KINDS)
