"""State-SFT of the planner: one straight-line `main()` over TRL's `SFTTrainer`.

Loss on the assistant action only; full fine-tuning or LoRA/QLoRA (`use_peft`, `load_in_4bit`); resumable
(`--resume_from_checkpoint true` picks the last checkpoint in `output_dir`). In `output_dir`, first what the
Hugging Face tools read (`save_metrics`: train_results.json / eval_results.json / all_results.json; `save_state`:
trainer_state.json; the model card README.md), then this project's `log_history.json` (read by `smoke`, the
benchmarks), `sft_run.json` (recipe, data stats, final metrics, git revision: read by `omnidecision export`),
`checkpoint_selection.json` (which weights were saved and why: `checkpoint_policy`, omnidecision/checkpoints.py) and
`consumed.json` (optimizer steps, rows, tokens, threads, seed).

    omnidecision sft --config configs/sft/tiny-cpu.yaml [--learning_rate 1e-3 ...]
    omnidecision sft --accelerate-config configs/accelerate/zero2.yaml --config configs/sft/qwen3-8b-lora.yaml
    accelerate launch --config_file configs/accelerate/zero3.yaml -m omnidecision.sft.train --config RECIPE.yaml
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

from omnidecision.checkpoints import (
    CheckpointSelection,
    final_selection,
    resolve_resume,
    save_ecosystem_outputs,
    write_consumed,
    write_selection,
)
from omnidecision.modeling import compact_lm_head
from omnidecision.preemption import PreemptionCheckpoint
from omnidecision.preflight import require, wandb_offline_fallback
from omnidecision.provenance import git_revision, record_training, training_tasks
from omnidecision.sampling import seed_length_grouped_sampler
from omnidecision.sft.config import PlannerSFTConfig, SFTScriptArguments, parse_args
from omnidecision.sft.data import data_stats, load_sft_splits, prepare
from omnidecision.sft.dryrun import sft_checks

logger = logging.getLogger(__name__)


def build_trainer(script_args: SFTScriptArguments, training_args: PlannerSFTConfig,
                  model_args: Any, callbacks: list[Any] | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """(trainer, eval dataset or None, data stats): the `SFTTrainer` that `main` trains, its data loaded, validated
    and tokenized by TRL (chat template, assistant-only mask). Tests read the tokenized rows from it. `callbacks`
    (TrainerCallback objects) join the trainer's, e.g. a benchmark's token budget."""
    from transformers import AutoTokenizer
    from trl import SFTTrainer, get_peft_config, get_quantization_config

    wandb_offline_fallback(training_args.report_to)
    # the dry run's checks (model, attention, data, dev_closure's dev states, resume), before anything loads: one
    # function, sft/dryrun.py:sft_checks, so a dry run that passes means this run is not refused for those
    require(sft_checks(script_args, training_args, model_args))

    # Model loading options (SFTTrainer loads the model from its name with these)
    quantization_config = get_quantization_config(model_args)
    model_init_kwargs: dict[str, Any] = {
        "revision": model_args.model_revision,
        "trust_remote_code": training_args.trust_remote_code,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
    }
    if quantization_config is not None:
        from accelerate import PartialState

        # QLoRA: each process keeps its quantized copy on its own GPU
        model_init_kwargs.update(quantization_config=quantization_config,
                                 device_map={"": PartialState().local_process_index})
    model_init_kwargs.update(training_args.model_init_kwargs or {})
    training_args.model_init_kwargs = {k: v for k, v in model_init_kwargs.items() if v is not None}
    tokenizer = AutoTokenizer.from_pretrained(
        model_args.model_name_or_path, revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
    )

    # Data: train/validation splits, only the `messages` column
    splits = load_sft_splits(script_args.dataset_name, script_args.dataset_config)
    train_ds = _prepared(splits, "train", script_args, training_args)
    eval_ds = _prepared(splits, "eval", script_args, training_args) if training_args.eval_strategy != "no" else None
    stats = data_stats({"train": train_ds, **({"validation": eval_ds} if eval_ds is not None else {})})
    # every task the dataset came from (before `prepare` drops the id column): provenance for train/test separation
    tasks = training_tasks(script_args.dataset_name, splits)
    stats["training_tasks"] = tasks.model_dump() if tasks is not None else None
    logger.info("data: %s", {k: v for k, v in stats.items() if k != "training_tasks"})

    # Trainer (on the CPU, TRL's LM head scores only the supervised positions: modeling.compact_lm_head)
    compact_lm_head(training_args.compact_lm_head)
    trainer = SFTTrainer(
        model=model_args.model_name_or_path,
        args=training_args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
        callbacks=callbacks,
    )
    add_stops(trainer, script_args)
    seed_length_grouped_sampler(trainer)  # a resume in a later epoch sees the uninterrupted run's batches
    if training_args.save_on_sigterm:
        trainer.add_callback(PreemptionCheckpoint())
    return trainer, eval_ds, stats


def _prepared(splits: dict[str, Any], role: str, script_args: SFTScriptArguments,
              training_args: PlannerSFTConfig) -> Any:
    """The recipe's train split (`role` "train": at most `max_train_samples`, shuffled) or its test split ("eval":
    at most `max_eval_samples`, in order), prepared for the trainer; a missing split is a ValueError."""
    train = role == "train"
    name = script_args.dataset_train_split if train else script_args.dataset_test_split
    if name not in splits:
        why = "" if train else f"eval_strategy={training_args.eval_strategy} but "
        raise ValueError(f"{script_args.dataset_name}: {why}no split {name!r} (splits: {list(splits)})")
    return prepare(splits[name], where=f"{script_args.dataset_name}:{role}",
                   limit=script_args.max_train_samples if train else script_args.max_eval_samples,
                   enable_thinking=script_args.enable_thinking, seed=training_args.seed, shuffle=train)


def main(script_args: SFTScriptArguments, training_args: PlannerSFTConfig, model_args: Any,
         callbacks: list[Any] | None = None) -> dict[str, Any]:
    """Train; returns {"output_dir", "global_step", "metrics", "data"}. `callbacks`: see `build_trainer`."""
    trainer, eval_ds, stats = build_trainer(script_args, training_args, model_args, callbacks)

    # Train (resuming from a checkpoint when asked); the dev_closure policy scores its candidates on the way
    resume = resolve_resume(training_args.resume_from_checkpoint, training_args.output_dir)
    selection = None
    if script_args.checkpoint_policy == "dev_closure":
        # the post-SFT arms' one policy scores candidates with rl's closure evaluator
        from omnidecision.rl.evaluate import dev_closure_scorer  # sft loads rl only here (import rules' exception)

        dev_data = script_args.dev_data()
        thinking = None if script_args.enable_thinking is None else {"enable_thinking": script_args.enable_thinking}
        selection = CheckpointSelection(trainer.model, dev_closure_scorer(script_args, dev_data,
                                                                          trainer.processing_class, thinking),
                                        script_args.checkpoint_every, dev_data, resume_from=resume)
        trainer.add_callback(selection.callback)
    result = trainer.train(resume_from_checkpoint=resume)
    metrics = dict(result.metrics)
    if selection is not None:
        chosen = selection.finish(trainer.state.global_step)
    elif training_args.load_best_model_at_end and trainer.state.best_model_checkpoint:
        # SFT from scratch keeps its best dev-loss checkpoint (its step 0 is a random model: no candidate)
        chosen = {**final_selection(int(trainer.state.best_model_checkpoint.rsplit("-", 1)[1])),
                  "policy": "best_dev_loss", "best_model_checkpoint": trainer.state.best_model_checkpoint}
    else:
        chosen = final_selection(trainer.state.global_step)
    chosen["sizing"] = sizing(script_args, training_args, trainer.state, stats)
    eval_metrics = trainer.evaluate() if eval_ds is not None else {}
    metrics.update(eval_metrics)

    # Save: model (or adapter) + tokenizer/chat template; what the ecosystem reads; log history, run card, provenance
    trainer.save_model(training_args.output_dir)  # the tokenizer with it, on the main process only (TRL)
    out = Path(training_args.output_dir)
    save_ecosystem_outputs(trainer, {"train": dict(result.metrics), "eval": eval_metrics},
                           script_args.dataset_name, tags=["omnidecision", "planner", "sft"])
    run = {
        "output_dir": str(out),
        "global_step": trainer.state.global_step,
        "metrics": metrics,
        "data": stats,
        "resumed_from": resume,
        "checkpoint_selection": {k: v for k, v in chosen.items() if k != "candidates"},
        "base_model": model_args.model_name_or_path,
        "use_peft": bool(model_args.use_peft),
        "git_revision": git_revision(),
        "recipe": {
            "script": dataclasses.asdict(script_args),
            "model": dataclasses.asdict(model_args),
            "training": json.loads(training_args.to_json_string()),
        },
    }
    main_process = trainer.is_world_process_zero()
    if main_process:
        (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
        (out / "sft_run.json").write_text(json.dumps(run, indent=1, default=str))
        write_selection(out, chosen)
    write_consumed(out, "sft", seed=training_args.seed, trainer=trainer, row_unit="rows (SFT examples)")
    record_training(out, stage="sft", start_model=model_args.model_name_or_path, dataset=script_args.dataset_name,
                    splits=None, recipe=run["recipe"],
                    data={**{k: v for k, v in stats.items() if k != "training_tasks"}, "sizing": chosen["sizing"]},
                    metrics=metrics, global_step=trainer.state.global_step, write=main_process,
                    tasks=stats.get("training_tasks"))
    logger.info("rank %d/%d: trained %d steps, metrics %s, saved to %s", training_args.process_index,
                training_args.world_size, trainer.state.global_step, metrics, out)
    if hasattr(trainer, "end"):  # transformers >= 5.18: finish trackers, destroy the process group
        trainer.end()
    return run


def add_stops(trainer: Any, script_args: SFTScriptArguments) -> None:
    """What may end training before its budget: the wall-clock limit, early stopping on the dev metric."""
    if script_args.max_train_seconds is not None:
        trainer.add_callback(wall_clock_stop(script_args.max_train_seconds))
    if script_args.early_stopping_patience is not None:
        from transformers import EarlyStoppingCallback  # transformers loads with TRL's trainer, never at import

        trainer.add_callback(EarlyStoppingCallback(script_args.early_stopping_patience,
                                                   script_args.early_stopping_threshold))


def sizing(script_args: SFTScriptArguments, training_args: PlannerSFTConfig, state: Any,
           stats: dict[str, Any]) -> dict[str, Any]:
    """How long SFT trained on its data and why it stopped (checkpoint_selection.json, sft_run.json, provenance):
    the budget asked for (epochs over the rows, or a fixed step count), the steps and epochs run, and the reason
    training ended (early stopping, the wall-clock limit, or the budget spent)."""
    by_epochs = training_args.max_steps is None or training_args.max_steps <= 0
    planned = state.max_steps
    patience = script_args.early_stopping_patience
    if state.global_step < planned and patience is not None:
        why = f"early stopping: no better {training_args.metric_for_best_model} in {patience} dev evaluation(s)"
    elif state.global_step < planned:
        why = "max_train_seconds reached" if script_args.max_train_seconds is not None else "stopped before budget"
    else:
        why = "budget spent"
    budget = f"{training_args.num_train_epochs:g} epochs" if by_epochs else f"{training_args.max_steps} steps"
    return {"budget": budget,
            "train_rows": stats["train"]["rows"],
            "planned_steps": planned, "steps": state.global_step, "epochs": round(float(state.epoch or 0.0), 3),
            "early_stopping_patience": patience, "stopped": why,
            "best_metric": state.best_metric, "metric": training_args.metric_for_best_model}


def wall_clock_stop(seconds: float) -> Any:
    """A `TrainerCallback` that stops training once `seconds` of wall time have passed since training began
    (checked after every optimizer step)."""
    from transformers import TrainerCallback

    class WallClockStop(TrainerCallback):
        def __init__(self) -> None:
            self.start: float | None = None

        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.monotonic()

        def on_step_end(self, args, state, control, **kwargs):
            if self.start is not None and time.monotonic() - self.start >= seconds:
                logger.info("max_train_seconds=%.0f reached at step %d: stopping", seconds, state.global_step)
                control.should_training_stop = True
            return control

    return WallClockStop()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from omnidecision.preflight import run_refusing

    run_refusing(main, *parse_args())
