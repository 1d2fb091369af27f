"""Judges: OmniGAIA protocol (exact match, LLM judge, judge failures), the official GAIA scorer and the lenient match,
the recipe's choice between them, MCQ letters."""

from __future__ import annotations

import asyncio

import pytest

from omnidecision.protocol.chat import BackendError, ChatRequest, ChatResponse
from omnidecision.tasks.grading import (
    extract_choice,
    extract_prediction,
    gaia_scorer,
    judge_offline,
    judge_run,
    lenient_match,
    parse_judge_reply,
    parse_number,
)
from omnidecision.tasks.schema import Task

OPTIONS = ["A. A man is running", "B. A dog barks", "C. Two people talk", "D. Nobody appears"]


class FixedJudge:
    """A ChatBackend returning fixed text (or raising), recording what it was asked."""

    def __init__(self, text: str | None = None, error: str | None = None) -> None:
        self.text, self.error, self.requests = text, error, []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if self.error:
            raise BackendError(self.error)
        return ChatResponse(text=self.text or "")


def _run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("B", "B"), ("b", None), ("(B)", "B"), ("[C]", "C"), ("Answer: C", "C"), ("The answer is D.", "D"),
        ("I pick option D", "D"), ("choice: A", "A"), ("A", "A"), ("A.", "A"), ("**B**", "B"),
        ("A man is running in the video.", "A"),  # matches option A's text, not the article
        ("A man appears, so the answer is (C).", "C"),
        ("A dog is seen. Answer: B", "B"),
        ("A woman walks by a car.", None),  # only the article "A": no option picked
        ("C. Two people talk", "C"),
        ("<think>maybe A</think><answer>B</answer>", "B"),
        ("Two people talk to each other", "C"),
        ("", None), (None, None), ("I cannot tell.", None),
    ],
)
def test_extract_choice(text, expected):
    assert extract_choice(text, OPTIONS) == expected


def test_extract_choice_without_options_defaults_to_abcd():
    assert extract_choice("A cat. Final: E") is None
    assert extract_choice("So I'd go with B here") == "B"


@pytest.mark.parametrize(
    ("pred", "gold", "ok"),
    [
        ("1,234", "1234", True), ("$1,234.00", "1234", True), ("46.31%", "46.31", True), ("46.31", "46.31%", True),
        ("11,386 km", "11386", True), ("12 years", "12", True), ("2.45 m/s²", "2.45", True), ("13", "12", False),
        ("12.5", "12", False), ("twelve", "12", False), ("12 of 20", "12", False), ("34,943", "34,943", True),
        ("-52.62", "-52.62", True),
        ("kale, broccoli", "Kale; Broccoli", True), ("broccoli, kale", "kale, broccoli", False),
        ("kale", "kale, broccoli", False), ("Brands Hatch; 2.3 km; November", "Brands Hatch; 2.3; november", True),
        ("1, 2", "12", False),
        ("The Marker.", "marker", True), ("an apple", "Apple", True), ("Kevin  Morgan", "kevin morgan", True),
        ("Morgan Kevin", "Kevin Morgan", False), (None, "x", False),
    ],
)
def test_lenient_match(pred, gold, ok):
    assert lenient_match(pred, gold) is ok


# The official GAIA rules (the leaderboard's question_scorer): each case names the rule it exercises.
GAIA_CASES = [
    # a gold that float() accepts is a number; the prediction loses every "$", "%" and "," and must float() equal
    ("$1,000", "1000", True), ("46.31%", "46.31", True), ("1,234.0", "1234", True), ("42.0", "42", True),
    (" 42 ", "42", True), ("1e3", "1000", True), ("42", "43", False), ("12.5", "12", False),
    ("790 units", "790", False), ("12 km", "12", False), ("twelve", "12", False), ("\u22125", "-5", False),
    ("nan", "nan", False),  # NaN equals nothing, itself included
    # strings: ALL whitespace and ASCII punctuation removed, lower-cased ("seagull vs. sea gull" in the rules)
    ("seagull", "sea gull", True), ("Showmethemoney!", "Show me the money!", True), ("2years", "2 years", True),
    ("The Marker.", "the marker", True), ("Kevin  Morgan", "kevin morgan", True),
    ("The Marker", "marker", False), ("an apple", "Apple", False),  # articles are kept
    ("46.31", "46.31%", True),  # a gold that float() rejects is a string: "." and "%" go with the punctuation
    ("Morgan Kevin", "Kevin Morgan", False),
    # lists: a gold with "," or ";" splits on both, same length, element-wise, order kept
    ("apple; Pear", "apple, pear", True), ("1; 2; 3", "1,2,3", True), ("$1, 2%", "1, 2", True),
    ("pear, apple", "apple, pear", False), ("1,2", "1,2,3", False), ("a b, c", "ab, c", True),
    # list elements keep their punctuation: a trailing period is wrong, and so is a dropped one
    ("Paris, the city of light.", "Paris, the city of light", False), ("St Louis, Rome", "St. Louis, Rome", False),
    ("34,943", "34,943", True), ("34943", "34,943", False),  # float() rejects "34,943": it is a two-element list
    # a missing prediction is the string "None"
    (None, "x", False), (None, "None", True), ("", "x", False),
]


@pytest.mark.parametrize(("pred", "gold", "ok"), GAIA_CASES)
def test_gaia_scorer_follows_the_official_rules(pred, gold, ok):
    assert gaia_scorer(pred, gold) is ok


@pytest.mark.parametrize(
    ("pred", "gold", "gaia", "lenient"),
    [("790 units", "790", False, True), ("Paris, the city of light.", "Paris, the city of light", False, True),
     ("2years", "2 years", True, False), ("Showmethemoney!", "Show me the money!", True, False)],
)
def test_the_two_scorers_differ_where_the_issue_found_them_differ(pred, gold, gaia, lenient):
    assert (gaia_scorer(pred, gold), lenient_match(pred, gold)) == (gaia, lenient)


def test_the_recipe_scorer_decides_and_the_method_names_it():
    task = Task(id="s", question="q", answer="790", source="synthetic")
    assert (judge_offline(task, "790 units").correct, judge_offline(task, "790 units").method) == (
        True, "lenient_match")
    gaia = judge_offline(task, "790 units", scorer="gaia")
    assert (gaia.correct, gaia.method) == (False, "gaia_scorer")
    og = judge_offline(_og("Show me the money!"), "<answer>Showmethemoney!</answer>", scorer="gaia")
    assert (og.correct, og.method) == (True, "gaia_scorer_offline") and "gaia" in og.detail
    with pytest.raises(ValueError, match="judge.scorer"):
        judge_offline(task, "790", scorer="strict")  # type: ignore[arg-type]
    judge = FixedJudge("Correct")  # a scorer hit never asks the LLM; a miss does
    assert _run(judge_run(task, "790", llm=judge, scorer="gaia")).method == "gaia_scorer" and judge.requests == []
    assert _run(judge_run(task, "790 units", llm=judge, scorer="gaia")).method == "llm_judge"


def test_parse_number_rejects_non_numbers():
    assert parse_number("1930") == 1930.0
    assert parse_number("433 Eros") == 433.0 and parse_number("433 Eros", allow_unit=False) is None
    assert lenient_match("433", "433 Eros") is False and lenient_match("433 eros", "433 Eros") is True
    assert parse_number("between 3 and 4") is None and parse_number("") is None and parse_number("1e999") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("x <answer>12</answer> y <answer> 13 </answer>", "13"),
     (" ".join(f"w{i}" for i in range(30)), " ".join(f"w{i}" for i in range(10, 30))),
     ("", ""), ("<think><answer>1</answer></think> final 2", "final 2")],
)
def test_extract_prediction(text, expected):
    assert extract_prediction(text) == expected


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [("Correct", True), ("correct.", True), ("Incorrect", False), ("INCORRECT", False), ("not correct", False),
     ("<think>it is correct? no</think>Incorrect", False), ("", None), ("   ", None), (None, None),
     ("I am not sure", None), ("Yes", None)],
)
def test_parse_judge_reply(reply, verdict):
    assert parse_judge_reply(reply) is verdict


def _og(answer="Marker", **kw) -> Task:
    return Task(id="g", question="Which binding brand?", answer=answer, source="omnigaia", **kw)


def test_omnigaia_exact_match_skips_the_llm():
    judge = FixedJudge("Incorrect")
    res = _run(judge_run(_og(), "I think <answer> marker </answer>", llm=judge))
    assert (res.correct, res.method, res.prediction) == (True, "exact_match", "marker")
    assert judge.requests == []


def test_omnigaia_llm_judge_uses_the_benchmark_prompt():
    judge = FixedJudge("Correct")
    res = _run(judge_run(_og(), "<answer>Marker bindings</answer>", llm=judge))
    assert (res.correct, res.method) == (True, "llm_judge")
    (req,) = judge.requests
    prompt = req.messages[0]["content"]
    assert req.role == "judge" and "Model Predicted Answer: Marker bindings" in prompt
    assert "Labeled Answer: Marker" in prompt and "'Correct'" in prompt and "'Incorrect'" in prompt
    assert _run(judge_run(_og(), "<answer>Salomon</answer>", llm=FixedJudge("Incorrect"))).correct is False


@pytest.mark.parametrize("reply", ["", "   ", "Hmm, hard to say."])
def test_empty_or_unclear_judge_reply_is_a_failure_not_correct(reply):
    res = _run(judge_run(_og(), "<answer>Marker bindings</answer>", llm=FixedJudge(reply)))
    assert res.correct is None and res.method == "llm_judge_failed"


def test_backend_error_is_a_judge_failure():
    res = _run(judge_run(_og(), "<answer>Marker bindings</answer>", llm=FixedJudge(error="timeout after 3 tries")))
    assert (res.correct, res.method, res.detail) == (None, "llm_judge_failed", "timeout after 3 tries")


def test_omnigaia_offline_and_empty_prediction():
    res = judge_offline(_og("11386"), "The distance is <answer>11,386 km</answer>")
    assert (res.correct, res.method) == (True, "lenient_match_offline")
    assert _run(judge_run(_og(), "", llm=FixedJudge("Correct"))).correct is False  # empty: never sent to the judge
    assert _run(judge_run(_og(), None)).method == "empty_prediction"


def test_mcq_dispatch_never_calls_the_llm():
    task = Task(id="w", question="q", answer="C", answer_type="mcq", options=OPTIONS, source="worldsense")
    judge = FixedJudge("Correct")
    assert _run(judge_run(task, "A man is there, and the answer is (C)", llm=judge)).correct is True
    res = _run(judge_run(task, "A woman walks.", llm=judge))
    assert res.correct is False and res.detail == "no option letter found in the prediction"
    assert judge.requests == []


def test_generic_tasks_use_the_string_scorer_then_the_llm():
    task = Task(id="s", question="q", answer="1,930", answer_type="number", source="synthetic")
    assert judge_offline(task, "1930").correct is True
    assert judge_offline(task, "1931").correct is False
    res = _run(judge_run(task, "about nineteen thirty", llm=FixedJudge("Correct")))
    assert (res.correct, res.method) == (True, "llm_judge")
    nogold = Task(id="n", question="q", answer=None)
    assert judge_offline(nogold, "x").correct is None


@pytest.mark.parametrize(("outcome", "correct"), [("insufficient", True), ("accepted", False), ("forced", False),
                                                  ("budget", False), (None, None)])
def test_unanswerable_tasks_are_judged_on_the_outcome(outcome, correct):
    task = Task(id="u", question="What did the narrator whisper?", answer=None, answerable=False)
    result = asyncio.run(judge_run(task, "something", None, outcome=outcome))
    assert result.correct is correct and result.method == "unanswerable"
