"""Train and evaluate the learned reward judge on harvested (state, decision, what followed) rows.

    omnidecision judge train --data data/harvest/habits/rl --model runs/demo/models/sft --out runs/demo/models/judge
    omnidecision judge eval --judge runs/demo/models/judge --data data/harvest/habits-dev/rl --out judge_eval.json

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

from omnidecision.rewards.checks import Decision

logger = logging.getLogger(__name__)

judge_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="The learned reward judge: train it on harvested rows, evaluate its ranking.")


def judge_label(row: dict[str, Any]) -> bool | None:
    """1/0/None for one RL row (see the module docstring); None also for rows without a valid decision."""
    decision = row.get("decision") or ""
    if not decision or row.get("advanced") is None or Decision.parse(decision).action is None:
        return None
    if not row["advanced"]:
        return False
    return True if row.get("correct") is True else None


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


@judge_app.command("train")
def train(
    data: Path = typer.Option(..., help="the harvest's RL dataset folder (DIR/rl)"),
    model: Path = typer.Option(..., help="the model to start from (the SFT planner: it already reads the digest)"),
    out: Path = typer.Option(..., help="where the judge is saved (model, tokenizer, metrics)"),
    max_steps: int = typer.Option(300, help="optimizer steps"),
    batch_size: int = typer.Option(16, help="pairs per step"),
    learning_rate: float = typer.Option(5e-4, help="AdamW learning rate"),
    max_length: int = typer.Option(768, help="tokens per (prompt, decision) text; longer ones are truncated"),
    seed: int = typer.Option(0, help="pair sampling and training seed"),
    use_cpu: bool = typer.Option(True, help="train on the CPU (false: the accelerator the trainer finds)"),
) -> None:
    """Fit the judge with TRL's RewardTrainer; writes OUT (model + tokenizer), OUT/judge_train.json."""
    import datasets
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed
    from trl import RewardConfig, RewardTrainer

    from omnidecision.rewards.learned_judge import judge_text

    t0 = time.perf_counter()
    # data: pairs of (prompt + decision) texts, tokenized here so scoring tokenizes the same way
    rows = _rows(str(data), "train")
    pairs = judge_pairs(rows, seed=seed)
    tok = AutoTokenizer.from_pretrained(str(model))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token

    def ids(row: dict) -> list[int]:
        return tok(judge_text(tok, row["prompt"], row["decision"]), truncation=True, max_length=max_length)[
            "input_ids"]

    ds = datasets.Dataset.from_list([{"chosen_ids": ids(p), "rejected_ids": ids(n)} for p, n in pairs])
    # model: the planner's body with a scalar head (seeded first: the new head's initial weights come from torch's
    # generator, unseeded until the Trainer starts, so a rerun trained another judge; tests/demo/test_determinism.py)
    set_seed(seed)
    rm = AutoModelForSequenceClassification.from_pretrained(str(model), num_labels=1)
    rm.config.pad_token_id = tok.pad_token_id
    args = RewardConfig(output_dir=str(out), max_steps=max_steps, per_device_train_batch_size=batch_size,
                        learning_rate=learning_rate, lr_scheduler_type="constant", logging_steps=25,
                        save_strategy="no", report_to="none", use_cpu=use_cpu, bf16=False,
                        gradient_checkpointing=False, max_length=max_length, seed=seed, disable_tqdm=True)
    trainer = RewardTrainer(model=rm, args=args, train_dataset=ds, processing_class=tok)
    result = trainer.train()
    # outputs: what the ecosystem reads (model, tokenizer, metrics, state) and the project's summary
    trainer.save_model(str(out))
    tok.save_pretrained(str(out))
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()
    labels = [judge_label(r) for r in rows]
    summary = {"pairs": len(pairs), "positive_rows": labels.count(True), "negative_rows": labels.count(False),
               "unlabelled_rows": labels.count(None), "max_steps": max_steps, "seed": seed,
               "train_loss": result.metrics.get("train_loss"), "wall_s": round(time.perf_counter() - t0, 1),
               "data": str(data), "start_model": str(model)}
    (out / "judge_train.json").write_text(json.dumps(summary, indent=2), "utf-8")
    print(json.dumps(summary))


def judge_eval_rows(rows: list[dict[str, Any]], judge_dir: str | None) -> dict[str, Any]:
    """AUROC of the learned judge and of the closure checks alone on labelled rows (the label: see module)."""
    from omnidecision.rewards.closure import ClosureRubric
    from omnidecision.stats import auroc

    kept = [r for r in rows if judge_label(r) is not None]
    labels = [bool(judge_label(r)) for r in kept]
    closure = ClosureRubric()([r["decision"] for r in kept], ledger=[r["ledger"] for r in kept])
    out: dict[str, Any] = {"n": len(kept), "positive": sum(labels), "negative": len(labels) - sum(labels),
                           "auroc_closure": auroc(closure, labels)}
    if judge_dir:
        from omnidecision.rewards.learned_judge import LearnedJudge

        scores = LearnedJudge(judge_dir).score([r["prompt"] for r in kept], [r["decision"] for r in kept])
        out["auroc_judge"] = auroc([s if s is not None else 0.0 for s in scores], labels)
        # the two together, as GRPO's reward combines them (equal shares)
        out["auroc_closure_plus_judge"] = auroc([c + (s or 0.0) for c, s in zip(closure, scores, strict=True)],
                                                labels)
    return out


@judge_app.command("eval")
def evaluate(
    data: Path = typer.Option(..., help="an RL dataset folder (DIR/rl) of held-out tasks"),
    judge: Path = typer.Option(None, help="the judge folder (`judge train --out`); omitted: closure checks only"),
    split: str = typer.Option("train", help="the split to read"),
    out: Path = typer.Option(None, help="write the figures here as JSON"),
) -> None:
    """AUROC of "the decision moved the ledger" for the judge vs the closure checks alone."""
    res = judge_eval_rows(_rows(str(data), split), str(judge) if judge else None)
    res.update({"data": str(data), "split": split})
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2), "utf-8")
    print(json.dumps(res))
