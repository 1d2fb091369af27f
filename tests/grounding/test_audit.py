"""The reward audit (grounding/audit.py, `omnidecision audit rewards`): it runs on a harvest and writes its report,
and a proxy planted as the negation of the executed return is reported with a within-group correlation below 0."""

from __future__ import annotations

import asyncio
import json
import shutil

from typer.testing import CliRunner

from omnidecision.branch.parent import load_parent
from omnidecision.grounding.audit import AuditInputs, AuditSettings, run_audit
from omnidecision.grounding.metrics import Candidate, audit_metrics, proxy_metrics
from omnidecision.grounding.returns import Executor, parent_index


def test_the_audit_command_runs_on_a_harvest_and_writes_its_report(habits_runs, tmp_path):
    from omnidecision.cli import app

    out = tmp_path / "audit"
    res = CliRunner().invoke(app, ["audit", "rewards", "--data", str(habits_runs["data"] / "rl"), "--runs",
                                   str(habits_runs["collect"]), "--out", str(out), "--states", "12", "--k", "4"])
    assert res.exit_code == 0, res.output
    report = json.loads((out / "audit.json").read_text())
    assert report["states"] == 12 and len(report["candidates"]) == 48
    assert {"closure", "finish", "format"} <= set(report["metrics"]["overall"])
    assert report["cost"]["executions"] + report["cost"]["cached"] == 48
    assert (out / "audit.png").stat().st_size > 0 and "| closure |" in (out / "audit.md").read_text()
    for c in report["candidates"]:  # every executed return is a mean of judged outcomes
        assert 0.0 <= c["executed"] <= 1.0


def test_a_proxy_that_negates_the_executed_return_correlates_below_zero(habits_runs, tmp_path):
    index = parent_index([habits_runs["collect"]])
    oracle = Executor("teacher")

    def negated(completions, run_id, step, **_):  # the planted proxy: minus what execution gives
        out = []
        for text, rid, t in zip(completions, run_id, step, strict=True):
            parent = load_parent(index[rid], rid)
            out.append(-asyncio.run(oracle.executed_return(parent, int(t), text))[0])
        return out

    report = run_audit(AuditInputs(habits_runs["data"] / "rl", (habits_runs["collect"],)), tmp_path / "audit",
                       settings=AuditSettings(states=20, k=4, extra_proxies={"negated": negated}))
    planted = report["metrics"]["overall"]["negated"]
    assert planted["spearman_groups"] >= 1 and planted["within_group_spearman"] < 0
    assert planted["top1_agreement"] < 0.5 and planted["auroc"] < 0.5


def test_metrics_read_groups_not_states():
    """A proxy that ranks within each state correctly but is offset across states: within-group correlation +1,
    AUROC below 1 (the two measure different things)."""
    cands = [Candidate(state=s, decision=d, action=a, executed=e, proxies={"p": p})
             for s, off in (("a", 0.0), ("b", 0.5))
             for d, a, e, p in (('{"action": "finish"}', "finish", 0.0, 0.1 + off),
                                ('{"action": "call", "need": 0}', "call:0:-", 1.0, 0.3 + off))]
    m = proxy_metrics(cands, "p")
    assert m["within_group_spearman"] == 1.0 and m["top1_agreement"] == 1.0 and m["auroc"] == 0.75
    assert audit_metrics(cands, ["p"])["group_kinds"]["finish"] == 2


def test_the_docs_audit_table_is_the_result_files():
    """docs/grounding.md shows the audit of the demo's SFT planner as its result file holds it."""
    from pathlib import Path

    from omnidecision.grounding.report import overall_rows

    root = Path(__file__).resolve().parents[2]
    report = json.loads((root / "docs" / "results" / "audit-demo-sft.json").read_text())
    page = (root / "docs" / "grounding.md").read_text()
    assert "\n".join(overall_rows(report["metrics"]["overall"])) in page
    varying = report["metrics"]["overall"]["closure"]["varying_states"]
    assert f"In only {varying} of the {report['states']} states" in page


def test_the_audit_names_each_malformed_line_it_skips_on_stderr(habits_runs, tmp_path):
    """Issue 65: a malformed line of --runs dropped its states with only a count in audit.json (fails on 53b5bfd)."""
    from omnidecision.cli import app

    runs = tmp_path / "collect"
    shutil.copytree(habits_runs["collect"], runs)
    shard = sorted(runs.glob("trajectories*.jsonl"))[0]
    lines = shard.read_text("utf-8").splitlines()
    shard.write_text("\n".join([lines[0], '{"run_id": "x", "task_id": "t"}', "{not json", *lines[1:]]) + "\n",
                     "utf-8")
    out = tmp_path / "audit"
    res = CliRunner().invoke(app, ["audit", "rewards", "--data", str(habits_runs["data"] / "rl"), "--runs", str(runs),
                                   "--out", str(out), "--states", "2", "--k", "2"])
    assert res.exit_code == 0, res.output
    skipped = [line for line in res.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 2 and skipped[0] == f"skipped {shard}:2: field outcome: Field required", res.stderr
    assert skipped[1].startswith(f"skipped {shard}:3: not valid JSON: "), res.stderr
    assert json.loads((out / "audit.json").read_text())["skipped_lines"] == [s.removeprefix("skipped ")
                                                                            for s in skipped]
