"""`omnidecision sft ... --dry-run`: resolve the SFT recipe and its overrides, check the model, the data splits,
the attention implementation and the accelerate config, print the resolved configuration and the command a real
run starts; load no model, start nothing.

    omnidecision sft --accelerate-config configs/accelerate/zero2.yaml --config configs/sft/qwen3-8b-lora.yaml \
        --dataset_name data/harvest/sft --dry-run
"""

from __future__ import annotations

from pathlib import Path

from omnidecision.preflight import DryRunReport, parse_stage, split_files


def sft_split_files(path: str) -> dict[str, list[str]]:
    """Split name -> files of a harvested SFT folder (`dataset_name`), without loading it."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"dataset_name: {path} is not a folder (a harvested sft/ folder)")
    return split_files(path)


def dry_run(stage_args: list[str], *, accelerate_config: str | None = None,
            num_processes: int | None = None) -> DryRunReport:
    """The dry-run report of `omnidecision sft` with `stage_args` (`--config RECIPE` + overrides)."""
    from omnidecision.launch import launch_checks, model_checks
    from omnidecision.sft.config import SFT_STAGE, parse_args

    report, parsed = parse_stage("sft", stage_args, parse_args)
    if parsed is None:
        return report
    script, training, model = parsed

    model_checks(report, model)
    try:
        files = sft_split_files(script.dataset_name) if script.dataset_name else None
    except FileNotFoundError as exc:
        report.add("dataset_name", "error", str(exc))
    else:
        if files is None:
            report.add("dataset_name", "error", "not set (a harvested sft/ folder)")
        elif script.dataset_train_split not in files:
            report.add("dataset_name", "error", f"{script.dataset_name}: no `{script.dataset_train_split}` split "
                                                f"(found {sorted(files)})")
        elif str(training.eval_strategy).lower().endswith("no") or script.dataset_test_split in files:
            report.add("dataset_name", "ok", f"{script.dataset_name}: splits {sorted(files)}")
        else:
            report.add("dataset_name", "error", f"{script.dataset_name}: eval_strategy={training.eval_strategy} but "
                                                f"no `{script.dataset_test_split}` split (found {sorted(files)})")
    launch_checks(report, SFT_STAGE, stage_args, training, accelerate_config=accelerate_config,
                  num_processes=num_processes)
    report.extra = {"dataset": script.dataset_name, "output_dir": training.output_dir}
    return report
