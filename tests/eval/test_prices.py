"""Cost per question from a price table (issue 29): every call a run records is counted by kind (planner steps, role
calls, LLM judge, each tool, perception with its tokens and seconds); kinds without a price are listed as unpriced,
never zero; a broken table names the file and the field; the eval recipe's `prices:` reaches the report.

    .venv/bin/pytest tests/eval/test_prices.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnidecision.eval.checklist import prepare_eval
from omnidecision.eval.prices import CALL_KINDS, PriceTableError, cost_lines, cost_table, load_prices, run_calls
from omnidecision.eval.report import build_report, render_markdown
from omnidecision.eval.runner import eval_recipe_from_dict, run_prepared
from omnidecision.ledger.schema import PERCEPTION_TOOLS, TOOL_NAMES, AssetRef, Ledger, TaskContext
from omnidecision.protocol.chat import Usage
from omnidecision.protocol.records import JudgeResult, RoleCall, RunRecord, StepRecord, Totals
from omnidecision.tools.base import TOOLS, register_tool

from .conftest import teacher_recipe

ROOT = Path(__file__).resolve().parents[2]


def perception_obs(tool: str, usage: dict | None, start: float | None = None, end: float | None = None,
                   cached: bool = False) -> dict:
    fields = {"asset_id": "v", "model": "omni-7b", **({"usage": usage} if usage else {}),
              **({"cached": True} if cached else {})}
    return {"tool": tool, "ok": True, "text": "x", "fields": fields,
            "source": {"tool": tool, "asset_id": "v", "start": start, "end": end}}


def a_run(name: str = "r") -> RunRecord:
    """Two planner steps (the second an audio call over 10 s of a 60 s video), a critic and a finalizer call, one
    failed call with no reply, an LLM judge, two web searches and a code run."""
    u = Usage(prompt_tokens=1000, completion_tokens=100)
    steps = [
        StepRecord(step=0, planner_messages=[], usage=u, observation={"tool": "web_search", "ok": True},
                   calls=[RoleCall(role="critic", raw="{}", usage=Usage(prompt_tokens=2000, completion_tokens=50),
                                   model="gpt-4.1-mini-2025-04-14")]),
        StepRecord(step=1, planner_messages=[], usage=u,
                   observation=perception_obs("audio_scouting", {"prompt_tokens": 500, "completion_tokens": 20},
                                              start=5.0, end=15.0),
                   calls=[RoleCall(role="critic", error="HTTP 500 after 3 retries")]),  # no reply: not billed
    ]
    return RunRecord(
        run_id=name, task_id=name, outcome="accepted", planner_model="planner-sft", steps=steps,
        decompose=RoleCall(role="decompose", raw="{}", usage=Usage(prompt_tokens=3000, completion_tokens=300),
                           model="gpt-4.1-mini-2025-04-14"),
        final_calls=[RoleCall(role="finalizer", raw="{}", usage=Usage(prompt_tokens=1000, completion_tokens=10),
                              model="gpt-4.1-mini")],
        judge=JudgeResult(correct=True, method="llm_judge", usage=Usage(prompt_tokens=400, completion_tokens=2),
                          model="gpt-4.1-mini"),
        final_ledger=Ledger(initialized=True, context=TaskContext(assets=[AssetRef(id="v", type="video",
                                                                                   duration=60.0)])),
        totals=Totals(tool_calls={"web_search": 2, "audio_scouting": 1, "code_executor": 1}))


TABLE = """
currency: USD
models:
  gpt-4.1-mini: {per_1k_prompt: 0.0004, per_1k_completion: 0.0016}
kinds:
  planner: {per_1k_prompt: 0.0001, per_1k_completion: 0.0002}
  web_search: {per_call: 0.005}
  perception: {per_second: 0.001, per_call: 0.01}
"""


@pytest.fixture()
def table(tmp_path) -> Path:
    p = tmp_path / "prices.yaml"
    p.write_text(TABLE)
    return p


def test_every_tool_is_a_call_kind():
    assert set(TOOL_NAMES) <= set(CALL_KINDS) and "perception" in CALL_KINDS


def test_calls_of_a_run_by_kind():
    kinds = [c.kind for c in run_calls(a_run())]
    assert sorted(kinds) == sorted(["planner", "planner", "critic", "decompose", "finalizer", "judge", "web_search",
                                    "web_search", "audio_scouting", "code_executor"])
    audio = next(c for c in run_calls(a_run()) if c.kind == "audio_scouting")
    assert audio.seconds == 10.0 and audio.usage.prompt_tokens == 500 and audio.model == "omni-7b"


def test_cost_per_kind_from_the_table(table):
    rs = [a_run("a"), a_run("b")]
    cost = cost_table(rs, load_prices(table), table_path=str(table))
    k = cost["by_kind"]
    mini = (0.0004, 0.0016)
    assert k["planner"]["cost_per_question"] == pytest.approx(2 * (1000 * 0.0001 + 100 * 0.0002) / 1000)
    assert k["planner"]["price_from"] == ["kind planner"]
    # the critic's dated model name finds the model's price; the failed call without a reply is not counted
    assert k["critic"]["calls"] == 2 and k["critic"]["price_from"] == ["model gpt-4.1-mini"]
    assert k["critic"]["cost_per_question"] == pytest.approx((2000 * mini[0] + 50 * mini[1]) / 1000)
    assert k["judge"]["cost_per_question"] == pytest.approx((400 * mini[0] + 2 * mini[1]) / 1000)
    assert k["web_search"]["cost_per_question"] == pytest.approx(2 * 0.005)
    # the perception tool falls back to the kind `perception`: per call + 10 seconds
    assert k["audio_scouting"]["cost_per_question"] == pytest.approx(0.01 + 10 * 0.001)
    assert k["audio_scouting"]["price_from"] == ["kind perception"]
    # code_executor has no price: listed as unpriced, not zero
    assert cost["unpriced"] == ["code_executor"] and k["code_executor"]["cost"] is None
    assert cost["complete"] is False
    total = sum(v["cost_per_question"] or 0 for v in k.values())
    assert cost["per_question"] == pytest.approx(total)
    md = "\n".join(cost_lines(cost))
    assert "Unpriced (no price in the table, not counted): code_executor (2 calls)" in md
    assert "| code_executor | 1.00 | 0 | 0 | – | unpriced |" in md


def test_missing_quantities_make_a_kind_incomplete_and_cached_calls_cost_nothing(table):
    r = a_run()
    # the perception call's span unknown and its asset without a duration: per_second cannot be applied
    r.steps[1].observation = perception_obs("audio_scouting", None)
    r.final_ledger = Ledger(initialized=True)
    r.judge = JudgeResult(correct=True, method="llm_judge")  # a record from before judge usage was kept
    cached = a_run("c")
    cached.steps[1].observation = perception_obs("audio_scouting", {"prompt_tokens": 9, "completion_tokens": 9},
                                                 start=0.0, end=30.0, cached=True)
    # the judge's model: the recipe's judge.llm.model (the report passes it from its meta)
    cost = cost_table([r, cached], load_prices(table), judge_model="gpt-4.1-mini")
    k = cost["by_kind"]
    assert cost["incomplete"] == ["judge", "audio_scouting"]
    assert k["judge"]["missing"] == 1 and k["judge"]["priced"] == 1
    assert k["audio_scouting"] == {**k["audio_scouting"], "calls": 2, "cached": 1, "missing": 1, "priced": 0}
    assert k["audio_scouting"]["cost"] == 0.0  # the cached one: no request made
    row = "| audio_scouting | 1.00 | 0 | 0 | kind perception | 0.00000 USD (incomplete) |"  # cached: no tokens spent
    assert row in "\n".join(cost_lines(cost))


def test_without_a_table_every_kind_is_unpriced():
    rep = build_report([a_run()])
    assert rep["cost"]["per_question"] is None and rep["cost"]["table"] is None
    assert set(rep["cost"]["unpriced"]) == set(rep["cost"]["by_kind"])
    assert "no price table (eval recipe `prices:`); no call is priced" in render_markdown(rep)


@pytest.mark.parametrize(("text", "field"), [
    ("kinds:\n  web_search: {per_call: -1}\n", "kinds.web_search.per_call"),
    ("kinds:\n  web_serch: {per_call: 1}\n", "kinds.web_serch"),
    ("kinds:\n  planner: {}\n", "kinds.planner"),
    ("models:\n  m: {per_token: 1}\n", "models.m.per_token"),
    ("currency: USD\nprice: 3\n", "price"),
])
def test_a_broken_table_names_the_file_and_the_field(tmp_path, text, field):
    p = tmp_path / "broken.yaml"
    p.write_text(text)
    with pytest.raises(PriceTableError) as err:
        load_prices(p)
    assert str(err.value).startswith(f"{p}: {field}")


def test_the_shipped_table_parses_and_prices_the_api_models():
    table = load_prices(ROOT / "configs/prices/default.yaml")
    assert table.price_for("judge", "gpt-4.1-mini-2025-04-14")[1] == "model gpt-4.1-mini"
    assert table.price_for("planner", "qwen3-8b-sft") is None  # self-served: left unpriced on purpose
    assert not set(PERCEPTION_TOOLS) & set(table.kinds)


def test_the_recipe_prices_reach_the_report(synth_dir, tmp_path, table):
    from omnidecision.eval.runner import eval_recipe_from_dict, run_eval

    from .conftest import teacher_recipe

    recipe = teacher_recipe(synth_dir, tmp_path / "eval")
    recipe = eval_recipe_from_dict({**recipe.model_dump(mode="json"), "prices": str(table), "samples": 1,
                                    "plots": False, "tasks": {**recipe.tasks.model_dump(mode="json"), "limit": 4}})
    rep = run_eval(recipe, progress=False)
    on_disk = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert on_disk["cost"]["table"] == str(table) and rep["cost"]["by_kind"]["planner"]["price_from"]
    assert rep["cost"]["by_kind"]["planner"]["calls"] == sum(len(r.steps) for r in _records(tmp_path / "eval"))
    assert "## Cost per question (by call kind)" in (tmp_path / "eval" / "report.md").read_text()
    broken = tmp_path / "broken.yaml"
    broken.write_text("kinds: {planner: {per_call: oops}}\n")
    with pytest.raises(PriceTableError, match="kinds.planner.per_call"):
        run_eval(eval_recipe_from_dict({**recipe.model_dump(mode="json"), "prices": str(broken),
                                        "out": str(tmp_path / "eval2")}), progress=False)
    assert not (tmp_path / "eval2" / "trajectories.jsonl").exists()  # refused before any run


def test_the_report_prices_with_the_table_its_checklist_read(synth_dir, tmp_path, table):
    """The run reports with the very table its checklist read and checked: a price file broken after the check
    (mid-run) neither stops the report after the runs nor changes its prices."""
    recipe = teacher_recipe(synth_dir, tmp_path / "eval")
    recipe = eval_recipe_from_dict({**recipe.model_dump(mode="json"), "prices": str(table), "samples": 1,
                                    "plots": False, "tasks": {**recipe.tasks.model_dump(mode="json"), "limit": 2}})
    prepared = prepare_eval(recipe, probe=False)
    assert prepared.prices is not None and prepared.prices.path == str(table)
    table.write_text("kinds: {planner: {per_call: oops}}\n")  # broken after the check: never read again
    rep = run_prepared(prepared, progress=False)
    planner = rep["cost"]["by_kind"]["planner"]
    assert rep["cost"]["table"] == str(table) and planner["price_from"] == ["kind planner"]
    tokens = planner["prompt_tokens"] * 0.0001 / 1000 + planner["completion_tokens"] * 0.0002 / 1000
    assert planner["cost"] == pytest.approx(tokens) and tokens > 0


def _records(out: Path):
    from omnidecision.eval.runner import load_records

    return load_records(out)


def test_the_dry_run_checks_the_price_table(synth_dir, tmp_path, table):
    from omnidecision.eval.dryrun import eval_dry_run
    from omnidecision.eval.runner import eval_recipe_from_dict

    from .conftest import teacher_recipe

    recipe = teacher_recipe(synth_dir, tmp_path / "eval")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kinds: {web_search: {per_query: 0.01}}\n")
    for prices, status in ((table, "ok"), (broken, "error"), (None, "ok")):
        r = eval_recipe_from_dict({**recipe.model_dump(mode="json"), "prices": str(prices) if prices else None})
        check = next(c for c in eval_dry_run(r, Path("recipe.yaml"), 0).checks if c.what == "prices")
        assert check.status == status, check
    assert "kinds.web_search.per_query" in next(
        c for c in eval_dry_run(eval_recipe_from_dict({**recipe.model_dump(mode="json"), "prices": str(broken)}),
                                Path("recipe.yaml"), 0).checks if c.what == "prices").detail


@pytest.fixture
def own_tool():
    """A tool of one's own, registered in this process as a plugin would register it."""

    @register_tool("price_probe")  # a name no other test registers (a registry is per process)
    class PriceProbe:  # never run here: only its calls are priced
        name: str

    yield "price_probe"
    TOOLS.unregister("price_probe")


def test_a_tool_of_ones_own_is_priced_by_its_name(tmp_path, own_tool):
    path = tmp_path / "prices.yaml"
    path.write_text(TABLE + f"  {own_tool}: {{per_call: 0.002}}\n")
    run = a_run()
    run.totals.tool_calls[own_tool] = 3
    cost = cost_table([run], load_prices(path), table_path=str(path))
    assert cost["by_kind"][own_tool]["calls"] == 3
    assert cost["by_kind"][own_tool]["cost_per_question"] == pytest.approx(3 * 0.002)
    assert own_tool not in cost["unpriced"]
    TOOLS.unregister(own_tool)  # without its plugin the name is no kind: the table's error names the field
    with pytest.raises(PriceTableError, match=f"kinds.{own_tool}.*unknown call kind '{own_tool}'"):
        load_prices(path)
