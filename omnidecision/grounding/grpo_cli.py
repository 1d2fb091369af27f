"""`omnidecision grpo-agent --config RECIPE.yaml [--field value ...]`: GRPO with the agent in the loop
(grounding/grpo.py): a recipe with `environment: ledger` (TRL's environment API) or a reward that runs the agent
(`executed`). Options as `omnidecision grpo`'s: unknown options are TrlParser overrides of the recipe,
`--accelerate-config` / `--num-processes` run it under `accelerate launch`, `--dry-run` checks and starts nothing.

    omnidecision grpo-agent --config configs/grpo/tiny-cpu-exec.yaml --model_name_or_path SFT --dataset_name RL
    omnidecision grpo-agent --config configs/grpo/tiny-cpu-env.yaml --model_name_or_path SFT --dataset_name TASKS
"""

from __future__ import annotations

from omnidecision.rl.cli import GRPOEntry, grpo_command


def _agent_grpo() -> GRPOEntry:
    from omnidecision.grounding import grpo  # loads TRL and the agent: inside the command, so --help stays fast

    return GRPOEntry(grpo.AGENT_GRPO_STAGE, grpo.main, grpo.dry_run)


grpo_agent = grpo_command(_agent_grpo, ("steps", "train_seconds", "delta_mean", "rollouts", "judged_correct_rate"),
                          help="GRPO with the agent in the loop (an environment, or the executed reward); writes "
                               "output_dir/closure_eval.json or environment_eval.json.")
