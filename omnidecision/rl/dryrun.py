"""`omnidecision grpo | judge train | rft-select ... --dry-run`: resolve the recipe and its overrides, check what can
be checked here, print the resolved configuration and the command a real run starts; load no model, start nothing.

The model, data and output checks of each stage are one function (`grpo_checks`, `judge_checks`, `rft_checks`)
that the stage's real run calls through `preflight.require` before it loads anything, so a dry run that passes
means the run does not refuse the same input.

    omnidecision grpo --config configs/grpo/qwen3-8b-lora-vllm-server.yaml --dataset_name data/harvest/rl --dry-run
    omnidecision judge train --config configs/judge/tiny-cpu.yaml --dataset_name data/harvest/rl --dry-run
    omnidecision rft-select --config configs/grpo/tiny-cpu-judge.yaml --out runs/rft --dry-run
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from omnidecision.inputs import BadRow, has_columns, iter_rows, split_problem
from omnidecision.launch import launch_checks, model_check_list, output_dir_checks, render
from omnidecision.outputs import output_problems
from omnidecision.preflight import (
    Check,
    DryRunReport,
    _adapter_base,
    check_folder,
    check_split_columns,
    check_url,
    cuda_available,
    parse_stage,
    split_files,
)
from omnidecision.rewards.registry import reward_problems
from omnidecision.rl.data import rl_folder
from omnidecision.rl.judge_labels import judge_label

# the columns GRPO's loader (rl/data.py:load_rl_splits) and the judge's labels (rl/judge_labels.py:judge_label) need,
# and those rft-select copies into every row it writes (rl/rft.py:select_rows): checked on every row the run reads
RL_COLUMNS = ("prompt", "ledger")
JUDGE_COLUMNS = ("prompt", "decision", "advanced")
RFT_COLUMNS = (*RL_COLUMNS, "task_id", "run_id", "step")


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
    p = Path(model_name_or_path)
    if (p / "adapter_config.json").exists():
        return _adapter_base(p) or model_name_or_path
    return model_name_or_path


def rl_data_checks(script: Any, columns: tuple[str, ...] = RL_COLUMNS) -> list[Check]:
    """The RL state folders of a GRPO recipe (`dataset_name`, or each of `state_sources`): the train split and the
    columns the stage needs, on every row of every split it reads (`inputs.split_problem`); a missing held-out split
    is a warning (carved out of train)."""
    if script.environment is not None:  # a task set, read by the task loaders
        return [check_folder(script.dataset_name, "dataset_name", must_exist=True)]
    folders = ([(f"state_sources[{i}]", s["path"]) for i, s in enumerate(script.state_sources)]
               if script.state_sources else [("dataset_name", script.dataset_name)])
    checks: list[Check] = []
    for where, folder in folders:
        if not folder:
            checks.append(Check(what=where, status="error", detail="not set (a harvest folder holding rl/)"))
            continue
        try:
            files = split_files(rl_folder(folder))
        except (FileNotFoundError, OSError, ValueError) as exc:
            checks.append(Check(what=where, status="error", detail=str(exc).removeprefix("dataset_name: ")))
            continue
        train, test = script.dataset_train_split, script.dataset_test_split
        if train not in files:
            checks.append(Check(what=where, status="error", detail=f"{folder}: no `{train}` split "
                                                                   f"(found {sorted(files)})"))
            continue
        checks.append(rows_check(files, where, str(folder), columns, [s for s in (train, test) if s in files]))
        if test not in files and script.eval_closure_n != 0:
            checks.append(Check(what="dataset_test_split", status="warning",
                                detail=f"{folder}: no `{test}` split: 5% of `{train}` is held out"))
    return checks


def rows_check(files: dict[str, list[str]], where: str, folder: str, columns: tuple[str, ...],
               splits: list[str], on_every_row: tuple[str, ...] | None = None) -> Check:
    """`columns` in every split (`check_split_columns`), then `on_every_row` (default: `columns`) on every row of
    `splits`: the first row without one, a row that cannot be read, or a split with no rows names its file and
    line."""
    check = check_split_columns(files, where, folder, columns, splits)
    if check.status != "ok":
        return check
    for split in splits:
        needed = has_columns(*(columns if on_every_row is None else on_every_row))
        if (problem := split_problem(files[split], needed)) is not None:
            return Check(what=where, status="error", detail=f"split {split!r}: {problem}")
    return check


def reward_checks(script: Any, given: Collection[str] = ()) -> list[Check]:
    """The recipe's reward functions are registered (or among the names `given` by the caller's entry); the judge
    they name is a folder or an endpoint URL."""
    if script.environment is not None:  # the environment's own reward
        return []
    problems = reward_problems([name for name in script.reward_funcs if name not in given])
    checks = [Check(what="reward_funcs", status="error", detail="; ".join(problems)) if problems else
              Check(what="reward_funcs", status="ok", detail=", ".join(script.reward_funcs) + (
                  f" (judge inside closure, share {script.judge_weight})" if script.judge_weight else ""))]
    if ("judge" in script.reward_funcs or script.judge_weight is not None) and script.judge_path:
        checks.append(check_folder(script.judge_path, "judge_path", must_exist=True))
    elif "judge" in script.reward_funcs or script.judge_weight is not None:
        checks.append(check_url(script.judge_base_url, "judge_base_url"))
    return checks


def grpo_checks(script: Any, training: Any, model: Any, columns: tuple[str, ...] = RL_COLUMNS, *,
                rewards: Collection[str] = (), environments: Collection[str] = ()) -> list[Check]:
    """The checks `omnidecision grpo` makes before it starts, in its dry run and in its real run
    (`rl/train.py:main`): the start model, the attention implementation, the state folders (`columns` on every row),
    the rewards. `rewards` and `environments`: the reward and environment names the calling entry brings itself
    (`omnidecision grpo-agent`'s, which run the agent: decision-level GRPO brings none)."""
    inputs = [model.model_name_or_path, script.dataset_name, *(s["path"] for s in script.state_sources or []),
              getattr(script, "judge_path", None)]
    checks = [*model_check_list(model), *rl_data_checks(script, columns), *reward_checks(script, rewards),
              *output_dir_checks(training, inputs)]
    if script.environment is not None and script.environment not in environments:
        checks.append(Check(what="environment", status="error", detail=f"{script.environment}: an environment runs "
                            "the agent in the loop, which decision-level GRPO never loads: `omnidecision grpo-agent` "
                            "trains this recipe"))
    return checks


def judge_checks(script: Any, training: Any, model: Any) -> list[Check]:
    """The checks `judge train` makes before it starts, in its dry run and its real run (`rl/judge_train.py:main`):
    the start model and the rows' folder with its train split and the columns the labels read."""
    checks = [*model_check_list(model), *output_dir_checks(training, [model.model_name_or_path, script.dataset_name])]
    folder = str(script.dataset_name)
    try:
        files = split_files(folder) if Path(folder).is_dir() else None
    except (OSError, ValueError) as exc:
        return [*checks, Check(what="dataset_name", status="error", detail=f"{folder}: {exc}")]
    if files is None:
        detail = "no such folder" if not Path(folder).exists() else "not a folder"
        return [*checks, Check(what="dataset_name", status="error", detail=f"{folder}: {detail} (a harvest's rl/ "
                                                                           "folder)")]
    if script.dataset_train_split not in files:
        return [*checks, Check(what="dataset_name", status="error", detail=f"{folder}: no "
                                                                           f"`{script.dataset_train_split}` split "
                                                                           f"(found {sorted(files)})")]
    split = script.dataset_train_split
    # a row without a decision or an outcome is unlabelled (judge_label), not an error: only its prompt is needed
    rows = rows_check(files, "dataset_name", folder, JUDGE_COLUMNS, [split], on_every_row=("prompt",))
    return [*checks, rows] if rows.status == "error" else [*checks, rows, label_check(files[split], folder, split)]


def label_check(files: list[str], folder: str, split: str) -> Check:
    """The judge's labels over every row of the split it trains on (`judge_labels.judge_label`, what the run pairs):
    both classes must be there, else the run would stop at `judge_pairs` after loading everything."""
    counts: dict[bool | None, int] = {True: 0, False: 0, None: 0}
    with_correct = 0
    for name in files:
        rows = iter_rows(name)
        if rows is None:  # a format only the loader reads: judge_pairs is the judge
            return Check(what="labels", status="ok", detail=f"{folder} split {split!r}: counted by the run")
        try:
            for _, row in rows:
                if isinstance(row, dict):
                    counts[judge_label(row)] += 1
                    with_correct += row.get("correct") is not None
        except BadRow as exc:
            return Check(what="dataset_name", status="error", detail=str(exc))
    detail = f"{folder} split {split!r}: {counts[True]} positive, {counts[False]} negative decisions"
    if counts[True] and counts[False]:
        return Check(what="labels", status="ok", detail=detail)
    why = ("; no row has a `correct` value (positives are decisions that moved the ledger in judge-correct runs)"
           if not with_correct else "")
    return Check(what="dataset_name", status="error", detail=f"{detail}: the judge needs both{why}")


def rft_inputs(script: Any, model: Any, val: Path | None) -> list[str | Path | None]:
    """What rft-select reads (its `--out` must stay clear of every one): the states, the model, the judge, `--val`."""
    return [*(s["path"] for s in script.state_sources or []), script.dataset_name, model.model_name_or_path,
            getattr(script, "judge_path", None), val]


def rft_checks(script: Any, training: Any, model: Any, *, out: Path, val: Path | None = None,
               replace: bool = False) -> list[Check]:
    """The checks `rft-select` makes before it starts, in its dry run and its real run (`rl/rft.py:main`): GRPO's
    (the states, the model, the reward it shares), the SFT folder `--val` copies its validation split from, and
    `--out` (`outputs.output_problems`: never an input, a folder holding one or inside one; never a non-empty
    folder the project did not write unless `replace`)."""
    checks = grpo_checks(script, training, model, RFT_COLUMNS)
    if val is not None:
        try:
            files = split_files(val)
        except (FileNotFoundError, OSError, ValueError) as exc:
            checks.append(Check(what="val", status="error", detail=str(exc)))
        else:
            have = [f for f in files.get("validation", []) if Path(f).suffix == ".parquet"]
            # a small harvest can have no validation rows (no file): the rows are then written without one
            checks.append(Check(what="val", status="ok", detail=f"{val}: {len(have)} validation file(s)") if have
                          else Check(what="val", status="warning", detail=f"{val}: no validation-*.parquet file "
                                                                          f"(found {sorted(files)}): none copied"))
    problems = output_problems(out, rft_inputs(script, model, val), replace=replace)
    checks.extend(Check(what="out", status="error", detail=p) for p in problems)
    if not problems:
        checks.append(check_folder(str(out), "out", must_exist=False))
    return checks


def dry_run(stage_args: list[str], *, accelerate_config: str | None = None, num_processes: int | None = None,
            stage: Any = None, rewards: Collection[str] = (), environments: Collection[str] = ()) -> DryRunReport:
    """The dry-run report of `omnidecision grpo` with `stage_args` (`--config RECIPE` + overrides); `stage`,
    `rewards`, `environments`: another GRPO entry's (`omnidecision grpo-agent`'s), default decision-level GRPO's."""
    from omnidecision.rl.config import GRPO_STAGE  # heavy: the GRPO recipe's dataclasses load trl; keeps --help fast

    stage = stage or GRPO_STAGE
    report, parsed = parse_stage(stage.name, stage_args, stage.parse)
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

    # --- model, data, rewards (the checks the real run makes: grpo_checks)
    report.extend(grpo_checks(script, training, model, rewards=rewards, environments=environments))
    # --- the launch (the checks every trained stage ends with, and the command a real run starts)
    launch_checks(report, stage, stage_args, training, accelerate_config=accelerate_config,
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
    # what scripts/slurm/grpo.slurm starts on its last node: TRL's generation server only in server mode
    report.extra = {"generation_model": generation_model(model.model_name_or_path),
                    "generation_server": bool(training.use_vllm and training.vllm_mode == "server"),
                    "dataset": script.dataset_name, "state_sources": script.state_sources,
                    "output_dir": training.output_dir}
    return report


def rft_dry_run(stage_args: list[str], *, accelerate_config: str | None = None, num_processes: int | None = None,
                out: Path, val: Path | None = None, max_states: int | None = None,
                replace: bool = False) -> DryRunReport:
    """The dry-run report of `rft-select` (`--config GRPO_RECIPE` + overrides, `--out`, `--val`)."""
    from omnidecision.rl.config import parse_args  # heavy: the GRPO recipe's dataclasses load trl; keeps --help fast

    report, parsed = parse_stage("rft-select", stage_args, parse_args)
    if parsed is None:
        return report
    script, training, model = parsed
    report.extend(rft_checks(script, training, model, out=out, val=val, replace=replace))
    report.would_run = [render(["omnidecision", "rft-select", *stage_args, "--out", str(out)]
                               + (["--val", str(val)] if val is not None else [])
                               + (["--max-states", str(max_states)] if max_states is not None else [])
                               + (["--replace"] if replace else []))]
    report.extra = {"dataset": script.dataset_name, "state_sources": script.state_sources, "out": str(out),
                    "samples_per_state": training.num_generations, "matched_grpo_steps": training.max_steps}
    return report
