"""Rejection-sampling fine-tuning data (the `rft` control): K sampled decisions per state, keep the best by the reward.

    omnidecision rft-select --config configs/grpo/tiny-cpu-judge.yaml --out runs/demo/data/rft \\
        --val runs/demo/data/sft --model_name_or_path runs/demo/models/sft --dataset_name runs/demo/data/rl \\
        --judge_path runs/demo/models/judge --max_steps 30 --seed 0 [--dry-run]
    omnidecision sft --config configs/sft/tiny-cpu-continue.yaml --model_name_or_path runs/demo/models/sft \\
        --dataset_name runs/demo/data/rft ...

The control GRPO has to beat at the same sampling budget, read from the GRPO recipe it controls through the same
typed config (`omnidecision.rl.config.parse_args`: TrlParser, the same overrides as `omnidecision grpo`):
- the same states: the training states GRPO selects (`rl/states.py`: its splits, seed, `select_states`), in the order
  the first `max_steps` GRPO steps consume them (TRL's own sampler), so both see the same prompts;
- the same number of candidates: `num_generations` decisions per consumed state (= the completions GRPO samples),
  at the recipe's temperature, top_p, top_k and max_completion_length;
- the same reward: the recipe's reward functions and weights (closure checks and, when the recipe has one, the
  judge), summed as TRL sums them.
Per state the best-scoring decision is kept when it is well-formed (best-of-K; the stats count the groups where the
decisions' scores differed, the ones selection informs). The kept (prompt, decision) pairs are an SFT dataset
(`messages` = prompt + decision; `validation` = `--val`'s validation rows when given), fine-tuned with `omnidecision
sft` (configs/sft/tiny-cpu-continue.yaml, whose checkpoint policy scores on the RL states this file names).

Flags: recipe fields as `--snake_case` (GRPO's); this command's own `--out`, `--val`, `--max-states`. The old
spellings `--model`, `--data`, `--samples`, `--match-steps` still work, with a deprecation warning, as
`--model_name_or_path`, `--dataset_name`, `--num_generations`, `--max_steps` (launch.RFT_ALIASES; CHANGELOG.md).
"""

from __future__ import annotations

import json
import logging
import shutil
import statistics
import time
from pathlib import Path
from typing import Any, Optional

import typer

from omnidecision.checkpoints import write_consumed
from omnidecision.launch import launch_stage, stage_args
from omnidecision.modeling import generate_decisions
from omnidecision.options import ReplaceOption
from omnidecision.outputs import staged_output
from omnidecision.preflight import require
from omnidecision.provenance import training_tasks, write_task_ids
from omnidecision.rewards import get_reward_funcs
from omnidecision.rewards.checks import CHECKS, Decision
from omnidecision.rl.dryrun import reward_weights_checks, rft_checks, rft_dry_run, rft_inputs
from omnidecision.rl.judge_stats import judges_of
from omnidecision.rl.states import consumed_indices, load_states, select, state_id

logger = logging.getLogger(__name__)


def select_best(groups: list[list[str]], scores: list[list[float]], formats: list[list[float]]) -> list[int | None]:
    """Per state, the index of the best-scoring decision (ties: the first) if it is well-formed, else None.

    >>> select_best([["a", "b"], ["c", "d"], ["e"]], [[0.2, 0.9], [0.5, 0.5], [0.7]], [[1.0, 1.0], [1.0, 1.0], [0.0]])
    [1, 0, None]
    """
    out: list[int | None] = []
    for group, s, f in zip(groups, scores, formats, strict=True):
        if not group:
            out.append(None)
            continue
        best = max(range(len(group)), key=lambda i: (s[i], -i))
        out.append(best if f[best] > 0 else None)
    return out


def rft_states(script: Any, training: Any, planner: Any, tokenizer: Any,
               max_states: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the state rows GRPO's first `max_steps` steps generate groups for, in order; the selection stats)."""
    train, _, _ = load_states(script, training)
    train, selection = select(planner, tokenizer, train, script, training)
    indices = consumed_indices(len(train), training)
    if max_states:
        indices = indices[:max_states]
    return [train[i] for i in indices], selection


def score_groups(script: Any, training: Any, rows: list[dict[str, Any]], groups: list[list[str]],
                 output_dir: str) -> list[list[float]]:
    """The recipe's reward of every decision, weighted and summed as TRL does (a missing score counts nothing),
    with every dataset column passed to the reward functions as TRL passes them."""
    k = training.num_generations
    # `main` refused a weight count that does not match before the planner loaded (rft_checks); the same words here
    require(reward_weights_checks(script, training))
    funcs = get_reward_funcs(script.reward_funcs, **script.reward_params(0, 1, output_dir, seed=training.seed))
    weights = training.reward_weights or [1.0] * len(funcs)
    flat = [c for g in groups for c in g]
    columns = {key: [r[key] for r in rows for _ in range(k)] for key in rows[0] if key not in ("prompt", "completion")}
    columns["prompts"] = [r["prompt"] for r in rows for _ in range(k)]
    total = [0.0] * len(flat)
    for func, w in zip(funcs, weights, strict=True):
        for i, v in enumerate(func(flat, **columns)):
            total[i] += w * (v or 0.0)
    for judge in judges_of(funcs):  # an LLM judge holds connections and a cache file
        judge.close()
    return [total[i * k:(i + 1) * k] for i in range(len(rows))]


def main(script: Any, training: Any, model_args: Any, *, out: Path, val: Path | None = None,
         max_states: int | None = None, replace: bool = False) -> dict[str, Any]:
    """Select, sample, score, keep the best; write OUT (train parquet, validation copied from `val`),
    OUT/rft_select.json (the stats and the state ids) and OUT/consumed.json. OUT is written through a temp sibling
    (`outputs.staged_output`): never one of the inputs or a folder holding one, never a folder it did not write
    unless `replace`."""
    require(rft_checks(script, training, model_args, out=out, val=val, replace=replace))  # the dry run's, first
    t0 = time.perf_counter()
    with staged_output(out, rft_inputs(script, model_args, val), command="rft-select", replace=replace) as tmp:
        stats = _select_into(tmp, script, training, model_args, val=val, max_states=max_states, t0=t0)
    print(json.dumps({key: v for key, v in stats.items() if key != "state_ids"}))
    return stats


def _select_into(tmp: Path, script: Any, training: Any, model_args: Any, *, val: Path | None,
                 max_states: int | None, t0: float) -> dict[str, Any]:
    """The work of `main`, written into the temp folder `tmp`; returns the stats."""
    import datasets
    import torch

    from omnidecision.rl.train import load_policy  # heavy: loads torch/trl; keeps --help fast

    planner, tok, _ = load_policy(model_args)  # loaded as GRPO loads its policy: the same greedy selection
    rows, selection = rft_states(script, training, planner, tok, max_states)
    k = training.num_generations
    # K decisions per state, decoded as GRPO samples them
    torch.manual_seed(training.seed)
    groups = generate_decisions(planner, tok, [r["prompt"] for r in rows], do_sample=True, num_return_sequences=k,
                                temperature=training.temperature, top_p=training.top_p, top_k=training.top_k or 0,
                                max_new_tokens=training.max_completion_length, batch_size=script.eval_batch_size,
                                chat_template_kwargs=training.chat_template_kwargs)
    scores = score_groups(script, training, rows, groups, str(tmp))
    formats = [[CHECKS["format"](Decision.parse(c), None) for c in g] for g in groups]  # type: ignore[arg-type]
    picks = select_best(groups, scores, formats)
    kept = [{"messages": [*r["prompt"], {"role": "assistant", "content": g[i]}], "task_id": r["task_id"],
             "run_id": r["run_id"], "step": r["step"], "sample": 0, "level": r["level"], "category": r["category"],
             "source": "rft"} for r, g, i in zip(rows, groups, picks, strict=True) if i is not None]
    if not kept:  # the temp folder goes with the error (staged_output)
        raise typer.Exit(f"rft-select kept no decision: none of the {len(rows) * k} sampled decisions of "
                         f"{model_args.model_name_or_path} is a well-formed action (train the planner first)")
    # write: train = the kept rows; validation = the SFT dev rows when given
    datasets.Dataset.from_list(kept).to_parquet(str(tmp / "train-00000.parquet"))
    if val is not None:
        for f in sorted(Path(val).glob("validation-*.parquet")):
            shutil.copy(f, tmp / f.name)
    stats = {"states": len(rows), "samples": k, "kept": len(kept), "matched_steps": training.max_steps,
             "informative_groups": sum(1 for g in scores if max(g) > min(g)),
             "wall_s": round(time.perf_counter() - t0, 1),
             "mean_best": round(statistics.fmean(max(s) for s in scores), 4) if scores else None,
             "selection": selection, "model": str(model_args.model_name_or_path),
             "data": str(script.dataset_name), "reward_funcs": script.reward_funcs,
             "reward_weights": training.reward_weights, "temperature": training.temperature,
             "state_ids": [state_id(r) for r in rows]}
    (tmp / "rft_select.json").write_text(json.dumps(stats, indent=2), "utf-8")
    write_consumed(tmp, "rft-select", seed=training.seed, row_unit="completions", completions=len(rows) * k,
                   extra={"states": len(rows), "num_generations": k, "matched_grpo_steps": training.max_steps})
    # the tasks whose states the rows came from: the SFT run on them records them (and stage rft) in its provenance

    write_task_ids(tmp, training_tasks(script.dataset_name, {"train": rows}), stage="rft")
    return stats


def rft_select(
    ctx: typer.Context,
    config: Path = typer.Option(..., "--config", help="the GRPO recipe (configs/grpo/) whose states, K, decoding and "
                                                      "reward the control shares; its fields as --snake_case"),
    out: Path = typer.Option(..., "--out", help="the SFT dataset written here (train split; validation from --val)"),
    val: Optional[Path] = typer.Option(  # noqa: UP045
        None, "--val", help="an SFT dataset folder whose validation split is copied next to the rows"),
    max_states: Optional[int] = typer.Option(  # noqa: UP045
        None, "--max-states", help="at most this many of the consumed states (a smoke run; default: all)"),
    replace: ReplaceOption = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="Resolve and check; print the configuration; start nothing"),
) -> None:
    """Sample K decisions on the states GRPO's steps consume, keep the best well-formed one by the GRPO recipe's
    reward, write an SFT dataset. Extra `--field value` options override the GRPO recipe as for `omnidecision grpo`
    (`--max_steps N`: the GRPO steps to match; deprecated: --model, --data, --samples, --match-steps)."""
    from omnidecision.rl.config import RFT_STAGE  # heavy: the GRPO recipe's dataclasses load trl; keeps --help fast

    launch_stage(RFT_STAGE, stage_args(RFT_STAGE, config, ctx.args), main=main, check=rft_dry_run, dry_run=dry_run,
                 out=out, val=val, max_states=max_states, replace=replace)


rft_select.passthrough = True  # type: ignore[attr-defined]
