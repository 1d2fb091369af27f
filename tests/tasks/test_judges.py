"""Judges: OmniGAIA protocol (exact match, LLM judge, judge failures), GAIA quasi-exact match, MCQ letters."""

from __future__ import annotations

import asyncio

import pytest

from omnidecision.protocol.chat import BackendError, ChatRequest, ChatResponse
from omnidecision.tasks.judges import (
    extract_choice,
    extract_prediction,
    judge_offline,
    judge_run,
    parse_judge_reply,
    parse_number,
    quasi_exact_match,
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
def test_quasi_exact_match(pred, gold, ok):
    assert quasi_exact_match(pred, gold) is ok


def test_parse_number_rejects_non_numbers():
    assert parse_number("1930") == 1930.0
    assert parse_number("433 Eros") == 433.0 and parse_number("433 Eros", allow_unit=False) is None
    assert quasi_exact_match("433", "433 Eros") is False and quasi_exact_match("433 eros", "433 Eros") is True
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
    assert (res.correct, res.method) == (True, "qem_offline")
    assert _run(judge_run(_og(), "", llm=FixedJudge("Correct"))).correct is False  # empty: never sent to the judge
    assert _run(judge_run(_og(), None)).method == "empty_prediction"


def test_mcq_dispatch_never_calls_the_llm():
    task = Task(id="w", question="q", answer="C", answer_type="mcq", options=OPTIONS, source="worldsense")
    judge = FixedJudge("Correct")
    assert _run(judge_run(task, "A man is there, and the answer is (C)", llm=judge)).correct is True
    res = _run(judge_run(task, "A woman walks.", llm=judge))
    assert res.correct is False and res.detail == "no option letter found in the prediction"
    assert judge.requests == []


def test_generic_tasks_use_quasi_exact_match_then_the_llm():
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
