"""Train and evaluate the learned reward judge on harvested (state, decision, what followed) rows.

    omnidecision judge train --config configs/judge/tiny-cpu.yaml --dataset_name data/harvest/habits/rl \
        --model_name_or_path runs/demo/models/sft --output_dir runs/demo/models/judge [--max_steps 150]
    omnidecision judge eval --judge runs/demo/models/judge --data data/harvest/habits/rl --out judge_eval.json
    omnidecision judge eval --data data/harvest/habits-dev/rl --split train --dry-run   # a harvest of held-out tasks

Labels come from the recorded runs, not from any planner's choice: a decision is a positive when its step moved the
ledger (`collect.harvest.advanced`: the critic's verdict filled a need or verified a slot, a conflict got resolved,
the finalizer's check passed) in a run that ended judge-correct, a negative when its step moved nothing; a decision
that moved the ledger in a run that ended wrong is left out (what followed does not say whether it was good). TRL's
`RewardTrainer` fits a Bradley-Terry model on (positive, negative) pairs drawn within the same task family, from the
SFT planner's weights (it already reads the digest) with a one-output classification head. `eval` reports the AUROC
of "this decision moved the ledger" on held-out rows for the judge and for the closure checks alone
(`ClosureRubric`), the figure that says whether the judge knows something the rules do not.
"""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path
from typing import Any

import typer

from omnidecision.checkpoints import resolve_resume, write_consumed
from omnidecision.launch import launch_checks, launch_stage, stage_args
from omnidecision.outputs import overlap_problems, write_json_atomic
from omnidecision.preflight import (
    Check,
    DryRunReport,
    PreflightError,
    check_model,
    emit,
    parse_stage,
    require,
    split_files,
)
from omnidecision.provenance import record_training
from omnidecision.rewards.closure import ClosureRubric
from omnidecision.rewards.learned_judge import LearnedJudge, judge_text
from omnidecision.rl.dryrun import JUDGE_COLUMNS, judge_checks, rows_check
from omnidecision.rl.judge_labels import judge_label
from omnidecision.stats import auroc

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

logger = logging.getLogger(__name__)

judge_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="The learned reward judge: train it on harvested rows, evaluate its ranking.")


def judge_pairs(rows: list[dict[str, Any]], seed: int = 0, max_pairs: int | None = None) -> list[tuple[dict, dict]]:
    """(positive, negative) pairs: every labelled row appears at least once, its partner drawn from the other class
    in the same task family when there is one (else from any family)."""
    rng = random.Random(seed)
    labels = [judge_label(r) for r in rows]  # one parse per row
    pos = [r for r, y in zip(rows, labels, strict=True) if y is True]
    neg = [r for r, y in zip(rows, labels, strict=True) if y is False]
    if not pos or not neg:
        raise ValueError(f"the judge needs positive and negative decisions; got {len(pos)} positive, "
                         f"{len(neg)} negative (harvest RL rows with `decision` and `advanced` columns)")
    by_family: dict[str, dict[bool, list[dict]]] = {}
    for want, group in ((True, pos), (False, neg)):
        for r in group:
            by_family.setdefault(r.get("category") or "", {True: [], False: []})[want].append(r)

    def partner(row: dict, want: bool) -> dict:
        pool = by_family[row.get("category") or ""][want] or (pos if want else neg)
        return rng.choice(pool)

    pairs = [(p, partner(p, False)) for p in pos] + [(partner(n, True), n) for n in neg]
    rng.shuffle(pairs)
    return pairs[:max_pairs] if max_pairs else pairs


def _rows(data: str, split: str) -> list[dict[str, Any]]:
    import datasets

    return list(datasets.load_dataset(str(data), split=split))


def main(script: Any, training: Any, model_args: Any) -> dict[str, Any]:
    """Fit the judge with TRL's RewardTrainer from the parsed recipe (omnidecision.rl.judge_config), continuing from
    `resume_from_checkpoint` as sft and grpo do (the checkpoint the dry run names); writes output_dir (model +
    tokenizer), output_dir/judge_train.json (with `resumed_from`) and consumed.json."""
    import datasets
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed
    from trl import RewardTrainer

    require(judge_checks(script, training, model_args))  # what the dry run checks, before anything loads
    # where training starts, by the rule of sft and grpo (a checkpoint folder, true/auto: the newest complete one in
    # output_dir, false/unset: from scratch), passed to train() as TRL's reward script passes the field
    resume = resolve_resume(training.resume_from_checkpoint, training.output_dir)
    t0 = time.perf_counter()
    out = Path(training.output_dir)
    # data: pairs of (prompt + decision) texts, tokenized here so scoring tokenizes the same way
    rows = _rows(str(script.dataset_name), script.dataset_train_split)
    pairs = judge_pairs(rows, seed=training.seed, max_pairs=script.max_pairs)
    tok = AutoTokenizer.from_pretrained(str(model_args.model_name_or_path))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token

    def ids(row: dict) -> list[int]:
        return tok(judge_text(tok, row["prompt"], row["decision"]), truncation=True,
                   max_length=training.max_length)["input_ids"]

    ds = datasets.Dataset.from_list([{"chosen_ids": ids(p), "rejected_ids": ids(n)} for p, n in pairs])
    # model: the planner's body with a scalar head (seeded first: the new head's initial weights come from torch's
    # generator, unseeded until the Trainer starts, so a rerun trained another judge; tests/demo/test_determinism.py)
    set_seed(training.seed)
    rm = AutoModelForSequenceClassification.from_pretrained(str(model_args.model_name_or_path), num_labels=1,
                                                            dtype=model_args.dtype)
    rm.config.pad_token_id = tok.pad_token_id
    trainer = RewardTrainer(model=rm, args=training, train_dataset=ds, processing_class=tok)
    result = trainer.train(resume_from_checkpoint=resume)
    # outputs: what the ecosystem reads (model, tokenizer, metrics, state) and the project's summary
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()
    labels = [judge_label(r) for r in rows]
    summary = {"pairs": len(pairs), "positive_rows": labels.count(True), "negative_rows": labels.count(False),
               "unlabelled_rows": labels.count(None), "max_steps": training.max_steps, "seed": training.seed,
               "train_loss": result.metrics.get("train_loss"), "wall_s": round(time.perf_counter() - t0, 1),
               "data": str(script.dataset_name), "start_model": str(model_args.model_name_or_path),
               "resumed_from": resume,
               "checkpoint_selection": "final weights (the judge is scored by its dev AUROC, `judge eval`)"}
    (out / "judge_train.json").write_text(json.dumps(summary, indent=2), "utf-8")
    write_consumed(out, "judge", seed=training.seed, trainer=trainer, row_unit="pairs")

    record_training(out, stage="judge", start_model=str(model_args.model_name_or_path),
                    dataset=str(script.dataset_name), splits={"train": rows},
                    recipe={"max_steps": training.max_steps, "batch_size": training.per_device_train_batch_size,
                            "learning_rate": training.learning_rate, "max_length": training.max_length,
                            "seed": training.seed}, data={"pairs": len(pairs)},
                    metrics=dict(result.metrics), global_step=trainer.state.global_step,
                    write=trainer.is_world_process_zero())
    print(json.dumps(summary))
    return summary


@judge_app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(
    ctx: typer.Context,
    config: Path = typer.Option(CONFIGS / "judge" / "tiny-cpu.yaml", "--config",
                                show_default="configs/judge/tiny-cpu.yaml",
                                help="the judge recipe (configs/judge/*.yaml)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Resolve and check; print the configuration; start nothing"),
) -> None:
    """Fit the judge with TRL's RewardTrainer; writes OUTPUT_DIR (model + tokenizer), judge_train.json, consumed.json.

    Extra `--field value` options override the recipe (omnidecision.rl.judge_config: TRL's RewardConfig fields and
    dataset_name, max_pairs, model_name_or_path). Deprecated (a warning; CHANGELOG.md): --data (dataset_name), --model
    (model_name_or_path), --out (output_dir), --max-steps, --batch-size (per_device_train_batch_size),
    --learning-rate, --max-length, --use-cpu/--no-use-cpu."""
    from omnidecision.rl.judge_config import JUDGE_STAGE  # heavy: its dataclasses load trl (fast --help)

    launch_stage(JUDGE_STAGE, stage_args(JUDGE_STAGE, config, ctx.args), main=main, check=judge_dry_run,
                 dry_run=dry_run)


def judge_dry_run(args: list[str], *, accelerate_config: str | None = None,
                  num_processes: int | None = None) -> Any:
    """The dry-run report of `judge train` (`--config RECIPE` + overrides): the recipe parsed as the run parses it,
    the start model, the rows' folder, and the command a run starts."""
    from omnidecision.rl.judge_config import JUDGE_STAGE, parse_args  # heavy: its dataclasses load trl (fast --help)

    report, parsed = parse_stage("judge train", args, parse_args)
    if parsed is None:
        return report
    script, training, model = parsed
    report.extend(judge_checks(script, training, model))  # the checks the real run makes (main)
    launch_checks(report, JUDGE_STAGE, args, training, accelerate_config=accelerate_config,
                  num_processes=num_processes)
    report.extra = {"dataset": script.dataset_name, "output_dir": training.output_dir}
    return report


def judge_eval_rows(rows: list[dict[str, Any]], judge_dir: str | None) -> dict[str, Any]:
    """AUROC of the learned judge and of the closure checks alone on labelled rows (the label: see module)."""
    kept = [r for r in rows if judge_label(r) is not None]
    labels = [bool(judge_label(r)) for r in kept]
    closure = ClosureRubric()([r["decision"] for r in kept], ledger=[r["ledger"] for r in kept])
    out: dict[str, Any] = {"n": len(kept), "positive": sum(labels), "negative": len(labels) - sum(labels),
                           "auroc_closure": auroc(closure, labels)}
    if judge_dir:
        scores = LearnedJudge(judge_dir).score([r["prompt"] for r in kept], [r["decision"] for r in kept])
        out["auroc_judge"] = auroc([s if s is not None else 0.0 for s in scores], labels)
        # the two together, as GRPO's reward combines them (equal shares)
        out["auroc_closure_plus_judge"] = auroc([c + (s or 0.0) for c, s in zip(closure, scores, strict=True)],
                                                labels)
    return out


@judge_app.command("eval")
def evaluate(
    data: Path = typer.Option(..., help="an RL dataset folder (DIR/rl) of held-out tasks"),
    judge: Path = typer.Option(None, help="the judge folder `judge train` wrote (its --output_dir); omitted: the "
                               "closure checks only"),
    split: str = typer.Option("validation", help="the split of --data to read: `validation` (the default), the "
                              "held-out split of the judge's training harvest (what the demo reads); `train` for a "
                              "harvest of held-out tasks alone, whose rows all sit under train"),
    out: Path = typer.Option(None, help="write the figures here as JSON"),
    dry_run: bool = typer.Option(False, "--dry-run", help="check the rows (the split, its columns, every row's "
                                 "prompt), the judge folder and --out as the run does; print the report; load no "
                                 "model, write nothing"),
) -> None:
    """AUROC of "the decision moved the ledger" for the judge vs the closure checks alone."""
    checks = judge_eval_checks(data, split, judge, out)
    if dry_run:
        raise typer.Exit(emit(DryRunReport(command="judge eval", checks=checks, extra={
            "data": str(data), "split": split, "judge": str(judge) if judge else None,
            "would_write": str(out) if out else None})))
    try:
        require(checks)  # what the dry run reports, before the rows or the judge load
    except PreflightError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    res = judge_eval_rows(_rows(str(data), split), str(judge) if judge else None)
    res.update({"data": str(data), "split": split})
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out, res)
    print(json.dumps(res))


def judge_eval_checks(data: Path, split: str, judge: Path | None, out: Path | None) -> list:
    """The checks `judge eval` makes before it loads anything, in its dry run and its run: the rows' folder (the
    split, the columns the labels and the closure checks read, a prompt on every row), the judge folder, and --out
    (a file: never inside or over the rows or the judge, where a loader would read it as data)."""
    checks: list[Check] = []
    folder = str(data)
    try:
        files = split_files(folder) if data.is_dir() else None
    except (OSError, ValueError) as exc:
        files, checks = None, [Check(what="--data", status="error", detail=f"{folder}: {exc}")]
    if files is None and not checks:
        detail = "no such folder" if not data.exists() else "not a folder"
        checks.append(Check(what="--data", status="error", detail=f"{folder}: {detail} (a harvest's rl/ folder)"))
    elif files is not None and split not in files:
        checks.append(Check(what="--data", status="error", detail=f"{folder}: no `{split}` split (found "
                                                                  f"{sorted(files)})"))
    elif files is not None:
        checks.append(rows_check(files, "--data", folder, (*JUDGE_COLUMNS, "ledger"), [split],
                                 on_every_row=("prompt",)))
    if judge is not None:
        checks.append(check_model(str(judge), "--judge", local_only=True))
    if out is not None:
        problems = overlap_problems(out, [data, judge])
        if out.is_dir():
            problems.append(f"--out {out} is a folder: the figures are one JSON file")
        checks += [Check(what="out", status="error", detail=p) for p in problems] or \
            [Check(what="out", status="ok", detail=f"{out} (written atomically)")]
    return checks


if __name__ == "__main__":
    import sys

    from omnidecision.preflight import run_refusing
    from omnidecision.rl.judge_config import parse_args

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_refusing(main, *parse_args(sys.argv[1:]))
