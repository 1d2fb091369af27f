"""GRPO with the agent in the loop: the decision GRPO's phases (`rl/train.py`) with what runs the agent brought in
by import, in the one layer that may import both `rl` and the rollout engine.

Two ways a GRPO recipe puts the agent in the loop, both trained here and nowhere else (decision-level GRPO, `rl`,
refuses a recipe with an environment before anything loads, and knows no reward that runs the agent):

- `environment: ledger`: trajectory-level GRPO through TRL's own API, `GRPOTrainer(environment_factory=
  LedgerEnvironment)` (`rollout/environment.py`: every rollout runs the agent on one task, rewarded by its judged
  answer; `dataset_name` is a task set). `environment_main` reuses the decision GRPO's phases (`prepare_run`,
  `load_policy`, `train_environment`, `save_model`) and writes `environment_rollouts.jsonl` and
  `environment_eval.json`.
- the executed reward, `reward_funcs: [executed, ...]` (`grounding/reward.py`: each candidate applied at its recorded
  state and the run continued); the decision GRPO's `main` runs with it given as a factory (`REWARDS`).

A recipe that still names the executed reward by its import path (`OLD_REWARD_PATHS`) is read as `executed`, with a
warning on stderr (CHANGELOG.md, "Deprecated").

    omnidecision grpo-agent --config configs/grpo/tiny-cpu-exec.yaml --model_name_or_path SFT --dataset_name RL
    omnidecision grpo-agent --config configs/grpo/tiny-cpu-env.yaml --model_name_or_path SFT --dataset_name TASKS
    accelerate launch -m omnidecision.grounding.grpo --config configs/grpo/tiny-cpu-env.yaml
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from omnidecision.grounding.reward import get_executed_reward
from omnidecision.launch import Stage
from omnidecision.preflight import DryRunReport, run_refusing
from omnidecision.provenance import record_training
from omnidecision.rl import dryrun as decision_dryrun
from omnidecision.rl import train as decision
from omnidecision.rl.config import GRPORecipe, GRPOScriptArguments, PlannerGRPOConfig, PlannerModelConfig
from omnidecision.rl.config import parse_args as parse_decision_args
from omnidecision.rollout.environment import LedgerEnvironment

logger = logging.getLogger(__name__)

# reward name -> factory: the rewards that run the agent (a recipe's `reward_funcs` and `reward_kwargs` name them)
REWARDS: dict[str, Any] = {"executed": get_executed_reward}
# `environment:` name -> TRL's `environment_factory`
ENVIRONMENTS: dict[str, type[LedgerEnvironment]] = {"ledger": LedgerEnvironment}
# the reward's old spelling in recipes (the import path the reward registry imported), deprecated
OLD_REWARD_PATHS = {"omnidecision.grounding.reward.get_executed_reward": "executed"}


def parse_args(args: list[str] | None = None) -> tuple[GRPOScriptArguments, PlannerGRPOConfig, PlannerModelConfig]:
    """The GRPO recipe (`--config RECIPE.yaml` + overrides, `None`: sys.argv), parsed by the decision GRPO's parser,
    with an old reward path read as its name (`OLD_REWARD_PATHS`, one warning each)."""
    script, training, model = parse_decision_args(args)
    renamed = {old: new for old, new in OLD_REWARD_PATHS.items() if old in script.reward_funcs}
    for old, new in renamed.items():
        sys.stderr.write(f"warning: reward `{old}` is deprecated, use `{new}` (CHANGELOG.md)\n")
    if renamed:
        script.reward_funcs = [renamed.get(name, name) for name in script.reward_funcs]
        script.reward_kwargs = {renamed.get(k, k): v for k, v in (script.reward_kwargs or {}).items()} or None
    return script, training, model


# the stage as the launcher takes it (`python -m` / `accelerate launch -m` this module)
AGENT_GRPO_STAGE = Stage("grpo-agent", "omnidecision.grounding.grpo", parse_args)


def runs_the_agent(script_args: GRPOScriptArguments) -> bool:
    """Whether a recipe needs this entry: an environment, or a reward that runs the agent."""
    return script_args.environment is not None or any(name in REWARDS for name in script_args.reward_funcs)


def main(script_args: GRPOScriptArguments, training_args: PlannerGRPOConfig, model_args: PlannerModelConfig,
         callbacks: list[Any] | None = None) -> dict[str, Any]:
    """Train: through TRL's environment API when the recipe names an environment, else the decision GRPO with the
    rewards that run the agent given by name (a recipe without them trains exactly as `omnidecision grpo`)."""
    if script_args.environment is not None:
        return environment_main(script_args, training_args, model_args, callbacks)
    return decision.main(script_args, training_args, model_args, callbacks, rewards=REWARDS)


def dry_run(stage_args: list[str], *, accelerate_config: str | None = None,
            num_processes: int | None = None) -> DryRunReport:
    """The decision GRPO's dry run, with this entry's stage, rewards and environments."""
    return decision_dryrun.dry_run(stage_args, accelerate_config=accelerate_config, num_processes=num_processes,
                                   stage=AGENT_GRPO_STAGE, rewards=REWARDS, environments=ENVIRONMENTS)


def environment_main(script_args: GRPOScriptArguments, training_args: PlannerGRPOConfig,
                     model_args: PlannerModelConfig, callbacks: list[Any] | None = None) -> dict[str, Any]:
    """`environment: ledger`: TRL's GRPOTrainer with `environment_factory=LedgerEnvironment` over tasks; every
    rollout runs the agent on one task, rewarded by its judged answer. Writes `output_dir/environment_rollouts.jsonl`
    (every finished rollout: task, outcome, answer, judged, reward) and `environment_eval.json`."""
    return run_environment(GRPORecipe(script_args, training_args, model_args), callbacks)


def run_environment(recipe: GRPORecipe, callbacks: list[Any] | None) -> dict[str, Any]:
    """`environment_main`'s body: the decision GRPO's phases (`prepare_run`, `load_policy`, `train_environment`,
    `save_model`, the recipe's provenance) around the environment's data, tool format and records."""
    script, training = recipe.script, recipe.training
    # what the dry run refuses (reward_weights with an environment among them: rl/dryrun.py:reward_weights_checks),
    # refused in its words before anything loads
    out = decision.prepare_run(recipe, environments=ENVIRONMENTS)
    environment = ENVIRONMENTS[str(script.environment)]

    # --- data: one row per training task (the digest comes from the environment's reset)
    train = environment.load_dataset(str(script.dataset_name), script.task_format)
    if script.max_train_samples:
        train = train.select(range(min(script.max_train_samples, len(train))))
    train = train.shuffle(seed=training.seed)
    logger.info("environment GRPO: %d training tasks", len(train))

    # --- policy; the planner's action JSON becomes the tool-call format (the served template is restored on save)
    policy = decision.load_policy(recipe.model)
    served_template = policy.tokenizer.chat_template
    environment.use_tool_format(policy.tokenizer)
    environment.configure(digest_max_chars=script.environment_digest_max_chars,
                          step_budget=script.environment_step_budget,
                          closure_weight=script.environment_closure_weight)

    # --- train
    run = decision.train_environment(policy, train, environment, training, callbacks)

    # --- save with the served chat template (the tool format is a training-time rendering only)
    policy.tokenizer.chat_template = served_template
    if hasattr(policy.tokenizer, "response_template"):
        policy.tokenizer.response_template = None
    main_process = decision.save_model(run, policy.tokenizer, recipe, tags=("environment",))
    report = environment_report(run, list(environment.finished), recipe)
    record_training(out, stage="grpo", start_model=recipe.model.model_name_or_path, dataset=script.dataset_name,
                    splits={"train": train}, recipe=recipe.as_dict(),
                    data={"environment": script.environment, "train_tasks": len(train)},
                    metrics=dict(run.result.metrics), global_step=run.trainer.state.global_step, write=main_process)
    if run.trainer.is_world_process_zero():
        with (out / "environment_rollouts.jsonl").open("w") as f:
            f.writelines(json.dumps(r, default=str) + "\n" for r in environment.finished)
        (out / "environment_eval.json").write_text(json.dumps(report, indent=2, default=str))
        (out / "log_history.json").write_text(json.dumps(run.trainer.state.log_history, indent=2, default=str))
    logger.info("environment GRPO: %d steps, %d rollouts, judged correct %s", report["steps"], report["rollouts"],
                report["judged_correct_rate"])
    return report


def environment_report(run: decision.TrainedRun, rollouts: list[dict[str, Any]],
                       recipe: GRPORecipe) -> dict[str, Any]:
    """environment_eval.json: steps, time, the rollouts and their judged-correct rate, the trainer's metrics."""
    return {"environment": recipe.script.environment, "model": recipe.model.model_name_or_path,
            "dataset": recipe.script.dataset_name, "steps": run.trainer.state.global_step,
            "train_seconds": round(run.seconds, 2), "rollouts": len(rollouts),
            "judged_correct_rate": round(sum(r["correct"] for r in rollouts) / len(rollouts), 4) if rollouts
            else None, "train_metrics": run.result.metrics}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_refusing(main, *parse_args(sys.argv[1:]))
