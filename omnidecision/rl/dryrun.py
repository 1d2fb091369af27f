"""`omnidecision grpo ... --dry-run`: resolve the GRPO recipe and its overrides, check what can be checked here,
print the resolved configuration and the command a real run starts; load no model, start nothing.

    omnidecision grpo --config configs/grpo/qwen3-8b-lora-vllm-server.yaml --dataset_name data/harvest/rl --dry-run
"""

from __future__ import annotations

from pathlib import Path

from omnidecision.preflight import DryRunReport, check_folder, check_url, cuda_available, parse_stage


def _accelerate_sharding(config_file: str | None) -> str | None:
    """"ZeRO-3" / "FSDP" when the accelerate config shards the parameters."""
    import yaml

    if not config_file or not Path(config_file).is_file():
        return None
    try:
        cfg = yaml.safe_load(Path(config_file).read_text("utf-8")) or {}
    except yaml.YAMLError:
        return None
    if cfg.get("distributed_type") == "FSDP":
        return "FSDP"
    if cfg.get("distributed_type") == "DEEPSPEED" and (cfg.get("deepspeed_config") or {}).get("zero_stage") == 3:
        return "ZeRO-3"
    return None


def generation_model(model_name_or_path: str) -> str:
    """The model a vLLM generation server loads for this policy: an adapter's base, else the checkpoint itself
    (TRL pushes the trained weights, adapters merged, into it at every step)."""
    from omnidecision.preflight import _adapter_base

    p = Path(model_name_or_path)
    if (p / "adapter_config.json").exists():
        return _adapter_base(p) or model_name_or_path
    return model_name_or_path


def dry_run(stage_args: list[str], *, accelerate_config: str | None = None,
            num_processes: int | None = None) -> DryRunReport:
    """The dry-run report of `omnidecision grpo` with `stage_args` (`--config RECIPE` + overrides)."""
    from omnidecision.launch import launch_checks, model_checks
    from omnidecision.rewards.registry import reward_problems
    from omnidecision.rl.config import GRPO_STAGE, parse_args
    from omnidecision.rl.data import rl_split_files

    report, parsed = parse_stage("grpo", stage_args, parse_args)
    if parsed is None:
        return report
    script, training, model = parsed

    # --- the machine: vLLM needs CUDA, which a login node may not have
    if training.use_vllm:
        report.add("use_vllm", "ok" if cuda_available() else "deferred",
                   f"vllm_mode={training.vllm_mode}" + ("" if cuda_available() else
                                                        ": needs CUDA (TRL's weight sync), checked on the GPU node"))
        if training.vllm_mode == "server":
            url = training.vllm_server_base_url or f"http://{training.vllm_server_host}:{training.vllm_server_port}"
            report.add("vllm server", "ok" if check_url(url, "vllm").status == "ok" else "error",
                       f"{url} (`trl vllm-serve --model {generation_model(model.model_name_or_path)}`; "
                       "not contacted)")

    # --- model, data, rewards
    model_checks(report, model)
    # the data: `dataset_name`, or each of `state_sources` (which replace it: rl/sources.py)
    folders = ([(f"state_sources[{i}]", s["path"]) for i, s in enumerate(script.state_sources)]
               if script.state_sources else [("dataset_name", script.dataset_name)])
    for where, folder in folders:
        try:
            files = rl_split_files(folder)
        except (FileNotFoundError, OSError, ValueError) as exc:
            report.add(where, "error", str(exc))
            continue
        train, test = script.dataset_train_split, script.dataset_test_split
        if train not in files:
            report.add(where, "error", f"{folder}: no `{train}` split (found {sorted(files)})")
        else:
            report.add(where, "ok", f"{folder}: splits {sorted(files)}")
            if test not in files and script.eval_closure_n != 0:
                report.add("dataset_test_split", "warning", f"{folder}: no `{test}` split: 5% of `{train}` is "
                                                            "held out")
    problems = reward_problems(script.reward_funcs)
    if problems:
        report.add("reward_funcs", "error", "; ".join(problems))
    else:
        report.add("reward_funcs", "ok", ", ".join(script.reward_funcs) +
                   (f" (judge inside closure, share {script.judge_weight})" if script.judge_weight else ""))
    if ("judge" in script.reward_funcs or script.judge_weight is not None) and script.judge_path:
        report.checks.append(check_folder(script.judge_path, "judge_path", must_exist=True))
    elif "judge" in script.reward_funcs or script.judge_weight is not None:
        report.checks.append(check_url(script.judge_base_url, "judge_base_url"))
    # --- the launch (the checks every trained stage ends with, and the command a real run starts)
    launch_checks(report, GRPO_STAGE, stage_args, training, accelerate_config=accelerate_config,
                  num_processes=num_processes)
    sharded = _accelerate_sharding(accelerate_config)
    if sharded and script.select_states == "balanced":
        report.add("select_states", "error", f"balanced selection needs the whole model on every rank; {sharded} "
                                             "shards it")
    elif sharded and script.checkpoint_policy == "dev_closure":
        report.add("checkpoint_policy", "error", f"dev_closure decodes every candidate with the whole model; "
                                                 f"{sharded} shards it (checkpoint_policy: final)")
    elif sharded and script.eval_closure_n != 0:
        report.add("eval_closure_n", "warning", f"{sharded} shards the parameters: the in-run closure evaluation "
                                                "will be skipped (python -m omnidecision.rl.evaluate afterwards)")
    report.extra = {"generation_model": generation_model(model.model_name_or_path),
                    "dataset": script.dataset_name, "state_sources": script.state_sources,
                    "output_dir": training.output_dir}
    return report

