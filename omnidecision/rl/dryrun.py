"""`omnidecision grpo | judge train | rft-select ... --dry-run`: resolve the recipe and its overrides, check what can
be checked here, print the resolved configuration and the command a real run starts; load no model, start nothing.

The model, data, reward, dev-state, sharding, resume and output checks of each stage are one function
(`grpo_checks`, `judge_checks`, `rft_checks`) that the stage's real run calls through `preflight.require` before it
loads anything, so a dry run that passes means the run does not refuse the same input.

    omnidecision grpo --config configs/grpo/qwen3-8b-lora-vllm-server.yaml --dataset_name data/harvest/rl --dry-run
    omnidecision judge train --config configs/judge/tiny-cpu.yaml --dataset_name data/harvest/rl --dry-run
    omnidecision rft-select --config configs/grpo/tiny-cpu-judge.yaml --out runs/rft --dry-run
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from omnidecision.inputs import BadRow, has_columns, iter_rows, split_problem
from omnidecision.launch import (
    DEV_STATE_COLUMNS,
    dev_closure_checks,
    launch_checks,
    model_check_list,
    output_dir_checks,
    render,
    resume_checks,
)
from omnidecision.outputs import output_problems
from omnidecision.preflight import (
    Check,
    DryRunReport,
    _adapter_base,
    check_folder,
    check_url,
    cuda_available,
    parse_stage,
    sharded_parameters,
    split_files,
)
from omnidecision.rewards.registry import reward_problems
from omnidecision.rl.data import STATE_COLUMNS, rl_folder, rows_check
from omnidecision.rl.judge_labels import judge_label

# the columns GRPO's loader needs (rl/data.py:STATE_COLUMNS), the judge's labels (rl/judge_labels.py:judge_label), and
# those rft-select copies into every row it writes (rl/rft.py:select_rows): checked on every row the run reads
RL_COLUMNS = STATE_COLUMNS
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


def reward_weights_checks(script: Any, training: Any) -> list[Check]:
    """`reward_weights` (TRL's, summing the reward functions): one weight per name in `reward_funcs`, in its order
    (what `rl/train.py:build_rewards` and `rl/rft.py:score_groups` weigh); unset with an environment, whose
    `get_reward` is the only reward (grounding/grpo.py). Nothing to check when unset."""
    weights = training.reward_weights
    if weights is None:
        return []
    if script.environment is not None:
        return [Check(what="reward_weights", status="error", detail=f"environment: {script.environment}: the "
                                                                    "environment's get_reward is the only reward; "
                                                                    f"unset reward_weights (got {list(weights)})")]
    if len(weights) != len(script.reward_funcs):
        return [Check(what="reward_weights", status="error", detail=f"{len(weights)} values for "
                                                                    f"{len(script.reward_funcs)} reward_funcs "
                                                                    f"{script.reward_funcs}: one weight per reward, "
                                                                    "in its order")]
    return [Check(what="reward_weights", status="ok", detail=", ".join(
        f"{name} {weight:g}" for name, weight in zip(script.reward_funcs, weights, strict=True)))]


def recipe_checks(script: Any, training: Any, model: Any, columns: tuple[str, ...] = RL_COLUMNS, *,
                  rewards: Collection[str] = (), environments: Collection[str] = ()) -> list[Check]:
    """What `omnidecision grpo` and `rft-select` check of the GRPO recipe they share, in their dry runs and their
    runs: the start model, the attention implementation, the state folders (`columns` on every row), the rewards and
    their weights, `output_dir` clear of the inputs, and an environment only where the entry brings it."""
    inputs = [model.model_name_or_path, script.dataset_name, *(s["path"] for s in script.state_sources or []),
              getattr(script, "judge_path", None)]
    checks = [*model_check_list(model), *rl_data_checks(script, columns), *reward_checks(script, rewards),
              *reward_weights_checks(script, training), *output_dir_checks(training, inputs)]
    if script.environment is not None and script.environment not in environments:
        checks.append(Check(what="environment", status="error", detail=f"{script.environment}: an environment runs "
                            "the agent in the loop, which decision-level GRPO never loads: `omnidecision grpo-agent` "
                            "trains this recipe"))
    return checks


def dev_rows_problem(files: list[str]) -> str | None:
    """The first dev state of `files` without a prompt or a ledger (or `no rows`): what the dev_closure scorer
    cannot score."""
    return split_problem(files, has_columns(*DEV_STATE_COLUMNS))


def whole_model_checks(script: Any, sharded: str | None) -> list[Check]:
    """What decodes with the whole model on a rank, refused when the launch shards the parameters (`sharded`:
    "ZeRO-3", "FSDP"; None: every rank holds them whole): balanced selection and the dev_closure candidates; the
    in-run held-out evaluation is skipped (a warning). `rl/train.py:_place_policy` refuses these too."""
    if sharded is None or script.environment is not None:  # an environment run decodes nothing of this
        return []
    checks = []
    if script.select_states == "balanced":
        checks.append(Check(what="select_states", status="error", detail=f"select_states=balanced decodes every "
                            f"training state with the whole model, which {sharded} shards (select_states: all)"))
    if script.checkpoint_policy == "dev_closure":
        checks.append(Check(what="checkpoint_policy", status="error", detail="checkpoint_policy=dev_closure decodes "
                            f"every candidate with the whole model, which {sharded} shards (checkpoint_policy: "
                            "final)"))
    if script.eval_closure_n != 0:
        checks.append(Check(what="eval_closure_n", status="warning", detail=f"{sharded} shards the parameters: the "
                            "in-run closure evaluation will be skipped (python -m omnidecision.rl.evaluate "
                            "afterwards)"))
    return checks


def weight_average_checks(sharded: str | None) -> list[Check]:
    """`weight_average: true` under a launch that shards the parameters: each rank would average only its shard.
    `rl/averaging.py:check_supported` refuses it in these words too."""
    if sharded is None:
        return []
    return [Check(what="weight_average", status="error", detail=f"weight_average=true averages whole parameters on "
                                                                f"every rank, which {sharded} shards "
                                                                "(weight_average: false)")]


def grpo_checks(script: Any, training: Any, model: Any, columns: tuple[str, ...] = RL_COLUMNS, *,
                rewards: Collection[str] = (), environments: Collection[str] = (),
                sharded: str | None = None) -> list[Check]:
    """The checks `omnidecision grpo` (and `grpo-agent`) makes before it starts, in its dry run and in its real run
    (`rl/train.py:prepare_run`): the recipe's (`recipe_checks`), then what training reads besides: the dev states of
    `checkpoint_policy: dev_closure` (`script.dev_data()`), where training starts (`resume_from_checkpoint`), and
    what needs whole parameters when the launch shards them (`sharded`: the dry run passes what its accelerate
    config will shard, the run what its launch shards, `preflight.sharded_parameters`). `rewards` and
    `environments`: the reward and environment names the calling entry brings itself (`omnidecision grpo-agent`'s,
    which run the agent: decision-level GRPO brings none)."""
    checks = [*recipe_checks(script, training, model, columns, rewards=rewards, environments=environments),
              *resume_checks(training)]
    if script.environment is None:  # an environment run has no checkpoint policy and no averaging (rl/train.py)
        # by default the dev states are the training states' folder: a folder already refused is named once
        states_refused = any(c.status == "error" and c.what.startswith(("dataset_name", "state_sources"))
                             for c in checks)
        if script.checkpoint_dev_data or not states_refused:
            checks += dev_closure_checks(script, script.dev_data, dev_rows_problem)
        checks += whole_model_checks(script, sharded)
        checks += weight_average_checks(sharded) if script.weight_average else []
    return checks


def judge_checks(script: Any, training: Any, model: Any) -> list[Check]:
    """The checks `judge train` makes before it starts, in its dry run and its real run (`rl/judge_train.py:main`):
    the start model, where training starts (`resume_from_checkpoint`, which the run resumes from as the other
    stages do) and the rows' folder with its train split and the columns the labels read."""
    checks = [*model_check_list(model), *resume_checks(training),
              *output_dir_checks(training, [model.model_name_or_path, script.dataset_name])]
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
    """The checks `rft-select` makes before it starts, in its dry run and its real run (`rl/rft.py:main`): the GRPO
    recipe's (`recipe_checks`: the states, the model, the reward and weights it shares), the SFT folder `--val`
    copies its validation split from, and `--out` (`outputs.output_problems`: never an input, a folder holding one
    or inside one; never a non-empty folder the project did not write unless `replace`)."""
    checks = recipe_checks(script, training, model, RFT_COLUMNS)  # no training: no dev states, resume, sharding
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

    # --- model, data, rewards, dev states, resume, sharding (the checks the real run makes: grpo_checks); the
    # parameters are sharded where the accelerate config will shard them (the run reads its launch's)
    sharded = _accelerate_sharding(accelerate_config) or sharded_parameters(training)
    report.extend(grpo_checks(script, training, model, rewards=rewards, environments=environments, sharded=sharded))
    # --- the launch (the checks every trained stage ends with, and the command a real run starts)
    launch_checks(report, stage, stage_args, training, accelerate_config=accelerate_config,
                  num_processes=num_processes)
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
