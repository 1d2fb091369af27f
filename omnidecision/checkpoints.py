"""Checkpoint and output helpers shared by the trained stages: resume after a kill; the files the Hugging Face tools
read; the one checkpoint-selection policy of every post-SFT arm (`CheckpointPolicyArguments`, `CheckpointSelection`:
checkpoint_selection.json); what a stage consumed (`write_consumed`: consumed.json).

    python -c "from omnidecision.checkpoints import resolve_resume; print(resolve_resume('true', 'runs/sft'))"
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from omnidecision.outputs import write_json_atomic

logger = logging.getLogger(__name__)


# The trainer writes this file after the weights, optimiser and RNG state: a folder without it is torn (the process
# was killed while saving) and must not be resumed from.
COMPLETE_MARKER = "trainer_state.json"


def last_complete_checkpoint(output_dir: str) -> str | None:
    """The newest `checkpoint-N` folder in `output_dir` that was written to the end (skipping torn ones)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    if not os.path.isdir(output_dir):
        return None
    steps = sorted((int(name.rsplit("-", 1)[1]), name) for name in os.listdir(output_dir)
                   if name.startswith(PREFIX_CHECKPOINT_DIR + "-") and name.rsplit("-", 1)[1].isdigit())
    for _, name in reversed(steps):
        path = os.path.join(output_dir, name)
        if os.path.isfile(os.path.join(path, COMPLETE_MARKER)):
            return path
        logger.warning("skipping %s: no %s (torn by a kill while saving)", path, COMPLETE_MARKER)
    return None


# The default of `resume_from_checkpoint` in the SFT and GRPO recipes: a restarted command continues its run.
RESUME_DEFAULT = "auto"
RESUME_HELP = ("Where training starts. auto (default): from the newest complete checkpoint in output_dir when there "
               "is one (a restart of the same command continues; a checkpoint torn by a kill while saving is "
               "skipped), else from scratch. true: the same, warning when there is none. A checkpoint folder: from "
               "it. false: from scratch even when output_dir holds checkpoints.")
# The `save_on_sigterm` field of the SFT and GRPO recipes (on by default): what preemption.py does on SIGTERM.
SAVE_ON_SIGTERM_HELP = ("On SIGTERM (a SLURM preemption or requeue, KillWait seconds before SIGKILL), save a "
                        "checkpoint after the step in flight and exit 143, so the requeued job resumes there "
                        "(omnidecision/preemption.py). False: the signal ends the run at once.")


def _checkpoints(output_dir: str) -> list[str]:
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    if not os.path.isdir(output_dir):
        return []
    return sorted(n for n in os.listdir(output_dir) if n.startswith(PREFIX_CHECKPOINT_DIR + "-"))


def resolve_resume(value: str | bool | None, output_dir: str, *, say: bool = True) -> str | None:
    """`auto` (the recipes' default) → the newest complete checkpoint in `output_dir`, or None (a fresh start) when
    there is none; `true` → the same, with a warning when there is none; a path → itself; false/none → None (a
    warning when `output_dir` holds checkpoints: the new run's rotation may delete them). A named folder that does
    not exist is an error (a typo must not restart from scratch). The one resume rule of `omnidecision sft|grpo`
    and the SLURM scripts. `say=False`: the same answer, logged by nobody (a check asked before the run, which says
    it once itself when it starts).

    >>> resolve_resume("auto", "/nonexistent") is None and resolve_resume("false", "/nonexistent") is None
    True
    """
    if value is None or value is False or str(value).lower() in ("false", "no", "none", ""):
        if say and (old := _checkpoints(output_dir)):
            logger.warning("starting from scratch (resume_from_checkpoint=false) in %s, which holds %s: the new "
                           "run's checkpoints replace them", output_dir, ", ".join(old))
        return None
    if str(value).lower() == RESUME_DEFAULT:
        last = last_complete_checkpoint(output_dir)
        if say:
            logger.info("resuming from %s" if last else "no checkpoint in %s: starting from scratch",
                        last or output_dir)
        return last
    if value is True or str(value).lower() in ("true", "yes", "last"):
        last = last_complete_checkpoint(output_dir)
        if say and last is None:
            logger.warning("resume requested but no complete checkpoint in %s: starting from scratch", output_dir)
        elif say:  # a requeued job's log says where it picked up
            logger.info("resuming from %s", last)
        return last
    if not os.path.isdir(str(value)):
        raise FileNotFoundError(f"resume_from_checkpoint: no checkpoint folder at {value}")
    return str(value)


def save_ecosystem_outputs(trainer: Any, metrics: dict[str, dict[str, Any]], dataset: str | None,
                           tags: list[str]) -> None:
    """What Hugging Face tools read in `output_dir`, written by the trainer itself (on the main process only):
    `<split>_results.json` + `all_results.json` per non-empty split, `trainer_state.json`, the model card README.md.
    Both training entries call it. A local dataset folder is left out of the card (it would become a Hub link)."""
    for split, values in metrics.items():
        if values:
            trainer.save_metrics(split, values)
    trainer.save_state()
    hub_dataset = None if dataset is None or Path(dataset).exists() else dataset
    trainer.create_model_card(model_name=Path(trainer.args.output_dir).name, dataset_name=hub_dataset, tags=tags)


# ---- the checkpoint-selection policy of every post-SFT arm (sft_plus, rft, grpo*) ----------------------------------
SELECTION_FILE = "checkpoint_selection.json"
SELECTION_STATE = "checkpoint_selection.pt"  # the best candidate so far, saved next to each checkpoint (resume)


@dataclass
class CheckpointPolicyArguments:
    """Which weights a run saves. `dev_closure` (the recipes of every post-SFT arm): candidates are the start (step
    0), every `checkpoint_every` optimizer steps and the final weights (after weight averaging, where the recipe
    averages); each is scored by the greedy mean closure reward on the first `checkpoint_dev_n` dev states, decoded
    the same way for every arm; the best is saved (ties: the earliest). `final`: the last weights, as the trainer
    leaves them (SFT's own `load_best_model_at_end` still applies)."""

    checkpoint_policy: Literal["final", "dev_closure"] = field(default="final", metadata={
        "help": "final: save the weights training ends with. dev_closure: save the best of step 0, every "
                "checkpoint_every steps and the final weights by the greedy closure reward on dev states "
                "(checkpoint_selection.json records every candidate and the choice)."})
    checkpoint_every: int = field(default=0, metadata={
        "help": "dev_closure: a candidate every N optimizer steps (0: only step 0 and the final weights)."})
    checkpoint_dev_data: str | None = field(default=None, metadata={
        "help": "dev_closure: the RL states (a harvest's rl/ folder, or the harvest folder) whose "
                "checkpoint_dev_split scores the candidates. Default: GRPO, its dataset_name; SFT, the rl/ folder "
                "beside dataset_name, or for an rft-select dataset the RL states it was sampled from."})
    checkpoint_dev_split: str = field(default="validation", metadata={
        "help": "dev_closure: the split of checkpoint_dev_data that scores the candidates (the dev suite's states)."})
    checkpoint_dev_n: int = field(default=64, metadata={
        "help": "dev_closure: score on the first N dev states (-1: all)."})
    checkpoint_dev_max_new_tokens: int = field(default=32, metadata={
        "help": "dev_closure: tokens decoded per dev decision (a short-form action fits in 32)."})

    def check_policy(self) -> None:
        if self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        if self.checkpoint_dev_n == 0 or self.checkpoint_dev_n < -1:
            raise ValueError(f"checkpoint_dev_n must be >= 1 or -1 (all), got {self.checkpoint_dev_n}")
        if self.checkpoint_dev_max_new_tokens < 8:
            raise ValueError(f"checkpoint_dev_max_new_tokens={self.checkpoint_dev_max_new_tokens} cannot hold one "
                             "JSON action")


class CheckpointSelection:
    """The `dev_closure` policy as a TrainerCallback: scores the start and every `every` steps, keeps a CPU copy of
    the best trainable weights; `finish(model)` scores the final weights, writes the best into the model and returns
    the record (written to OUTPUT_DIR/checkpoint_selection.json). The best-so-far is saved next to each checkpoint,
    so a resumed run keeps step 0 among its candidates."""

    def __init__(self, model: Any, score: Callable[[Any], float], every: int, dev_data: str,
                 resume_from: str | None = None) -> None:
        from transformers import TrainerCallback

        self.model, self.score, self.every, self.dev_data = model, score, every, dev_data
        self.candidates: list[dict[str, Any]] = []
        self.best: tuple[float, int, dict[str, Any]] | None = None  # (score, step, weights)
        if resume_from is not None and (Path(resume_from) / SELECTION_STATE).exists():
            import torch

            saved = torch.load(Path(resume_from) / SELECTION_STATE, map_location="cpu", weights_only=False)
            self.candidates = saved["candidates"]
            self.best = (saved["score"], saved["step"], saved["weights"])
        outer = self

        class _Callback(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                if not any(c["step"] == state.global_step for c in outer.candidates):
                    outer.candidate(state.global_step)

            def on_step_end(self, args, state, control, **kwargs):
                if outer.every and state.global_step % outer.every == 0 and state.global_step < state.max_steps:
                    outer.candidate(state.global_step)

            def on_save(self, args, state, control, **kwargs):
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                if outer.best is not None and state.is_world_process_zero and folder.is_dir():
                    import torch

                    score, step, weights = outer.best
                    torch.save({"candidates": outer.candidates, "score": score, "step": step, "weights": weights},
                               folder / SELECTION_STATE)

        self.callback = _Callback()

    def _weights(self) -> dict[str, Any]:
        return {n: p.detach().to("cpu", copy=True) for n, p in self.model.named_parameters() if p.requires_grad}

    def candidate(self, step: int, label: str = "") -> float:
        value = round(self.score(self.model), 6)
        self.candidates.append({"step": step, "dev_closure": value, **({"label": label} if label else {})})
        logger.info("checkpoint candidate at step %d%s: dev closure %.4f", step, f" ({label})" if label else "", value)
        if self.best is None or value > self.best[0]:  # ties: the earlier candidate stays
            self.best = (value, step, self._weights())
        return value

    def finish(self, step: int, final_label: str = "final") -> dict[str, Any]:
        """Score the final weights, put the best candidate's weights into the model, return the record."""
        import torch

        self.candidate(step, final_label)
        assert self.best is not None
        score, best_step, weights = self.best
        chosen = next(c for c in self.candidates if c["step"] == best_step and c["dev_closure"] == score)
        if chosen is not self.candidates[-1]:
            params = dict(self.model.named_parameters())
            with torch.no_grad():
                for n, w in weights.items():
                    params[n].copy_(w.to(params[n].device, params[n].dtype))
        logger.info("checkpoint selection (dev_closure): step %d chosen (dev closure %.4f) of %d candidates",
                    best_step, score, len(self.candidates))
        return {"policy": "dev_closure", "chosen_step": best_step, "chosen_label": chosen.get("label", ""),
                "chosen_dev_closure": score, "candidates": self.candidates, "dev_data": self.dev_data}


def final_selection(step: int, note: str = "") -> dict[str, Any]:
    """The record of the `final` policy (what checkpoint_selection.json says when nothing was chosen)."""
    return {"policy": "final", "chosen_step": step, "candidates": [{"step": step}], **({"note": note} if note else {})}


def write_selection(output_dir: str | Path, record: dict[str, Any]) -> None:
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(output_dir) / SELECTION_FILE, record)


# ---- what a trained stage consumed ----------------------------------------------------------------------------------
CONSUMED_FILE = "consumed.json"


def write_consumed(output_dir: str | Path, stage: str, *, seed: int, trainer: Any = None, row_unit: str = "rows",
                   completions: int | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """OUTPUT_DIR/consumed.json: optimizer steps, rows (= steps × effective batch: per-device batch × gradient
    accumulation × processes; for GRPO a row is one completion, for the judge one pair), tokens when the trainer
    counted them, completions sampled (grpo, rft-select), the thread count and the seed. Matching controls on what
    they consumed reads this file, not shared wall-clock."""
    import torch

    record: dict[str, Any] = {"stage": stage, "optimizer_steps": 0, "effective_batch": 0, "rows": 0,
                              "row_unit": row_unit, "tokens": None, "completions_sampled": completions,
                              "threads": torch.get_num_threads(), "seed": seed}
    if trainer is not None:
        args = trainer.args
        batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * max(1, args.world_size)
        steps = int(trainer.state.global_step)
        tokens = next((e["num_tokens"] for e in reversed(trainer.state.log_history) if "num_tokens" in e), None)
        if tokens is None and getattr(trainer.state, "num_input_tokens_seen", 0):
            tokens = trainer.state.num_input_tokens_seen
        record.update(optimizer_steps=steps, effective_batch=batch, rows=steps * batch,
                      tokens=int(tokens) if tokens is not None else None)
    record.update(extra or {})
    if trainer is None or trainer.is_world_process_zero():
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        write_json_atomic(Path(output_dir) / CONSUMED_FILE, record)  # a control's budget reads it
    return record
