"""`omnidecision sft ... --dry-run`: resolve the SFT recipe and its overrides, check the model, the data splits,
the attention implementation and the accelerate config, print the resolved configuration and the command a real
run starts; load no model, start nothing.

    omnidecision sft --accelerate-config configs/accelerate/zero2.yaml --config configs/sft/qwen3-8b-lora.yaml \
        --dataset_name data/harvest/sft --dry-run
"""

from __future__ import annotations

import sys
from pathlib import Path

from omnidecision.preflight import (
    DryRunReport,
    check_accelerate_config,
    check_attention,
    check_folder,
    check_model,
    check_resume,
    check_tracking,
    parse_stage,
    split_files,
)


def sft_split_files(path: str) -> dict[str, list[str]]:
    """Split name -> files of a harvested SFT folder (`dataset_name`), without loading it."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"dataset_name: {path} is not a folder (a harvested sft/ folder)")
    return split_files(path)


def dry_run(stage_args: list[str], *, accelerate_config: str | None = None,
            num_processes: int | None = None) -> DryRunReport:
    """The dry-run report of `omnidecision sft` with `stage_args` (`--config RECIPE` + overrides)."""
    from omnidecision.launch import accelerate_command, render
    from omnidecision.sft.config import parse_args

    report, parsed = parse_stage("sft", stage_args, parse_args)
    if parsed is None:
        return report
    script, training, model = parsed

    report.checks.append(check_model(model.model_name_or_path, "model_name_or_path"))
    report.checks.append(check_attention(model.attn_implementation))
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
    report.checks.append(check_tracking(training.report_to))
    report.checks.append(check_folder(training.output_dir, "output_dir", must_exist=False))
    report.checks.append(check_resume(training.resume_from_checkpoint, training.output_dir))
    report.checks.append(check_accelerate_config(accelerate_config))
    if accelerate_config or num_processes:
        cmd = accelerate_command("sft", stage_args, config_file=accelerate_config, num_processes=num_processes)
    else:
        cmd = [sys.executable, "-m", "omnidecision.sft.train", *stage_args]
    report.would_run = [render(cmd)]
    report.extra = {"dataset": script.dataset_name, "output_dir": training.output_dir}
    return report
