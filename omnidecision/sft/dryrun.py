"""`omnidecision sft ... --dry-run`: resolve the SFT recipe and its overrides, check the model, the data splits,
the attention implementation and the accelerate config, print the resolved configuration and the command a real
run starts; load no model, start nothing.

The model, data, dev-state and resume checks are one function, `sft_checks`, that the real run
(`sft/train.py:build_trainer`) calls through `preflight.require` before it loads anything: what the dry run passes,
the run does not refuse.

    omnidecision sft --accelerate-config configs/accelerate/zero2.yaml --config configs/sft/qwen3-8b-lora.yaml \
        --dataset_name data/harvest/sft --dry-run
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnidecision.inputs import has_columns, resolve, split_problem
from omnidecision.launch import (
    DEV_STATE_COLUMNS,
    dev_closure_checks,
    launch_checks,
    model_check_list,
    output_dir_checks,
    resume_checks,
)
from omnidecision.preflight import Check, DryRunReport, check_split_columns, parse_stage, ref_check, split_files
from omnidecision.sft.data import sft_row_check


def sft_split_files(path: str) -> dict[str, list[str]]:
    """Split name -> files of a harvested SFT folder (`dataset_name`), without loading it."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"dataset_name: {path} is not a folder (a harvested sft/ folder)")
    return split_files(path)


def sft_data_check(script: Any, training: Any) -> Check:
    """`dataset_name`: a folder with the train split, the eval split when the recipe evaluates, a `messages` column
    in every split (what `load_sft_splits` and `build_trainer` require), and every row of the splits the run reads
    checked by the run's own rule (`sft/data.py:messages_problem`), streamed without loading the data. A name that
    is not on disk is a hub dataset only when `inputs.resolve` says so (a missing `data/sft` is an error)."""
    name = script.dataset_name
    if not name:
        return Check(what="dataset_name", status="error", detail="not set (a harvested sft/ folder)")
    if not Path(str(name)).expanduser().exists():
        return ref_check(resolve(str(name), "dataset"), "dataset_name")
    try:
        files = sft_split_files(str(name))
    except FileNotFoundError as exc:
        return Check(what="dataset_name", status="error", detail=str(exc).removeprefix("dataset_name: "))
    if script.dataset_train_split not in files:
        return Check(what="dataset_name", status="error",
                     detail=f"{name}: no `{script.dataset_train_split}` split (found {sorted(files)})")
    evaluates = not str(training.eval_strategy).lower().endswith("no")
    if evaluates and script.dataset_test_split not in files:
        return Check(what="dataset_name", status="error", detail=f"{name}: eval_strategy={training.eval_strategy} "
                                                                 f"but no `{script.dataset_test_split}` split "
                                                                 f"(found {sorted(files)})")
    columns = check_split_columns(files, "dataset_name", str(name), ("messages",))
    if columns.status != "ok":
        return columns
    for split in [script.dataset_train_split] + ([script.dataset_test_split] if evaluates else []):
        if (problem := split_problem(files[split], sft_row_check)) is not None:
            return Check(what="dataset_name", status="error", detail=f"split {split!r}: {problem}")
    return columns


def dev_rows_problem(files: list[str]) -> str | None:
    """The first dev state of `files` without a prompt or a ledger (or `no rows`): what the dev_closure scorer
    cannot score."""
    return split_problem(files, has_columns(*DEV_STATE_COLUMNS))


def sft_checks(script: Any, training: Any, model: Any) -> list[Check]:
    """The checks `omnidecision sft` makes before it starts, in its dry run and in its real run: the start model
    (and tokenizer), the attention implementation, the data, the dev states of `checkpoint_policy: dev_closure`
    (`script.dev_data()`: the rl/ folder beside the data, or `checkpoint_dev_data`), where training starts
    (`resume_from_checkpoint`), `output_dir` clear of the inputs (`output_dir_checks`)."""
    return [*model_check_list(model), sft_data_check(script, training),
            *dev_closure_checks(script, script.dev_data, dev_rows_problem), *resume_checks(training),
            *output_dir_checks(training, [model.model_name_or_path, script.dataset_name])]


def dry_run(stage_args: list[str], *, accelerate_config: str | None = None,
            num_processes: int | None = None) -> DryRunReport:
    """The dry-run report of `omnidecision sft` with `stage_args` (`--config RECIPE` + overrides)."""
    from omnidecision.sft.config import SFT_STAGE, parse_args  # heavy: its dataclasses load trl (fast --help)

    report, parsed = parse_stage("sft", stage_args, parse_args)
    if parsed is None:
        return report
    script, training, model = parsed

    report.extend(sft_checks(script, training, model))
    launch_checks(report, SFT_STAGE, stage_args, training, accelerate_config=accelerate_config,
                  num_processes=num_processes)
    report.extra = {"dataset": script.dataset_name, "output_dir": training.output_dir}
    return report
