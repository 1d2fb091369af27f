"""`omnidecision grpo-agent --config RECIPE.yaml [--field value ...]`: GRPO with the agent in the loop
(grounding/grpo.py): a recipe with `environment: ledger` (TRL's environment API) or a reward that runs the agent
(`executed`). Options as `omnidecision grpo`'s: unknown options are TrlParser overrides of the recipe,
`--accelerate-config` / `--num-processes` run it under `accelerate launch`, `--dry-run` checks and starts nothing.

    omnidecision grpo-agent --config configs/grpo/tiny-cpu-exec.yaml --model_name_or_path SFT --dataset_name RL
    omnidecision grpo-agent --config configs/grpo/tiny-cpu-env.yaml --model_name_or_path SFT --dataset_name TASKS
"""

from __future__ import annotations

import typer

from omnidecision.launch import AccelerateConfigOption, DryRunOption, NumProcessesOption, launch_stage, stage_args
from omnidecision.rl.cli import GRPORecipeOption, grpo_summary


def grpo_agent(
    ctx: typer.Context,
    config: GRPORecipeOption,
    accelerate_config: AccelerateConfigOption = None,
    num_processes: NumProcessesOption = None,
    dry_run: DryRunOption = False,
) -> None:
    """GRPO with the agent in the loop (an environment, or the executed reward); writes output_dir/closure_eval.json
    or environment_eval.json."""
    from omnidecision.grounding import grpo  # loads TRL and the agent: inside the command, so --help stays fast

    report = launch_stage(grpo.AGENT_GRPO_STAGE, stage_args(grpo.AGENT_GRPO_STAGE, config, ctx.args), main=grpo.main,
                          check=grpo.dry_run, accelerate_config=accelerate_config, num_processes=num_processes,
                          dry_run=dry_run)
    print(grpo_summary(report, ("steps", "train_seconds", "delta_mean", "rollouts", "judged_correct_rate")))


grpo_agent.passthrough = True  # type: ignore[attr-defined]
