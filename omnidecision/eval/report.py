"""The eval report: metrics over a trajectory file (one RunRecord per line) → report.json and report.md.

    python -m omnidecision.eval.report runs/eval/trajectories.jsonl --out runs/eval

`build_report(records, meta)` returns the dict written to report.json. Keys (always present): accuracy, ci95,
n, correct, judge_failures, by_level, by_category, outcomes, accuracy_by_outcome, need_closure_rate,
tool_calls_per_question, prompt_tokens_per_step, tokens_per_question, invalid_action_rate, attribution,
cost_per_question, wall_time, errors, mode, replay, planner, judge_methods, attribution_runs (per wrong run: the
category of `eval.attribution`, the need and the reason) (an eval run adds `judge`: the recipe's
string scorer and LLM judge, and `environment`: live, replay, offline, or "offline: no tools" for a benchmark that
needs tools run offline with `--allow-offline`). Accuracy counts a run as correct only when the judge said so; a
judge failure (`judge.correct is None`) is counted under `judge_failures` and never as correct.
`ci95` (overall, by level, by category) is clustered by task: with several samples per task the task is the unit
(`stats.task_accuracy_ci`; `ci_method` says which interval, `n_tasks` and `samples_per_task` the units,
`ci95_task_bootstrap` a task-level bootstrap of the per-task mean accuracy), as in `compare`'s paired statistics.
A task without a gold answer (the judge's `no_gold`: unanswerable by design, e.g. in the synthetic suite) is
correct exactly when the run stopped with outcome `insufficient` (the agent declined to guess); such runs are also
counted under `unanswerable`.
`insufficient` runs abstain ("insufficient evidence") and keep their best-effort draft apart: `accuracy` judges what
was submitted, `accuracy_with_drafts` counts each abstaining run's draft instead (its `draft_judge`; on a task
without an answer a submitted draft is wrong), side by side (`drafts`: how many runs abstained with a draft, and
how many of those drafts were right).
Runs with outcome `error` (a dead endpoint, a crash: no answer at all) are not wrong answers: `error_runs` counts
them, `wrong` counts the judged runs that answered wrongly, `accuracy_without_errors` is the accuracy over the runs
that did not error, and failure attribution leaves them out. `accuracy` still counts them as not correct (never
inflated); report.md says how many there were and that a restart retries them.
Four tables come from modules of their own: `outcome_table` (per outcome, and the accuracy had every `forced` run
abstained: `eval.outcomes`), `stuck` (which needs stalled, by modality: `eval.stuck`), `cost` (per call kind,
from a price table, `--prices` or the recipe's `prices:`: `eval.prices`) and `decisions` (how often the planner
repeats a (need, tool) that came back empty while another listed source is untried, and finishes while a blocking
need can still advance: `eval.decisions`).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omnidecision.eval.attribution import CATEGORIES, attribute_run
from omnidecision.eval.correctness import is_correct, is_correct_with_draft, judge_failed, unanswerable
from omnidecision.eval.decisions import decision_diagnostics, decision_lines
from omnidecision.eval.outcomes import outcome_lines, outcome_table
from omnidecision.eval.plots import report_plots
from omnidecision.eval.prices import PriceTable, cost_lines, cost_table, load_prices
from omnidecision.eval.stuck import stuck_lines, stuck_table
from omnidecision.eval.teacher import teacher_lines
from omnidecision.ledger import unmet_blocking
from omnidecision.protocol.records import OUTCOMES, RunRecord
from omnidecision.protocol.redaction import redact_text
from omnidecision.stats import mean, rate, task_accuracy_ci

logger = logging.getLogger(__name__)

REPORT_KEYS: tuple[str, ...] = (
    "accuracy", "ci95", "n", "correct", "judge_failures", "by_level", "by_category", "outcomes",
    "accuracy_by_outcome", "need_closure_rate", "tool_calls_per_question", "prompt_tokens_per_step",
    "tokens_per_question", "invalid_action_rate", "attribution", "cost_per_question", "wall_time", "errors",
    "mode", "replay", "planner", "outcome_table", "stuck", "cost", "decisions",
)
AT_STEP = 15


def _acc(rs: list[RunRecord], detail: bool = False) -> dict[str, Any]:
    """n, correct, accuracy (over runs) and its 95% CI clustered by task (`stats.task_accuracy_ci`: several samples
    of one task are not independent); `detail` adds the method, the task count and the task-level bootstrap."""
    k = sum(is_correct(r) for r in rs)
    ci = task_accuracy_ci((r.task_id, is_correct(r)) for r in rs)
    out = {"n": len(rs), "correct": k, "accuracy": rate(k, len(rs)), "ci95": ci["ci95"]}
    if detail:
        out.update({key: ci[key] for key in ("ci_method", "n_tasks", "samples_per_task", "ci95_task_bootstrap")})
    return out


def closure(r: RunRecord) -> float | None:
    """Share of the final ledger's blocking needs that are filled (None without a ledger or blocking needs)."""
    led = r.final_ledger
    if led is None or not led.initialized:
        return None
    blocking = [n for n in led.needs if n.role == "blocking"]
    if not blocking:
        return None
    return 1.0 - len(unmet_blocking(led)) / len(blocking)


def _prompt_tokens_per_step(records: list[RunRecord]) -> dict[str, Any]:
    by_pos: dict[int, list[int]] = defaultdict(list)
    for r in records:
        for pos, step in enumerate(r.steps, start=1):
            if step.usage.prompt_tokens:
                by_pos[pos].append(step.usage.prompt_tokens)
    per_step = {pos: mean(v) for pos, v in sorted(by_pos.items())}
    all_tokens = [t for v in by_pos.values() for t in v]
    means = [m for m in per_step.values() if m is not None]
    return {
        "mean": mean(all_tokens),
        f"at_step_{AT_STEP}": per_step.get(AT_STEP),
        "max": max(means) if means else None,  # max / min over steps of the per-step mean
        "min": min(means) if means else None,
        "by_step": {str(k): v for k, v in per_step.items()},
        "steps_counted": len(all_tokens),
    }


def build_report(records: Iterable[RunRecord], meta: dict[str, Any] | None = None,
                 prices: str | Path | PriceTable | None = None) -> dict[str, Any]:
    """All metrics of one eval run. `meta` may carry planner {endpoint, model}, mode, wall_s, name, recipe;
    `prices` is a price table (`eval.prices`: its file, or the table an eval's checklist read) for the `cost`
    table."""
    rs = list(records)
    meta = dict(meta or {})
    # judge failures and error runs are not wrong answers: attribution and `wrong` leave them out
    wrong = [r for r in rs if not is_correct(r) and not judge_failed(r) and r.outcome != "error"]
    report: dict[str, Any] = {
        **accuracy_section(rs, len(wrong)),  # accuracy with its CI, errors, judge failures, drafts
        **breakdown_section(rs, prices, judge_llm=(meta.get("judge") or {}).get("llm") or ""),  # by level, ...
        **usage_section(rs),  # need closure, tool calls, tokens, invalid actions
        **attribution_section(wrong),  # why the wrong runs went wrong
        **run_section(rs, meta),  # cost, wall time, errors, mode, planner (pops planner and wall_s from meta)
    }
    report.update(meta)
    return report


def accuracy_section(rs: list[RunRecord], wrong: int) -> dict[str, Any]:
    """accuracy, its task-clustered CI, the run counts (judge failures, error runs, `wrong` judged wrong answers) and
    the accuracies beside it: without error runs, over judged runs, with drafts; unanswerable tasks and drafts."""
    n = len(rs)
    overall = _acc(rs, detail=True)
    answered = [r for r in rs if r.outcome != "error"]
    judge_methods = Counter(r.judge.method if r.judge else "missing" for r in rs)
    return {
        "accuracy": overall["accuracy"],
        "ci95": overall["ci95"],
        "ci_method": overall["ci_method"],
        "n_tasks": overall["n_tasks"],
        "samples_per_task": overall["samples_per_task"],
        "ci95_task_bootstrap": overall["ci95_task_bootstrap"],
        "n": n,
        "correct": overall["correct"],
        "judge_failures": sum(judge_failed(r) for r in rs),
        "error_runs": n - len(answered),
        "wrong": wrong,
        "accuracy_without_errors": rate(sum(is_correct(r) for r in answered), len(answered)),
        "judge_methods": dict(judge_methods),
        "unanswerable": {"n": sum(unanswerable(r) for r in rs),
                         "abstained": sum(unanswerable(r) and r.outcome == "insufficient" for r in rs)},
        "accuracy_judged": rate(overall["correct"], n - sum(judge_failed(r) for r in rs)),
        "accuracy_with_drafts": rate(sum(is_correct_with_draft(r) for r in rs), n),
        "drafts": {"abstained_with_draft": sum(r.outcome == "insufficient" and r.draft_answer is not None
                                               for r in rs),
                   "draft_correct": sum(r.draft_judge is not None and r.draft_judge.correct is True for r in rs)},
    }


def breakdown_section(rs: list[RunRecord], prices: str | Path | PriceTable | None, judge_llm: str
                      ) -> dict[str, Any]:
    """Accuracy by level and by category, the outcome counts and table, and the tables of their own modules:
    stuck needs, decision diagnostics and cost (priced with `prices`, the judge priced as `judge_llm`)."""
    levels: dict[str, list[RunRecord]] = defaultdict(list)
    cats: dict[str, list[RunRecord]] = defaultdict(list)
    for r in rs:
        levels[r.level or "?"].append(r)
        cats[r.category or "?"].append(r)
    outcomes = Counter(r.outcome for r in rs)
    by_outcome = outcome_table(rs)
    return {
        "by_level": {k: _acc(v) for k, v in sorted(levels.items())},
        "by_category": {k: _acc(v) for k, v in sorted(cats.items())},
        "outcomes": {o: outcomes.get(o, 0) for o in OUTCOMES},
        "accuracy_by_outcome": {o: row["accuracy"] for o, row in by_outcome["rows"].items()},
        "outcome_table": by_outcome,
        "stuck": stuck_table(rs),
        "decisions": decision_diagnostics(rs),  # repeat-after-empty and finish-while-advanceable rates
        "cost": cost_table(rs, load_prices(prices) if isinstance(prices, (str, Path)) else prices,
                           judge_model=judge_llm),
    }


def _closure_mean(group: list[RunRecord]) -> float | None:
    return mean(closure(r) for r in group)


def usage_section(rs: list[RunRecord]) -> dict[str, Any]:
    """Need closure (all, correct, incorrect runs), tool calls per question (per tool and in total), tokens per
    step and per question, invalid actions, planner steps."""
    n = len(rs)
    tools = sorted({t for r in rs for t in r.totals.tool_calls})
    tool_calls = {t: (sum(r.totals.tool_calls.get(t, 0) for r in rs) / n if n else None) for t in tools}
    tool_calls["total"] = mean(sum(r.totals.tool_calls.values()) for r in rs)
    planner_steps = sum(len(r.steps) for r in rs)
    invalid_steps = sum(1 for r in rs for s in r.steps if s.invalid)
    return {
        "need_closure_rate": {"all": _closure_mean(rs), "correct": _closure_mean([r for r in rs if is_correct(r)]),
                              "incorrect": _closure_mean([r for r in rs if not is_correct(r)])},
        "tool_calls_per_question": tool_calls,
        "prompt_tokens_per_step": _prompt_tokens_per_step(rs),
        "tokens_per_question": {
            "prompt": mean(r.totals.prompt_tokens for r in rs),
            "completion": mean(r.totals.completion_tokens for r in rs),
            "total": mean(r.totals.prompt_tokens + r.totals.completion_tokens for r in rs),
            "planner_prompt": mean(r.totals.planner_prompt_tokens for r in rs),
        },
        "invalid_action_rate": rate(invalid_steps, planner_steps),
        "invalid_events_per_question": mean(r.totals.invalid_actions for r in rs),
        "planner_steps_per_question": mean(len(r.steps) for r in rs),
    }


def attribution_section(wrong: list[RunRecord]) -> dict[str, Any]:
    """The failure attribution of the wrong runs (`eval.attribution`): counts and shares per category, and per run
    the category, the need it is about and the reason in words."""
    attribution = dict.fromkeys(CATEGORIES, 0)
    diagnoses = []
    for r in wrong:
        d = attribute_run(r)
        attribution[d.category] += 1
        diagnoses.append({"run_id": r.run_id, "task_id": r.task_id, "outcome": r.outcome, **d.model_dump()})
    return {
        "attribution": attribution,
        "attribution_share": {k: rate(v, len(wrong)) for k, v in attribution.items()},
        "attribution_runs": diagnoses,
    }


def run_section(rs: list[RunRecord], meta: dict[str, Any]) -> dict[str, Any]:
    """Cost per question, wall time, the commonest errors, mode, replay and the planner; takes `planner` and
    `wall_s` out of `meta` (the rest of `meta` joins the report as is)."""
    n = len(rs)
    costs = [r.totals.cost for r in rs if r.totals.cost is not None]
    modes = sorted({r.mode for r in rs})
    planner_models = sorted({r.planner_model for r in rs if r.planner_model})
    planner = dict(meta.pop("planner", {}) or {})
    planner.setdefault("endpoint", None)
    planner.setdefault("model", planner_models[0] if len(planner_models) == 1 else (planner_models or None))
    errors = Counter((r.error or "unknown")[:160] for r in rs if r.outcome == "error")
    return {
        "cost_per_question": (sum(costs) / n) if costs and n else None,
        "wall_time": {"per_question_mean_s": mean(r.totals.wall_s for r in rs),
                      "per_question_max_s": max((r.totals.wall_s for r in rs), default=None),
                      "eval_s": meta.pop("wall_s", None)},
        "errors": dict(errors.most_common(10)),
        "mode": modes[0] if len(modes) == 1 else modes,
        "replay": any(r.replay for r in rs),
        "planner": planner,
    }


# ---------------------------------------------------------------- markdown


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, nd: int = 1) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def _acc_row(name: str, a: dict[str, Any]) -> str:
    ci = f"[{_pct(a['ci95'][0])}, {_pct(a['ci95'][1])}]"
    return f"| {name} | {a['n']} | {a['correct']} | {_pct(a['accuracy'])} | {ci} |"


def _boot(rep: dict[str, Any]) -> str:
    """The task-level bootstrap interval next to the Wilson one, when there are several samples per task."""
    boot = rep.get("ci95_task_bootstrap")
    if not boot or (rep.get("samples_per_task") or 1) <= 1:
        return ""
    return f"; task-level bootstrap of the per-task mean accuracy [{_pct(boot[0])}, {_pct(boot[1])}]"


def _overlap_lines(rep: dict[str, Any]) -> list[str]:
    """A planner evaluated on tasks it trained on (`--allow-train-overlap`): said above the tables."""
    info = rep.get("train_overlap") or {}
    unknown = [f"**No provenance for the served planner {', '.join(info['no_provenance'])}**: what it was trained on "
               "is unknown, so train/test separation was not checked.", ""] if info.get("no_provenance") else []
    if not info.get("overlap"):
        return unknown
    return unknown + [
        f"**{info['overlap']} of the {info.get('evaluated')} evaluated tasks are training tasks of this planner** "
        f"({', '.join(info.get('provenance') or [])}; run with --allow-train-overlap): not a held-out result.", ""]


def _attribution_reasons(rep: dict[str, Any], per_category: int = 3) -> list[str]:
    """A few runs per category with the reason the ledger gives (which need stayed open, and why)."""
    by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in rep.get("attribution_runs") or []:
        by_cat[d["category"]].append(d)
    if not by_cat:
        return []
    lines = ["", "Why (first runs of each category):", ""]
    for cat, items in by_cat.items():
        lines += [f"- {cat}: " + "; ".join(f"`{d['task_id']}` {d['outcome']}: {d['reason']}"
                                            for d in items[:per_category])]
    return lines


SCORER_NAMES = {"gaia": "the official GAIA scoring rules", "lenient": "this project's lenient match, not GAIA's rules"}


def _judge_line(rep: dict[str, Any]) -> str:
    """Which judge decided: the recipe's string scorer and LLM judge, and the methods the records carry."""
    judge = rep.get("judge") or {}
    methods = ", ".join(f"{k} {v}" for k, v in sorted(rep.get("judge_methods", {}).items()))
    if not judge:
        return f"judge methods: {methods}"
    scorer = judge.get("scorer")
    llm = f"LLM judge `{judge['llm']}`" if judge.get("llm") else "no LLM judge"
    return f"judge: string scorer **{scorer}** ({SCORER_NAMES.get(scorer, scorer)}), {llm}; methods: {methods}"


def _error_lines(rep: dict[str, Any]) -> list[str]:
    """How many runs ended in `error` (no answer: not wrong answers), when any did."""
    k = rep.get("error_runs", 0)
    if not k:
        return []
    return [f"**{k} of {rep['n']} runs ended with outcome error** (a backend or tool failure, no answer): counted as "
            f"not correct above but apart from the {rep.get('wrong', 0)} wrong answers; accuracy over the "
            f"{rep['n'] - k} runs without error {_pct(rep.get('accuracy_without_errors'))}. Running the same command "
            "again retries them (`--no-retry-errors` keeps them).", ""]


def _progress_lines(rep: dict[str, Any]) -> list[str]:
    """The progress audit's headline (eval.progress), when the tasks carry annotated subgoals."""
    p = rep.get("progress")
    if not p:
        return []
    c = p["counts"]
    return [f"- progress audit of the {p['failed_runs']} failed runs (subgoals of the annotated solution reached, "
            f"{p['scorer']} scorer over {p['evidence']} evidence; {p['file']}): full {c['full']}, partial "
            f"{c['partial']}, zero {c['zero']}; weighted progress {_pct(p['weighted_progress'])}"]


def render_markdown(rep: dict[str, Any]) -> str:
    """report.md: the headline, then one table per metric group."""
    title = rep.get("name") or "eval"
    replay = " — **replay mode** (recorded observations stand in for perception and search)" if rep["replay"] else ""
    if rep.get("environment") == "offline: no tools":  # eval --allow-offline: say it where the number is
        replay += (" — **offline: no tools** (a benchmark that needs perception and search, run without them: not "
                   "a result on this benchmark)")
    lines = [
        f"# Eval report: {title}",
        "",
        f"mode **{rep['mode']}**{replay}; planner `{rep['planner'].get('model')}` at {rep['planner'].get('endpoint')}",
        "",
        f"**Accuracy {_pct(rep['accuracy'])}** ({rep['correct']}/{rep['n']} runs, {rep.get('n_tasks', rep['n'])} "
        f"tasks), 95% CI [{_pct(rep['ci95'][0])}, {_pct(rep['ci95'][1])}] "
        f"({rep.get('ci_method', 'Wilson over runs')}{_boot(rep)}); judge failures: {rep['judge_failures']} "
        f"(never counted as correct); unanswerable tasks {rep['unanswerable']['n']}, of which the agent declined "
        f"(outcome insufficient, counted correct) {rep['unanswerable']['abstained']}",
        "",
        *teacher_lines(rep.get("teacher")),
        *_error_lines(rep),
        *_overlap_lines(rep),
        _judge_line(rep),
        "",
        "| answers judged | accuracy |", "|---|---|",
        f"| submitted (insufficient runs abstain) | {_pct(rep['accuracy'])} |",
        f"| with drafted answers (each abstaining run's draft instead) | {_pct(rep.get('accuracy_with_drafts'))} |",
        "",
        f"{rep.get('drafts', {}).get('abstained_with_draft', 0)} runs abstained with a draft; "
        f"{rep.get('drafts', {}).get('draft_correct', 0)} of those drafts were right.",
        "",
        "## By level", "", "| level | n | correct | accuracy | 95% CI |", "|---|---|---|---|---|",
        *(_acc_row(k, v) for k, v in rep["by_level"].items()),
        "", "## By category", "", "| category | n | correct | accuracy | 95% CI |", "|---|---|---|---|---|",
        *(_acc_row(k, v) for k, v in rep["by_category"].items()),
        "", *outcome_lines(rep),
        "", "## Evidence and decisions", "",
        f"- need-closure rate (blocking needs filled at the end): all {_pct(rep['need_closure_rate']['all'])}, "
        f"correct runs {_pct(rep['need_closure_rate']['correct'])}, "
        f"incorrect runs {_pct(rep['need_closure_rate']['incorrect'])}",
        *_progress_lines(rep),
        f"- invalid planner actions: {_pct(rep['invalid_action_rate'])} of planner steps; invalid events per "
        f"question {_num(rep['invalid_events_per_question'], 2)}",
        f"- planner steps per question: {_num(rep['planner_steps_per_question'], 2)}",
        "- tool calls per question: " + ", ".join(f"{k} {_num(v, 2)}"
                                                  for k, v in rep["tool_calls_per_question"].items()),
    ]
    pt = rep["prompt_tokens_per_step"]
    tq = rep["tokens_per_question"]
    lines += [
        f"- planner prompt tokens per step: mean {_num(pt['mean'])}, at step {AT_STEP} "
        f"{_num(pt[f'at_step_{AT_STEP}'])}, max {_num(pt['max'])}, min {_num(pt['min'])} (over steps)",
        f"- tokens per question: prompt {_num(tq['prompt'])}, completion {_num(tq['completion'])}, "
        f"total {_num(tq['total'])}; cost per question: "
        + ("–" if rep["cost_per_question"] is None else f"${rep['cost_per_question']:.5f}"),
        f"- wall time per question: mean {_num(rep['wall_time']['per_question_mean_s'], 2)} s; whole eval "
        f"{_num(rep['wall_time']['eval_s'], 1)} s",
        "", "## Failure attribution (incorrect runs)", "", "| what stayed open | runs | share |", "|---|---|---|",
        *(f"| {k} | {v} | {_pct(rep['attribution_share'][k])} |" for k, v in rep["attribution"].items()),
        *_attribution_reasons(rep),
        *stuck_lines(rep["stuck"]),
        *decision_lines(rep["decisions"]),
        *cost_lines(rep["cost"]),
    ]
    if rep["errors"]:
        lines += ["", "## Errors", "", *(f"- {c}× {e}" for e, c in rep["errors"].items())]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- files


def read_records(path: str | Path) -> list[RunRecord]:
    """RunRecords from a JSONL file; a malformed line raises ValueError naming the file and line."""
    p = Path(path)
    out = []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                out.append(RunRecord.model_validate_json(line))
            except ValueError as exc:
                raise ValueError(f"{p}:{lineno}: not a RunRecord: {str(exc)[:300]}") from exc
    return out


def write_report(out_dir: str | Path, records: list[RunRecord], meta: dict[str, Any] | None = None,
                 plots: bool = True, prices: str | Path | PriceTable | None = None) -> dict[str, Any]:
    """Write report.json, report.md and the plots under `out_dir`; returns the report."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep = build_report(records, meta, prices)
    # no key in a report (a failure attribution may quote a server's error body): protocol/redaction.py
    (out / "report.json").write_text(redact_text(json.dumps(rep, indent=2, ensure_ascii=False)) + "\n", "utf-8")
    (out / "report.md").write_text(redact_text(render_markdown(rep)), encoding="utf-8")
    if plots:
        rep_plots = report_plots(rep, out)
        logger.info("wrote %d plots to %s", len(rep_plots), out)
    return rep


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trajectories", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--prices", default=None, help="a price table (configs/prices/default.yaml): cost per call kind")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    records = [r for path in a.trajectories for r in read_records(path)]
    write_report(a.out, records, prices=a.prices)


if __name__ == "__main__":
    main()
