"""Table-driven cases for every closure check, and anti-hacking cases for the combined closure reward."""

from __future__ import annotations

import json

import pytest

from omnidecision.protocol.rule import rule_decision_text
from omnidecision.rewards import (
    CHECKS,
    ClosureRubric,
    Decision,
    closure_reward,
    get_reward_funcs,
)

Q = "In which year was the narrator of the documentary clip born, and what is that year squared?"


def call(need: int, tool: str | None = None, query: str | None = None, **extra) -> str:
    d = {"action": "call", "need": need}
    if tool:
        d["tool"] = tool
    if query is not None:
        d["query"] = query
    d.update(extra)
    return json.dumps(d)


FINISH = '{"action": "finish"}'

CASES = [
    # check, ledger, completion, expected
    ("format", "open", call(1), 1.0),
    ("format", "open", "Sure, here it is: " + call(1), 0.5),
    ("format", "open", call(1) + call(1), 0.5),
    ("format", "open", "<think>hmm</think>" + call(1), 1.0),
    ("format", "open", "", 0.0),
    ("format", "open", '{"action": "call", "need": 1, "tool": "telepathy"}', 0.0),
    ("format", "open", '{"action": "jump"}', 0.0),
    ("format", "open", '{"action": "call", "need": 1', 0.0),
    ("finish", "open", FINISH, 0.0),
    ("finish", "open", call(1), 1.0),
    ("finish", "ready", FINISH, 1.0),
    ("finish", "ready", call(3), 0.0),
    ("finish", "stuck", FINISH, 1.0),
    ("finish", "stuck", call(1), 0.0),
    ("finish", "open", "garbage", 0.0),
    ("target", "open", call(1), 1.0),
    ("target", "open", call(3), 0.5),  # supplementary while a blocking need is actionable
    ("target", "open", call(0), 0.0),  # filled
    ("target", "open", call(2), 0.0),  # blocked on need 1
    ("target", "open", call(9), 0.0),  # unknown
    ("target", "open", FINISH, 0.0),
    ("target", "ready", FINISH, 1.0),
    ("target", "stuck", call(1), 0.0),  # attempts spent (and finishing is sound)
    ("tool", "open", call(1), 1.0),
    ("tool", "open", call(1, "web_search"), 1.0),
    ("tool", "open", call(1, "page_reader"), 1.0),
    ("tool", "open", call(1, "audio_scouting"), 0.0),
    ("tool", "open", call(3, "frame_confirmation"), 1.0),
    ("tool", "open", call(3, "clip_grounding"), 0.0),
    ("tool", "open", FINISH, 0.0),
    ("query", "open", call(1), 1.0),
    ("query", "open", call(1, query="birth year of Ada Lovelace"), 1.0),
    ("query", "open", call(1, query="Ada Lovelace birth year"), 0.889),  # reordered, "of" dropped
    ("query", "open", call(1, query="birth year of the narrator"), 0.0),  # no anchor value
    ("query", "open", call(1, query=Q), 0.0),  # the question pasted
    ("query", "open", call(1, query=""), 0.0),
    ("query", "open", call(1, arguments={"query": "birth year of Ada Lovelace"}), 1.0),
    ("query", "open", call(3, query="where is the clip filmed"), 1.0),
    ("query", "open", FINISH, 0.0),
    ("no_repeat", "failed", call(1), 0.0),  # composed query == the failed query
    ("no_repeat", "failed", call(1, "web_search", "birth year of Ada Lovelace"), 0.0),
    ("no_repeat", "failed", call(1, "web_search", "Ada Lovelace born"), 1.0),
    ("no_repeat", "failed", call(1, "page_reader"), 1.0),
    ("no_repeat", "open", call(1), 1.0),
    ("no_repeat", "failed", FINISH, 0.0),
    ("modality", "open", call(1), 1.0),
    ("modality", "open", call(3), 0.5),
    ("modality", "ready", FINISH, 1.0),
    ("modality", "open", "", 0.0),
]


@pytest.mark.parametrize(("check", "which", "completion", "expected"), CASES)
def test_check_table(check, which, completion, expected, ledgers):
    assert CHECKS[check](Decision.parse(completion), ledgers[which]) == pytest.approx(expected, abs=1e-3)


def test_modality_prefers_unused_tool(ledgers):
    s = ledgers["open"]
    s.needs[3].role = "blocking"  # two actionable blocking needs: web (used once) and frame (unused)
    s.tool_call_counts["web_search"] = 2
    assert CHECKS["modality"](Decision.parse(call(3)), s) == 1.0
    assert CHECKS["modality"](Decision.parse(call(1)), s) == 0.5
    # an unused tool on the wrong need is a wrong call, not a new modality: no credit
    assert CHECKS["modality"](Decision.parse(call(1, tool="audio_scouting")), s) == 0.0


def test_conversational_and_plain_completions_agree(ledgers):
    s = ledgers["open"].model_dump_json()
    plain = closure_reward([call(1)], ledger=[s])
    conv = closure_reward([[{"role": "assistant", "content": call(1)}]], ledger=[s])
    assert plain == conv == [1.0]


HACKS = {
    "empty": "",
    "always finish": FINISH,
    "repeated action": call(1) + "\n" + call(1),
    "question as query": call(1, "web_search", Q),
    "unknown tool": '{"action": "call", "need": 1, "tool": "oracle"}',
    "blocked need": call(2),
    "filled need": call(0),
    "wrong tool": call(1, "code_executor"),
    "prose": "I think we should search the web for the birth year.",
}


@pytest.mark.parametrize("hack", sorted(HACKS))
@pytest.mark.parametrize("which", ["open", "failed"])
def test_hacks_score_below_a_correct_decision(hack, which, ledgers):
    s = ledgers[which]
    correct = rule_decision_text(s, explicit_query=which == "open")
    if which == "failed":  # the correct move after a failed composed query is a revised query
        correct = call(1, "web_search", "Ada Lovelace born year")
    ledger = [s.model_dump_json()] * 2
    good, bad = closure_reward([correct, HACKS[hack]], ledger=ledger)
    assert bad < good, (hack, bad, good)
    if which == "failed":
        return  # the revised query overlaps the composed one less than the failed repeat: only the total must lose
    # on an open ledger no single component rewards the hack more than the teacher's decision
    for name, check in CHECKS.items():
        assert check(Decision.parse(HACKS[hack]), s) <= check(Decision.parse(correct), s), name


@pytest.mark.parametrize("which", ["ready", "stuck"])
def test_finish_beats_calls_when_finishing_is_sound(which, ledgers):
    s = ledgers[which]
    ledger = [s.model_dump_json()] * 4
    scores = closure_reward([FINISH, call(1), call(3), call(2)], ledger=ledger)
    assert scores[0] == 1.0 and max(scores[1:]) < scores[0]


def test_teacher_decision_scores_one_on_every_ledger(ledgers):
    for s in ledgers.values():
        if s.failed_calls:
            continue
        assert closure_reward([rule_decision_text(s)], ledger=[s.model_dump_json()]) == [1.0]


def test_rubric_logs_every_component_and_skips_none(ledgers):
    logged: dict[str, float] = {}
    calls = []

    def flaky(completions, **kwargs):
        calls.append(len(completions))
        return [None, 1.0]

    rubric = ClosureRubric({"format": 1.0, "finish": 1.0}, extra={"judge": (flaky, 2.0)})
    s = ledgers["open"].model_dump_json()
    scores = rubric([FINISH, call(1)], ledger=[s, s], log_metric=lambda k, v: logged.__setitem__(k, v))
    assert scores == [0.5, 1.0]  # sample 0: judge skipped -> (1 + 0) / 2
    assert set(logged) == {"closure/format", "closure/finish", "closure/judge"}
    assert logged["closure/finish"] == 0.5 and logged["closure/judge"] == 1.0


def test_registry_and_params(ledgers):
    funcs = get_reward_funcs(["closure", "format"], closure={"weights": {"format": 1.0, "tool": 1.0}})
    assert [f.__name__ for f in funcs] == ["closure_reward", "format_reward"]
    s = ledgers["open"].model_dump_json()
    assert funcs[0]([call(1, "audio_scouting")], ledger=[s]) == [0.5]
    with pytest.raises(ValueError, match="unknown closure checks"):
        get_reward_funcs(["closure"], closure={"weights": {"nope": 1.0}})
    with pytest.raises(ValueError, match="not in reward_funcs"):
        get_reward_funcs(["format"], judge={"base_url": "x"})


def test_missing_ledger_column_is_a_clear_error():
    with pytest.raises(KeyError, match="ledger"):
        closure_reward([FINISH])


def test_random_reachable_ledgers_teacher_and_hacks():
    """300 reducer-built random ledgers: the teacher's decision passes the stop/target/tool checks, and always-finish,
    empty output and the question pasted as query score below it."""
    import random

    from omnidecision.ledger import finish_available
    from omnidecision.synthetic.states import random_ledger

    rng = random.Random(7)
    for _ in range(300):
        s = random_ledger(rng)
        teacher = rule_decision_text(s)
        d = Decision.parse(teacher)
        assert CHECKS["finish"](d, s) == CHECKS["target"](d, s) == CHECKS["tool"](d, s) == 1.0, teacher
        if finish_available(s) or CHECKS["no_repeat"](d, s) == 0.0:
            continue  # (the short-form teacher repeats a failed composed query: not the correct decision there)
        decision = json.loads(teacher)
        if "slot" in decision:  # a slot call (every need filled, a slot to compute): the query hack does not apply
            hacks = [FINISH, "", call(0, query=s.question)]
        else:
            hacks = [FINISH, "", call(decision["need"], query=s.question)]
        good, *bad = closure_reward([teacher, *hacks], ledger=[s.model_dump_json()] * 4)
        assert max(bad) < good, (teacher, bad, good)


@pytest.mark.parametrize("which", ["open", "failed"])
def test_wrong_tool_on_the_right_need_earns_no_call_credit(which, ledgers):
    """Gated (the default): a wrong-tool call on an actionable need burns an attempt in the loop, so it must not
    outscore a call on a filled need (rejected, burns none); ungated it did, which GRPO learned (rubric docs)."""
    s = ledgers[which].model_dump_json()
    wrong_tool, filled_need = call(1, "code_executor"), call(0)
    gated = ClosureRubric()([wrong_tool, filled_need], ledger=[s, s])
    assert gated[0] <= gated[1], gated
    ungated = ClosureRubric(gate_on_tool=False)([wrong_tool, filled_need], ledger=[s, s])
    assert ungated[0] > ungated[1], ungated
    # the components themselves are logged ungated: the need was right
    comps = ClosureRubric().components([wrong_tool], [ledgers[which]])
    assert comps["target"] == [1.0] and comps["tool"] == [0.0]
    # no effect where the tool fits, or on finish decisions
    for text in (call(1, "web_search"), FINISH):
        assert ClosureRubric()([text], ledger=[s]) == ClosureRubric(gate_on_tool=False)([text], ledger=[s])
