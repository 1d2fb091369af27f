"""Closure-aligned GRPO of the planner: one straight-line `main()` over TRL's `GRPOTrainer`.

One prompt = one reconstructed ledger state; a group of `num_generations` decisions is sampled and scored
WITHOUT executing it (closure checks + optional reward judge). Starts from an SFT checkpoint (full, or a new LoRA
with `use_peft`) or continues an SFT LoRA adapter (a folder with adapter_config.json). Generation by transformers
(CPU) or vLLM (`use_vllm`, server/colocate: GPU only, see docs/research/stack.md). After training, the held-out mean
closure reward of the starting and the trained planner, measured in the same run, goes to
`output_dir/closure_eval.json`, next to what the Hugging Face tools read (train_results.json, all_results.json,
trainer_state.json, the model card README.md) and `log_history.json`.

How this GRPO departs from plain GRPO (each a recipe field; measurements in docs/research/rl-recipe.md, "GRPO on the
closure rubric"):
1. No reference model, no KL term (`beta: 0.0`, TRL's default): the policy starts from SFT and the closure rubric
   cannot be gamed by drifting away from valid actions (an invalid decision scores 0 on every check).
2. Token-level loss normalisation across the batch (`loss_type: dapo`), rewards scaled per group
   (`scale_rewards: group`), truncated completions masked (`mask_truncated_completions`).
3. The reward is the closure rubric over states, not an executed trajectory's outcome: K decisions per ledger
   state are scored without running a tool (`rewards/closure.py`); a call earns its call credit only when its
   tool fits the need.
4. State selection (`select_states: balanced`, `rl/select.py`): the states the start planner decides wrongly
   (greedy) plus as many it gets right, instead of all states.
5. Weight averaging (`weight_average: true`, `rl/averaging.py`): the final weights are the running mean of the
   weights over the last part of the run, not the last weights.
6. Sampling near the serving decoding (`temperature: 0.7` in the tiny recipe), since the planner is served greedily.
7. The checkpoint policy of every post-SFT arm (`checkpoint_policy: dev_closure`, omnidecision/checkpoints.py): the
   saved planner is the best of the start, every `checkpoint_every` steps and the final weights by the greedy closure
   reward on dev states (checkpoint_selection.json). The states the trainer scored go to states_seen.json, what the
   run consumed (steps, completions, tokens, threads, seed) to consumed.json.

GRPO with the agent in the loop (`environment: ledger`, TRL's environment API, and the executed reward) is trained by
`omnidecision grpo-agent`, in the layer above this one and the rollout engine: it imports these phases
(`prepare_run`, `load_policy`, `build_rewards`, `save_model`, `main` with the rewards it brings) and the agent. This
module runs no agent and names none: a recipe with an environment is refused here, before anything loads.

Placement: the policy is moved to this process's training device before the held-out evaluation and the state
selection (on a GPU node they would otherwise decode an 8B model on the CPU while the other ranks wait). With
sharded parameters (ZeRO-3, FSDP) no rank holds the whole model: the in-run evaluation is skipped with a warning
(evaluate afterwards with `python -m omnidecision.rl.evaluate`) and balanced selection is refused.

    omnidecision grpo --config configs/grpo/tiny-cpu.yaml [--max_steps 50 ...]
    omnidecision grpo --accelerate-config configs/accelerate/zero3.yaml \
        --config configs/grpo/qwen3-8b-vllm-colocate.yaml
    accelerate launch -m omnidecision.rl.train --config configs/grpo/qwen3-8b-lora-vllm-server.yaml
"""

from __future__ import annotations

import json
import logging
import sys
import time
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

from omnidecision.checkpoints import (
    CheckpointSelection,
    final_selection,
    resolve_resume,
    save_ecosystem_outputs,
    write_consumed,
    write_selection,
)
from omnidecision.modeling import compact_lm_head, is_adapter, load_planner
from omnidecision.preemption import PreemptionCheckpoint
from omnidecision.preflight import require, require_attention, run_refusing, sharded_parameters, wandb_offline_fallback
from omnidecision.provenance import record_training
from omnidecision.rewards import get_reward_funcs
from omnidecision.rewards.registry import bind_params
from omnidecision.rl.averaging import TailWeightAverage, check_supported
from omnidecision.rl.config import (
    GRPORecipe,
    GRPOScriptArguments,
    PlannerGRPOConfig,
    PlannerModelConfig,
    closure_decoding,
    parse_args,
)
from omnidecision.rl.dryrun import grpo_checks, reward_weights_checks, whole_model_checks
from omnidecision.rl.evaluate import ClosureDecoding, dev_closure_scorer, heldout_closure_reward, paired_comparison
from omnidecision.rl.judge_stats import gather_judge_stats, judges_of, with_judge_logging
from omnidecision.rl.sources import source_counts
from omnidecision.rl.states import StateRecorder, load_states, select

logger = logging.getLogger(__name__)


class Policy(NamedTuple):
    """The policy a run trains: the model, its tokenizer and TRL's LoRA config (None: no new adapter)."""

    model: Any
    tokenizer: Any
    peft_config: Any


def load_policy(model_args: PlannerModelConfig) -> Policy:
    """(model, tokenizer, peft_config): an adapter folder is continued trainable; else the checkpoint, with a new
    LoRA when `use_peft`."""
    from trl import get_peft_config

    adapter = is_adapter(model_args.model_name_or_path)
    if adapter and model_args.use_peft:
        logger.warning("%s is an adapter: it is continued as is, use_peft/lora_* are ignored",
                       model_args.model_name_or_path)
    model, tokenizer = load_planner(model_args.model_name_or_path, trainable=True,
                                    tokenizer_path=model_args.tokenizer_name_or_path,
                                    revision=model_args.model_revision, dtype=model_args.dtype,
                                    attn_implementation=model_args.attn_implementation)
    return Policy(model, tokenizer, None if adapter else get_peft_config(model_args))


def _check_backend(training_args: PlannerGRPOConfig) -> None:
    import torch

    if training_args.use_vllm and not torch.cuda.is_available():
        raise RuntimeError("use_vllm=True needs CUDA: TRL's vLLM weight sync does not work on CPU "
                           "(docs/research/stack.md). Use configs/grpo/tiny-cpu.yaml (transformers generation) here.")


def _place_policy(model: Any, script_args: GRPOScriptArguments, training_args: PlannerGRPOConfig) -> bool:
    """Put the policy on this process's training device; returns whether the in-run closure evaluation can run
    (False, with a warning, when the launch shards the parameters)."""
    sharded = sharded_parameters(training_args)
    if sharded is None:
        # DDP / ZeRO-2 / one process: the trainer would move it there anyway; doing it now makes the evaluation and
        # the state selection below run on the GPU instead of the CPU
        model.to(training_args.device)
        return script_args.eval_closure_n != 0
    # balanced selection and dev_closure need the whole model: `prepare_run` refused them before anything loaded;
    # refused here too, in the same words, for a caller that places a policy itself
    require(whole_model_checks(script_args, sharded))
    if script_args.eval_closure_n != 0:
        logger.warning("%s shards the parameters: the in-run held-out closure evaluation is skipped "
                       "(eval_closure_n=%d). Evaluate afterwards: python -m omnidecision.rl.evaluate OUTPUT_DIR "
                       "DATASET --n %d", sharded, script_args.eval_closure_n, script_args.eval_closure_n)
    return False


@dataclass
class TrainingStates:
    """The data phase's hand-off: the states the run trains on and is evaluated on, and how they were chosen."""

    train: Any  # after `select_states`
    heldout: Any
    readable: dict[str, Any]  # split name -> every state this run could read (before selection), for provenance
    mix: dict[str, Any] | None  # the state sources' stats (None: `dataset_name`)
    selection: dict[str, Any]

    def counts(self) -> dict[str, Any]:
        """The data block of the run's provenance."""
        return {"selection": self.selection, "train_states": len(self.train), "heldout_states": len(self.heldout)}


@dataclass(frozen=True)
class HeldoutEvaluation:
    """`evaluate(model)`: the held-out closure reward of a planner on this run's held-out states, decoded and scored
    the same way each time (the start, the last and the trained weights are compared state by state)."""

    heldout: Any
    tokenizer: Any
    n: int
    decoding: ClosureDecoding

    def __call__(self, model: Any) -> dict[str, Any]:
        return heldout_closure_reward(model, self.heldout, n=self.n, tokenizer=self.tokenizer,
                                      decoding=self.decoding)


@dataclass
class TrainedRun:
    """What the training phase hands to the phases after it."""

    trainer: Any
    result: Any  # transformers' TrainOutput
    seconds: float
    recorder: StateRecorder | None  # the states this run scored, for consumed.json (None: no ledger states)
    chooser: CheckpointSelection | None  # the dev_closure checkpoint policy, when the recipe asks for it
    averager: Any | None  # rl/averaging.TailWeightAverage, when the recipe averages


@dataclass
class FinalWeights:
    """The trained planner's held-out figures and how its final weights were chosen."""

    after: dict[str, Any] | None  # held-out closure reward of the saved weights (None: no in-run evaluation)
    last: dict[str, Any] | None  # ... of the last weights before averaging replaced them
    averaged: Any  # what TailWeightAverage.apply() returned (None without averaging)
    chosen: dict[str, Any]  # the checkpoint policy's record (checkpoint_selection.json)


# reward name -> factory `(**reward_kwargs) -> reward function`: rewards an entry above this layer brings by import
RewardFactories = Mapping[str, Callable[..., Any]]


def main(script_args: GRPOScriptArguments, training_args: PlannerGRPOConfig, model_args: PlannerModelConfig,
         callbacks: list[Any] | None = None, rewards: RewardFactories | None = None) -> dict[str, Any]:
    """Train; `callbacks` (TrainerCallback objects) join the trainer's, e.g. a benchmark's compute budget;
    `rewards`: reward factories by name that the calling entry brings (`omnidecision grpo-agent`'s executed reward),
    beside the reward registry's."""
    return train_decisions(GRPORecipe(script_args, training_args, model_args), callbacks, rewards or {})


def train_decisions(recipe: GRPORecipe, callbacks: list[Any] | None, rewards: RewardFactories) -> dict[str, Any]:
    """The decision GRPO's phases in order, over one recipe (`main`'s body; `closure_eval.json`'s report)."""
    prepare_run(recipe, rewards=rewards)

    # --- data: RL states (train) and the held-out split (rl/states.py: the same states rft-select samples on;
    # `dataset_name`, or the recipe's `state_sources` mixed by weight: rl/sources.py)
    train, heldout, mix = load_states(recipe.script, recipe.training)
    logger.info("RL states: %d train, %d held-out", len(train), len(heldout))

    # --- rewards from the recipe
    reward_funcs = build_rewards(recipe, rewards)

    # --- policy: SFT checkpoint or adapter
    policy = load_policy(recipe.model)
    can_eval = _place_policy(policy.model, recipe.script, recipe.training)

    # --- the training states: all, or balanced by the start planner's own greedy decisions (rl/select.py)
    states = select_states(policy, train, heldout, mix, recipe)

    # --- held-out closure reward of the starting planner (same run, same rows, same decoding)
    evaluate = HeldoutEvaluation(heldout, policy.tokenizer, recipe.script.eval_closure_n, recipe.decoding) \
        if can_eval and recipe.training.process_index == 0 else None
    before = evaluate(policy.model) if evaluate else None

    # --- train (with tail weight averaging when asked: rl/averaging.py)
    run = train_policy(policy, states.train, reward_funcs, recipe, callbacks)

    # --- held-out closure reward of the trained planner, and the checkpoint policy's choice of its weights
    final = finish_weights(run, evaluate)

    # --- save: the model, what the ecosystem reads, then this project's report and records
    main_process = save_model(run, policy.tokenizer, recipe)
    report = closure_report(run, final, before, states, recipe)
    add_judge_stats(report, reward_funcs)
    write_records(run, final, report, states, main_process, recipe)
    if evaluate:
        log_closure(report)
    return report


def prepare_run(recipe: GRPORecipe, *, rewards: Collection[str] = (), environments: Collection[str] = ()) -> Path:
    """Refuse a launch that cannot work (vLLM without CUDA, a missing attention kernel, what the dry run refuses:
    `rl/dryrun.py:grpo_checks`, with the reward and environment names the calling entry brings and the sharding this
    launch brings), fall back to offline wandb without a key, and create the output folder (returned)."""
    _check_backend(recipe.training)
    require_attention(recipe.model.attn_implementation, "GRPO recipe")
    wandb_offline_fallback(recipe.training.report_to)
    # the dry run's checks, before anything loads (the dev states, the reward weights, what sharding rules out: a
    # refusal here costs nothing, after the trainer is built it cost the model load)
    require(grpo_checks(recipe.script, recipe.training, recipe.model, rewards=rewards, environments=environments,
                        sharded=sharded_parameters(recipe.training)))
    recipe.out.mkdir(parents=True, exist_ok=True)
    return recipe.out


def build_rewards(recipe: GRPORecipe, rewards: RewardFactories | None = None) -> list[Any]:
    """The recipe's reward functions in its order (a name in `rewards` from that factory, the others from the
    reward registry), with their judges' logging; `reward_weights` must give one weight each."""
    given = rewards or {}
    script, training = recipe.script, recipe.training
    # each process gets its share of the judge's concurrency and its own judge-cache file
    params = script.reward_params(training.process_index, training.world_size, training.output_dir,
                                  seed=training.seed)
    registered = iter(get_reward_funcs([n for n in script.reward_funcs if n not in given],
                                       **{n: p for n, p in params.items() if n not in given}))
    reward_funcs = with_judge_logging([_given_reward(n, given[n], params.get(n) or {}) if n in given
                                       else next(registered) for n in script.reward_funcs])
    require(reward_weights_checks(script, training))  # prepare_run's check, in its words, for a direct caller
    return reward_funcs


def _given_reward(name: str, factory: Callable[..., Any], params: Mapping[str, Any]) -> Any:
    """The reward function a given factory builds from the recipe's keyword arguments (checked against it first)."""
    bind_params(name, factory, params)
    return factory(**params)


def select_states(policy: Policy, train: Any, heldout: Any, mix: dict[str, Any] | None,
                  recipe: GRPORecipe) -> TrainingStates:
    """The training states after `select_states` (all, or balanced by the start planner's greedy decisions), with
    what the run's records say about them."""
    # every task whose states this run could read (before selection: the guard at eval time errs on the safe side)
    readable = {recipe.script.dataset_train_split: train, recipe.script.dataset_test_split: heldout}
    selected, selection = select(policy.model, policy.tokenizer, train, recipe.script, recipe.training)
    if mix is not None:
        selection["by_source"] = source_counts(selected)
    return TrainingStates(selected, heldout, readable, mix, selection)


def train_policy(policy: Policy, train: Any, reward_funcs: list[Any], recipe: GRPORecipe,
                 callbacks: list[Any] | None) -> TrainedRun:
    """Build TRL's GRPOTrainer with the recipe's checkpoint policy and weight averaging as callbacks, and train
    (resuming from a checkpoint when the recipe asks)."""
    from trl import GRPOTrainer

    script, training = recipe.script, recipe.training
    compact_lm_head()  # on the CPU, the policy's log-probs only at completion positions (modeling.py)
    recorder = StateRecorder(training.num_generations)
    trainer = GRPOTrainer(model=policy.model, reward_funcs=[recorder.wrap(reward_funcs[0]), *reward_funcs[1:]],
                          args=training, train_dataset=train, processing_class=policy.tokenizer,
                          peft_config=policy.peft_config, callbacks=callbacks)
    resume = resolve_resume(training.resume_from_checkpoint, training.output_dir)
    chooser = None
    if script.checkpoint_policy == "dev_closure":  # the one policy of the post-SFT arms (checkpoints.py)
        chooser = CheckpointSelection(trainer.model, dev_closure_scorer(script, script.dev_data(), policy.tokenizer,
                                                                        training.chat_template_kwargs),
                                      script.checkpoint_every, script.dev_data(), resume_from=resume)
        trainer.add_callback(chooser.callback)
    averager = None
    if script.weight_average:
        check_supported(training)
        # the trainer's model: with `peft_config` the trainer wrapped it, and only the adapter is trainable
        averager = TailWeightAverage(trainer.model, script.weight_average_start, script.weight_average_every,
                                     resume_from=resume)
        trainer.add_callback(averager)
    result, seconds = fit(trainer, training, resume)
    return TrainedRun(trainer, result, seconds, recorder, chooser, averager)


def train_environment(policy: Policy, train: Any, environment: Any, training_args: PlannerGRPOConfig,
                      callbacks: list[Any] | None) -> TrainedRun:
    """Build TRL's GRPOTrainer over an `environment_factory` (its `get_reward` the only reward; no checkpoint
    policy, no averaging) and train, resuming when the recipe asks. The environment is the caller's: this module
    runs none."""
    from trl import GRPOTrainer

    compact_lm_head()
    trainer = GRPOTrainer(model=policy.model, reward_funcs=None, args=training_args, train_dataset=train,
                          processing_class=policy.tokenizer, peft_config=policy.peft_config, callbacks=callbacks,
                          environment_factory=environment)
    result, seconds = fit(trainer, training_args, resolve_resume(training_args.resume_from_checkpoint,
                                                                 training_args.output_dir))
    return TrainedRun(trainer, result, seconds, None, None, None)


def fit(trainer: Any, training_args: PlannerGRPOConfig, resume: Any) -> tuple[Any, float]:
    """Train (with the SIGTERM checkpoint when the recipe keeps it): TRL's TrainOutput and the seconds it took."""
    if training_args.save_on_sigterm:
        trainer.add_callback(PreemptionCheckpoint())
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    return result, time.perf_counter() - start


def finish_weights(run: TrainedRun, evaluate: Callable[[Any], dict[str, Any]] | None) -> FinalWeights:
    """Evaluate the last weights (when averaging will replace them), apply the average, let the checkpoint policy
    choose among the candidates (the final weights are the last one), and evaluate what was chosen.
    `evaluate` None: no in-run evaluation (not rank 0, or sharded parameters)."""
    step = run.trainer.state.global_step
    last = averaged = None
    if run.averager is not None:
        if evaluate is not None:
            last = evaluate(run.trainer.model)
        averaged = run.averager.apply()
    if run.chooser is not None:
        chosen = run.chooser.finish(step, "final (weight average)" if run.averager else "final")
    else:
        chosen = final_selection(step, "weight average" if run.averager else "")
    after = evaluate(run.trainer.model) if evaluate is not None else None
    return FinalWeights(after, last, averaged, chosen)


def save_model(run: TrainedRun, tokenizer: Any, recipe: GRPORecipe, tags: tuple[str, ...] = ()) -> bool:
    """Save the planner, its tokenizer and what the ecosystem reads (metrics, trainer_state.json, model card);
    returns whether this is the main process (the one writer of the shared output folder). `tags`: the model card's,
    besides omnidecision, planner and grpo."""
    trainer = run.trainer
    trainer.save_model(recipe.training.output_dir)  # TRL saves on the main process only, the tokenizer with it
    main_process = trainer.accelerator.is_main_process
    if main_process:  # one writer into the shared folder (concurrent writers can truncate tokenizer.json)
        tokenizer.save_pretrained(recipe.training.output_dir)
    # what the ecosystem reads (metrics, trainer_state.json, model card) before this project's files
    save_ecosystem_outputs(trainer, {"train": dict(run.result.metrics)}, recipe.script.dataset_name,
                           tags=["omnidecision", "planner", "grpo", *tags])
    return main_process


def closure_report(run: TrainedRun, final: FinalWeights, before: dict[str, Any] | None, states: TrainingStates,
                   recipe: GRPORecipe) -> dict[str, Any]:
    """closure_eval.json: the start and trained planners' held-out closure reward and their paired comparison, with
    what produced them (model, data, rewards, selection, checkpoint choice, weight averaging, steps, time)."""
    run_eval = before is not None
    after, last, seed = final.after, final.last, recipe.training.seed
    return {
        "start": before, "trained": after,
        "delta_mean": round(after["closure"]["mean"] - before["closure"]["mean"], 4) if run_eval else None,
        # the same states before and after: the per-state difference is the sharp comparison
        "paired": paired_comparison(before["per_state"], after["per_state"], seed=seed) if run_eval else None,
        "model": recipe.model.model_name_or_path,
        "dataset": recipe.script.dataset_name if states.mix is None else None, "state_sources": states.mix,
        "reward_funcs": recipe.script.reward_funcs, "reward_weights": recipe.training.reward_weights,
        "selection": states.selection,
        "checkpoint_selection": {k: v for k, v in final.chosen.items() if k != "candidates"},
        "weight_average": None if run.averager is None else {
            "snapshots": final.averaged, "start_step": run.averager.start_step, "every": run.averager.every,
            "last": last, "paired_last": paired_comparison(before["per_state"], last["per_state"], seed=seed)
            if run_eval else None},
        "steps": run.trainer.state.global_step, "train_seconds": round(run.seconds, 2),
        "train_metrics": run.result.metrics,
    }


def add_judge_stats(report: dict[str, Any], reward_funcs: list[Any]) -> None:
    """Add every rank's judge statistics, summed, to `report` (a collective call: every rank runs it), and close
    the judges."""
    judges = judges_of(reward_funcs)
    if (judge_stats := gather_judge_stats(judges)) is not None:
        report["judge"] = judge_stats
    for judge in judges:
        judge.close()


def write_records(run: TrainedRun, final: FinalWeights, report: dict[str, Any], states: TrainingStates,
                  main_process: bool, recipe: GRPORecipe) -> None:
    """This project's files in the output folder: provenance, closure_eval.json, log_history.json,
    checkpoint_selection.json, states_seen.json and consumed.json (the main process writes the shared ones)."""
    trainer, out, training = run.trainer, recipe.out, recipe.training
    record_training(out, stage="grpo", start_model=recipe.model.model_name_or_path,
                    dataset=recipe.script.dataset_name, splits=states.readable, recipe=recipe.as_dict(),
                    data=states.counts(), metrics=dict(run.result.metrics), global_step=trainer.state.global_step,
                    write=main_process)
    if main_process:
        (out / "closure_eval.json").write_text(json.dumps(report, indent=2, default=str))
        (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=2, default=str))
        write_selection(out, final.chosen)
        if training.world_size == 1:  # with N processes a group's K completions are spread over the ranks
            (out / "states_seen.json").write_text(json.dumps(run.recorder.ids), "utf-8")
    # rank 0's count: with N processes each scores its equal share of the completions
    completions = run.recorder.completions * training.world_size
    write_consumed(out, "grpo", seed=training.seed, trainer=trainer, row_unit="completions",
                   completions=completions, extra={"states": completions // training.num_generations,
                                                   "num_generations": training.num_generations})


def log_closure(report: dict[str, Any]) -> None:
    """Log the held-out closure reward before and after training (and of the last weights before averaging)."""
    paired = report["paired"]
    logger.info("held-out closure reward: start %.4f -> trained %.4f (per-state delta %+.4f, 95%% CI "
                "[%+.4f, %+.4f]; %d better, %d worse, %d same; sign test p=%.3g)", report["start"]["closure"]["mean"],
                report["trained"]["closure"]["mean"], paired["delta_mean"], paired["ci95_low"], paired["ci95_high"],
                paired["wins"], paired["losses"], paired["ties"], paired["sign_test_p"])
    if (average := report["weight_average"]) is not None and average["last"] is not None:
        logger.info("the last weights, before averaging: %.4f (per-state delta %+.4f vs the start)",
                    average["last"]["closure"]["mean"], average["paired_last"]["delta_mean"])


def run_recipe(script_args: GRPOScriptArguments, training_args: PlannerGRPOConfig,
               model_args: PlannerModelConfig) -> dict[str, Any]:
    """Deprecated (CHANGELOG.md): `GRPORecipe(script_args, training_args, model_args).as_dict()`."""
    warnings.warn("omnidecision.rl.train.run_recipe is deprecated, use GRPORecipe.as_dict (CHANGELOG.md)",
                  DeprecationWarning, stacklevel=2)
    return GRPORecipe(script_args, training_args, model_args).as_dict()


def closure_eval_kwargs(script_args: GRPOScriptArguments, training_args: PlannerGRPOConfig,
                        tokenizer: Any) -> dict[str, Any]:
    """Deprecated (CHANGELOG.md): the keyword arguments of `heldout_closure_reward` that `HeldoutEvaluation` holds
    (`GRPORecipe.decoding`)."""
    warnings.warn("omnidecision.rl.train.closure_eval_kwargs is deprecated, use HeldoutEvaluation and "
                  "GRPORecipe.decoding (CHANGELOG.md)", DeprecationWarning, stacklevel=2)
    return dict(n=script_args.eval_closure_n, tokenizer=tokenizer, **asdict(closure_decoding(script_args,
                                                                                               training_args)))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_refusing(main, *parse_args(sys.argv[1:]))
