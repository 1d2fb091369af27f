"""Rejection-sampling fine-tuning data (the `rft` control): K sampled decisions per state, keep the best by the reward.

    omnidecision rft-select --config configs/grpo/tiny-cpu-judge.yaml --model runs/demo/models/sft \\
        --data runs/demo/data/rl --out runs/demo/data/rft --samples 8
    omnidecision sft --config configs/sft/tiny-cpu-continue.yaml --model_name_or_path runs/demo/models/sft \\
        --dataset_name runs/demo/data/rft --max_train_seconds 60 ...

The control GRPO has to beat at the same compute: it draws its states from the same RL train split (shuffled by the
seed; GRPO selects its own with `select_states`), samples the same K
decisions per state at the GRPO recipe's temperature, scores them with the GRPO recipe's own reward (closure checks
and, when the recipe has one, the judge), and keeps, per state, the best-scoring decision when it is well-formed
(best-of-K; the stats count the groups where the decisions' scores differed, the ones selection informs). The kept
(prompt, decision) pairs are an SFT dataset (`messages` = prompt + decision; `validation` = the harvest's validation
SFT rows when given, so SFT keeps its best dev-loss checkpoint). Fine-tuning then runs with `omnidecision sft` for
whatever wall time is left of the post-SFT budget.
"""

from __future__ import annotations

import json
import logging
import shutil
import statistics
import time
from pathlib import Path

import typer

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


def rft_select(
    config: Path = typer.Option(..., help="the GRPO recipe whose reward, temperature and K the control shares"),
    model: Path = typer.Option(..., help="the planner to sample from (the SFT planner)"),
    data: Path = typer.Option(..., help="RL states: a harvest's rl/ folder (train split used)"),
    out: Path = typer.Option(..., help="the SFT dataset written here (train split; validation copied from --val)"),
    val: Path = typer.Option(None, help="an SFT dataset folder whose validation split is copied next to the rows"),
    samples: int = typer.Option(None, help="decisions per state (default: the recipe's num_generations)"),
    max_states: int = typer.Option(None, help="at most this many states (default: all)"),
    match_steps: int = typer.Option(None, help="sample as many states as this many GRPO steps of the recipe consume "
                                               "(steps × generation_batch_size / num_generations): same generations"),
    seed: int = typer.Option(0, help="sampling seed"),
    judge_path: Path = typer.Option(None, "--judge_path", help="the learned judge folder (overrides the recipe's)"),
) -> None:
    """Sample K decisions per RL state, keep the best well-formed one by the reward, write an SFT dataset."""
    import datasets
    import torch
    import yaml

    from omnidecision.modeling import generate_decisions, load_planner
    from omnidecision.rewards import get_reward_funcs
    from omnidecision.rewards.checks import CHECKS, Decision
    from omnidecision.rl.config import GRPOScriptArguments

    t0 = time.perf_counter()
    recipe = yaml.safe_load(config.read_text("utf-8"))
    if judge_path is not None:
        recipe["judge_path"] = str(judge_path)
    fields = set(GRPOScriptArguments.__dataclass_fields__)
    script = GRPOScriptArguments(**{k: v for k, v in recipe.items() if k in fields and k != "dataset_name"},
                                 dataset_name=str(data))
    k = int(samples or recipe.get("num_generations", 8))
    torch.manual_seed(seed)
    # states: the same train split GRPO reads
    rows = list(datasets.load_dataset(str(data), split="train").shuffle(seed=seed))  # GRPO shuffles its states too
    if match_steps:
        per_step = int(recipe.get("generation_batch_size") or recipe.get("per_device_train_batch_size", 8)) // k
        max_states = min(max_states or len(rows), match_steps * max(1, per_step))
    if max_states:
        rows = rows[:max_states]
    # sample K decisions per state at the GRPO temperature
    planner, tok = load_planner(model)
    groups = generate_decisions(planner, tok, [r["prompt"] for r in rows], do_sample=True, num_return_sequences=k,
                                temperature=float(recipe.get("temperature", 1.0)),
                                max_new_tokens=int(recipe.get("max_completion_length", 32)), batch_size=16)
    # score them with the recipe's reward (weighted as GRPO weighs them)
    funcs = get_reward_funcs(script.reward_funcs, **script.reward_params())
    weights = recipe.get("reward_weights") or [1.0] * len(funcs)
    flat = [c for g in groups for c in g]
    columns = {"ledger": [r["ledger"] for r in rows for _ in range(k)],
               "prompts": [r["prompt"] for r in rows for _ in range(k)]}
    total = [0.0] * len(flat)
    for func, w in zip(funcs, weights, strict=True):
        for i, v in enumerate(func(flat, **columns)):
            total[i] += w * (v or 0.0)
    scores = [total[i * k:(i + 1) * k] for i in range(len(rows))]
    formats = [[CHECKS["format"](Decision.parse(c), None) for c in g] for g in groups]  # type: ignore[arg-type]
    picks = select_best(groups, scores, formats)
    kept = [{"messages": [*r["prompt"], {"role": "assistant", "content": g[i]}], "task_id": r["task_id"],
             "run_id": r["run_id"], "step": r["step"], "sample": 0, "level": r["level"], "category": r["category"],
             "source": "rft"} for r, g, i in zip(rows, groups, picks, strict=True) if i is not None]
    if not kept:
        raise typer.Exit(f"rft-select kept no decision: none of the {len(rows) * k} sampled decisions of {model} "
                         "is a well-formed action (train the planner first)")
    # write: train = the kept rows; validation = the SFT dev rows (the same dev loss SFT selects on)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    datasets.Dataset.from_list(kept).to_parquet(str(tmp / "train-00000.parquet"))
    if val is not None:
        for f in sorted(Path(val).glob("validation-*.parquet")):
            shutil.copy(f, tmp / f.name)
    stats = {"states": len(rows), "samples": k, "kept": len(kept),
             "informative_groups": sum(1 for g in scores if max(g) > min(g)),
             "wall_s": round(time.perf_counter() - t0, 1),
             "mean_best": round(statistics.fmean(max(s) for s in scores), 4) if scores else None,
             "model": str(model), "data": str(data), "recipe": str(config)}
    (tmp / "rft_select.json").write_text(json.dumps(stats, indent=2), "utf-8")
    # the tasks whose states the rows came from: the SFT run on them records them (and stage rft) in its provenance
    from omnidecision.provenance import training_tasks, write_task_ids

    write_task_ids(tmp, training_tasks(data, {"train": rows}), stage="rft")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(json.dumps(stats))
