"""GRPO recipe dataclasses (TRL's GRPOConfig / ScriptArguments / ModelConfig + the planner's fields), parsed by
`TrlParser` from a YAML recipe with command-line overrides.

    omnidecision grpo --config configs/grpo/tiny-cpu.yaml --learning_rate 5e-4 --max_steps 20
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import trl

from omnidecision.checkpoints import RESUME_DEFAULT, RESUME_HELP, SAVE_ON_SIGTERM_HELP, CheckpointPolicyArguments
from omnidecision.launch import RFT_ALIASES, Stage
from omnidecision.preflight import check_precision, hide_hub_token
from omnidecision.protocol.secrets import check_env_name
from omnidecision.rl.evaluate import ClosureDecoding
from omnidecision.rl.sources import parse_state_sources
from omnidecision.rl.states import decoding_options


@dataclass
class GRPOScriptArguments(trl.ScriptArguments, CheckpointPolicyArguments):
    """Data, rewards, the held-out closure evaluation and the checkpoint policy of a GRPO run (also what
    `rft-select`, the rft control, reads: the same recipe through the same dataclasses)."""

    dataset_name: str | None = field(
        default=None,
        metadata={"help": "The RL states: a harvest folder holding rl/ (train/validation splits), or that rl/ folder "
                          "itself. Read with datasets.load_dataset (JSONL/parquet files) or load_from_disk. With "
                          "`environment: ledger`: the training tasks (a task file or folder)."},
    )
    state_sources: list[dict] | str | None = field(
        default=None,
        metadata={"help": "Train on several sources of RL states mixed by weight, instead of `dataset_name`: a list "
                          "of {path, weight, name} (YAML, or its JSON text on the command line), e.g. the planner's "
                          "own states (`harvest --label none`) and the teacher's. `weight` is the source's share of "
                          "the training states; the held-out split is every source's (omnidecision.rl.sources)."},
    )
    dataset_test_split: str = field(default="validation", metadata={"help": "Held-out split of the RL states."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep at most this many training rows."})
    select_states: Literal["all", "balanced"] = field(
        default="all",
        metadata={"help": "all: train on every state. balanced: decode the start planner greedily on every training "
                          "state first; keep the states it gets wrong plus `select_right_ratio` times as many it "
                          "gets right (omnidecision.rl.select; costs one greedy pass over the training states)."},
    )
    select_right_ratio: float = field(
        default=1.0, metadata={"help": "balanced: right states kept per wrong state (seeded draw)."})
    reward_funcs: list[str] = field(
        default_factory=lambda: ["closure"],
        metadata={"help": "Reward names from the reward registry, omnidecision.rewards.REWARDS (closure, judge, "
                          "llm_judge, learned_judge and each closure check: format, finish, target, tool, budget, "
                          "conflict, query, no_repeat, modality), or an import path pkg.module.function (as TRL's "
                          "grpo.py). Weights: GRPOConfig.reward_weights (same order)."},
    )
    reward_kwargs: dict | str | None = field(
        default=None,
        metadata={"help": "Keyword arguments of reward factories by reward name (mapping or JSON string), e.g. "
                          "{executed: {policy: teacher}} (`omnidecision grpo-agent`'s executed reward): a name given "
                          "by import path is then called as a factory with them. `${dataset_name}` and "
                          "`${output_dir}` in a string value become the run's."},
    )
    closure_weights: dict | str | None = field(
        default=None,
        metadata={"help": "Weights of the closure checks inside the `closure` reward (mapping or JSON string); "
                          "default omnidecision.rewards.DEFAULT_WEIGHTS."},
    )
    closure_gate_on_tool: bool = field(
        default=True,
        metadata={"help": "Call credit (target, query, no_repeat, modality) only for a call whose tool fits its need "
                          "(omnidecision.rewards.closure.CALL_CREDIT); the held-out evaluation scores the same way."},
    )
    judge_path: str | None = field(default=None, metadata={
        "help": "A learned reward judge folder (`omnidecision judge train`), scored in-process; instead of "
                "judge_base_url/judge_model (the LLM judge behind an endpoint)."})
    judge_device: str = field(default="cpu", metadata={"help": "Device of the learned judge (cpu, cuda, ...)."})
    judge_shuffle: bool = field(default=False, metadata={
        "help": "The judge's placebo: its scores permuted among the K completions of each state, so the group "
                "advantage sees the judge's spread but none of its information (the grpo_shuffled arm)."})
    judge_base_url: str | None = field(default=None, metadata={"help": "OpenAI-compatible endpoint of the judge."})
    judge_model: str | None = field(default=None, metadata={"help": "Served model name of the reward judge."})
    judge_api_key_env: str = field(default="OPENAI_API_KEY", metadata={
        "help": "Environment variable holding the judge endpoint's API key (unset: \"EMPTY\", what vLLM accepts)."})
    judge_weight: float | None = field(
        default=None,
        metadata={"help": "The reward judge as a component of the `closure` reward: closure checks count 1, the judge "
                          "this much (reward = (closure + w * judge) / (1 + w)). A failed judge call is left out of "
                          "that sample's mean, weight and all. Needs judge_base_url and judge_model."},
    )
    judge_concurrency: int = field(default=16, metadata={
        "help": "Concurrent judge requests of the whole run: each of the N training processes sends at most "
                "ceil(judge_concurrency / N) (one judge server serves every rank)."})
    judge_timeout_s: float = field(default=30.0, metadata={"help": "Per-request judge timeout (seconds)."})
    judge_cache: str | None = field(default=None, metadata={
        "help": "JSONL file caching judge verdicts (default: judge_cache.jsonl in output_dir, so each run keeps its "
                "own and a restart reads it back; `none`: no cache). With several processes each appends to its own "
                "`<stem>.rank<R>.jsonl` next to it and reads them all at start (no two writers on one file)."})
    weight_average: bool = field(
        default=False,
        metadata={"help": "Replace the final weights by the running mean of the trainable weights over the tail of "
                          "the run (omnidecision.rl.averaging); closure_eval.json reports the last weights too."},
    )
    weight_average_start: float = field(
        default=0.5, metadata={"help": "Averaging starts at this fraction of max_steps (0.5: the last half)."})
    weight_average_every: int = field(default=1, metadata={"help": "Take a snapshot every N optimiser steps."})
    eval_closure_n: int = field(
        default=64, metadata={"help": "Validation rows for the held-out closure evaluation (0 disables it, -1 "
                                      "takes every row)."})
    eval_closure_mode: Literal["greedy", "sampled"] = field(
        default="greedy",
        metadata={"help": "greedy: one deterministic decision per state; sampled: `eval_closure_samples` decisions "
                          "per state at the training temperature (the spread then includes sampling noise)."},
    )
    eval_closure_samples: int = field(default=4, metadata={"help": "Decisions per state in sampled mode."})
    eval_batch_size: int = field(default=16, metadata={"help": "Prompts per generate() call in the evaluation."})
    environment: Literal["ledger"] | None = field(
        default=None,
        metadata={"help": "ledger: trajectory-level GRPO through TRL's environment_factory, trained by "
                          "`omnidecision grpo-agent` (GRPO with the agent in the loop): `dataset_name` is then a task "
                          "file or folder, every rollout runs the agent on one task and is rewarded by its judged "
                          "answer. Unset: decision-level GRPO on ledger states."},
    )
    task_format: str = field(default="auto", metadata={
        "help": "environment: the task format of `dataset_name` (a registered task format; auto detects)."})
    environment_closure_weight: float = field(default=0.0, metadata={
        "help": "environment: reward = (judged + w * closure) / (1 + w), closure = share of the blocking needs "
                "filled at the run's end (0: the judged answer only)."})
    environment_digest_max_chars: int = field(default=1000, metadata={
        "help": "environment: the agent's digest budget (the demo's collection and evaluation use 1000)."})
    environment_step_budget: int = field(default=15, metadata={
        "help": "environment: the agent's planner step budget per run."})

    def __post_init__(self) -> None:
        # a key pasted where its variable's name goes: refused without echoing it, as collect recipes refuse it
        check_env_name(self.judge_api_key_env, "judge_api_key_env")
        # checked here, kept as plain mappings (the resolved configuration prints and saves as JSON)
        sources = parse_state_sources(self.state_sources)
        self.state_sources = None if sources is None else [s.model_dump() for s in sources]
        if self.dataset_name is None and self.state_sources is None:
            raise ValueError("GRPO needs RL states: set `dataset_name` (a harvest folder holding rl/, or the rl/ "
                             "folder itself) or `state_sources`")
        if isinstance(self.closure_weights, str):
            try:
                self.closure_weights = json.loads(self.closure_weights)
            except json.JSONDecodeError as exc:
                raise ValueError(f"closure_weights: not a JSON mapping: {exc}") from exc
        if isinstance(self.reward_kwargs, str):
            try:
                self.reward_kwargs = json.loads(self.reward_kwargs)
            except json.JSONDecodeError as exc:
                raise ValueError(f"reward_kwargs: not a JSON mapping: {exc}") from exc
        if self.reward_kwargs is not None:
            if not isinstance(self.reward_kwargs, dict) or not all(isinstance(v, dict)
                                                                   for v in self.reward_kwargs.values()):
                raise ValueError("reward_kwargs must map reward names to mappings of keyword arguments")
            stray = sorted(set(self.reward_kwargs) - set(self.reward_funcs))
            if stray:
                raise ValueError(f"reward_kwargs names {stray}, which are not in reward_funcs {self.reward_funcs}")
        if self.closure_weights is not None and not isinstance(self.closure_weights, dict):
            raise ValueError(f"closure_weights must be a mapping, got {type(self.closure_weights).__name__}")
        if not self.reward_funcs:
            raise ValueError("reward_funcs is empty: name at least one reward (e.g. closure)")
        if "judge" in self.reward_funcs and len(self.reward_funcs) > 1:
            # TRL sums the reward functions with nansum: a separate judge that fails (None -> NaN) would count as 0
            # for that sample, not be left out. Inside the closure rubric its weight leaves with it.
            raise ValueError(f"reward_funcs {self.reward_funcs}: `judge` next to other rewards would score a failed "
                             "judge call as 0 (TRL sums reward functions with nansum). Put the judge inside the "
                             "closure reward instead: reward_funcs: [closure] with judge_weight: W")
        if self.judge_weight is not None:
            if "closure" not in self.reward_funcs:
                raise ValueError("judge_weight adds the judge to the `closure` reward: add closure to reward_funcs")
            if not (self.judge_weight > 0 and math.isfinite(self.judge_weight)):
                raise ValueError(f"judge_weight must be a finite number > 0, got {self.judge_weight}")
        if ("judge" in self.reward_funcs or self.judge_weight is not None) and not (
                self.judge_path or (self.judge_base_url and self.judge_model)):
            raise ValueError("the reward judge (reward `judge` or judge_weight) needs judge_path (a learned judge) "
                             "or judge_base_url and judge_model (an LLM judge)")
        if self.judge_path and self.judge_base_url:
            raise ValueError("judge_path and judge_base_url both set: choose the learned judge or the LLM judge")
        if self.judge_concurrency < 1:
            raise ValueError(f"judge_concurrency must be >= 1, got {self.judge_concurrency}")
        if not 0.0 <= self.weight_average_start < 1.0 or self.weight_average_every < 1:
            raise ValueError("weight_average_start must be in [0, 1) and weight_average_every >= 1, got "
                             f"{self.weight_average_start}, {self.weight_average_every}")
        if self.select_right_ratio < 0:
            raise ValueError(f"select_right_ratio must be >= 0, got {self.select_right_ratio}")
        if self.eval_closure_n < -1 or self.eval_closure_samples < 1 or self.eval_batch_size < 1:
            raise ValueError("eval_closure_n >= -1, eval_closure_samples >= 1 and eval_batch_size >= 1 are required")
        if self.environment is not None:
            if self.select_states != "all" or self.weight_average or self.judge_weight is not None:
                raise ValueError("environment: ledger trains on tasks, not ledger states: select_states must be all, "
                                 "weight_average false and judge_weight unset")
            if not (self.environment_closure_weight >= 0 and math.isfinite(self.environment_closure_weight)):
                raise ValueError(f"environment_closure_weight must be >= 0, got {self.environment_closure_weight}")
            if self.environment_digest_max_chars < 200 or self.environment_step_budget < 1:
                raise ValueError("environment_digest_max_chars >= 200 and environment_step_budget >= 1 are required")
        self.check_policy()

    def dev_data(self) -> str:
        """The RL states whose dev split scores the `dev_closure` candidates (default: the training states' folder,
        whose validation split is the dev suite's states; with `state_sources`, the first source's folder)."""
        if self.checkpoint_dev_data:
            return self.checkpoint_dev_data
        if self.state_sources:
            return str(parse_state_sources(self.state_sources)[0].path)
        return str(self.dataset_name)

    def judge_cache_path(self, output_dir: str | None = None) -> str | None:
        """The judge cache file: `judge_cache` as given, None for `none`, else judge_cache.jsonl in `output_dir`."""
        if self.judge_cache is not None:
            return None if self.judge_cache.lower() in ("none", "") else self.judge_cache
        return str(Path(output_dir) / "judge_cache.jsonl") if output_dir else None

    def judge_options(self, process_index: int = 0, num_processes: int = 1,
                      output_dir: str | None = None) -> dict[str, Any]:
        """Judge options of one training process: the learned judge's folder, or the LLM judge with its share of the
        run's concurrency and its own cache file."""
        if self.judge_path:
            return {"path": self.judge_path, "device": self.judge_device}
        return {"base_url": self.judge_base_url, "model": self.judge_model, "api_key_env": self.judge_api_key_env,
                "concurrency": max(1, math.ceil(self.judge_concurrency / max(1, num_processes))),
                "timeout_s": self.judge_timeout_s, "cache_path": self.judge_cache_path(output_dir),
                "cache_rank": process_index if num_processes > 1 else None}

    def reward_params(self, process_index: int = 0, num_processes: int = 1,
                      output_dir: str | None = None, seed: int = 0) -> dict[str, dict[str, Any]]:
        """Keyword arguments per reward name for `omnidecision.rewards.get_reward_funcs` (`output_dir`: the run's,
        where the judge cache goes by default; `seed`: the run's, which seeds the placebo's shuffle)."""
        params: dict[str, dict[str, Any]] = {}
        closure: dict[str, Any] = {}
        if self.closure_weights or not self.closure_gate_on_tool:
            closure.update(weights=self.closure_weights, gate_on_tool=self.closure_gate_on_tool)
        # the placebo switch goes with the judge's options to the reward factory (rewards.closure.get_judge_reward)
        # seeded by the run's seed (each replicate draws its own permutations) and the process (each rank its own)
        placebo = {"shuffle": True, "shuffle_seed": placebo_seed(seed, process_index)} if self.judge_shuffle else {}
        if self.judge_weight is not None:
            closure.update(judge={**self.judge_options(process_index, num_processes, output_dir), **placebo},
                           judge_share=self.judge_weight)
        if "closure" in self.reward_funcs and closure:
            params["closure"] = closure
        if "judge" in self.reward_funcs:
            params["judge"] = {**self.judge_options(process_index, num_processes, output_dir), **placebo}
        run_values = {"${dataset_name}": str(self.dataset_name or ""), "${output_dir}": str(output_dir or "")}
        for name, kwargs in (self.reward_kwargs or {}).items():
            params[name] = {**params.get(name, {}), **{k: _substitute(v, run_values) for k, v in kwargs.items()}}
        return params


def _substitute(value: Any, values: dict[str, str]) -> Any:
    """`${name}` placeholders of a reward factory's string arguments (lists too) replaced by the run's values."""
    if isinstance(value, str):
        for key, v in values.items():
            value = value.replace(key, v)
        return value
    if isinstance(value, list):
        return [_substitute(v, values) for v in value]
    return value


def placebo_seed(seed: int, process_index: int = 0) -> int:
    """The shuffle seed of the placebo judge: one per (run seed, process), distinct for every pair that can occur.

    >>> placebo_seed(0), placebo_seed(1), placebo_seed(0, 1)
    (0, 100003, 1)
    """
    return seed * 100_003 + process_index


@dataclass
class PlannerModelConfig(trl.ModelConfig):
    """The starting planner: an SFT checkpoint (full) or an SFT LoRA adapter folder (continued, trainable)."""

    tokenizer_name_or_path: str | None = field(
        default=None, metadata={"help": "Tokenizer folder when the model folder has none (default: the model's)."})

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.model_name_or_path:
            raise ValueError("model_name_or_path is required: the SFT checkpoint or adapter to start GRPO from")


@dataclass
class PlannerGRPOConfig(trl.GRPOConfig):
    """TRL's GRPOConfig with the checks a planner run needs before any model is loaded."""

    resume_from_checkpoint: str | None = field(default=RESUME_DEFAULT, metadata={"help": RESUME_HELP})
    save_on_sigterm: bool = field(default=True, metadata={"help": SAVE_ON_SIGTERM_HELP})

    def __post_init__(self) -> None:
        check_precision(self, "GRPO recipe")
        hide_hub_token(self)  # never pickled into training_args.bin, never in the argv wandb records
        if self.num_generations is None or self.num_generations < 2:
            raise ValueError(f"num_generations must be >= 2 (GRPO compares a group), got {self.num_generations}")
        if self.max_completion_length is not None and self.max_completion_length < 8:
            raise ValueError(f"max_completion_length={self.max_completion_length} cannot hold one JSON action")
        if self.generation_batch_size is not None and self.generation_batch_size % self.num_generations:
            raise ValueError(f"generation_batch_size ({self.generation_batch_size}) must be a multiple of "
                             f"num_generations ({self.num_generations})")
        super().__post_init__()
        if self.generation_batch_size % self.num_generations:
            raise ValueError(f"the effective generation batch ({self.generation_batch_size} = "
                             f"per_device_train_batch_size x steps_per_generation x processes) must be a multiple of "
                             f"num_generations "
                             f"({self.num_generations})")


@dataclass(frozen=True)
class GRPORecipe:
    """One GRPO run's recipe as one hand-off: the three parsed blocks (`parse_args`) and what the phases of the run
    derive from them once. Each phase reads the fields it needs; none threads the three blocks on."""

    script: GRPOScriptArguments
    training: PlannerGRPOConfig
    model: PlannerModelConfig

    @property
    def out(self) -> Path:
        """The run's output folder."""
        return Path(self.training.output_dir)

    @property
    def decoding(self) -> ClosureDecoding:
        """How every held-out closure evaluation of the run decodes and scores (the same rows and decoding each
        time; the balanced selection decodes greedily with the same settings, `rl/states.py:decoding_options`)."""
        return closure_decoding(self.script, self.training)

    def as_dict(self) -> dict[str, Any]:
        """The run's full recipe for its provenance (the same three blocks as the SFT run card)."""
        return {"script": asdict(self.script), "model": asdict(self.model),
                "training": json.loads(self.training.to_json_string())}


def closure_decoding(script: GRPOScriptArguments, training: PlannerGRPOConfig) -> ClosureDecoding:
    """The held-out closure evaluation's decoding and scoring, from the recipe's `eval_closure_*` fields, the
    sampling temperature and seed, and the decoding options the balanced selection shares."""
    return ClosureDecoding(mode=script.eval_closure_mode, samples=script.eval_closure_samples,
                           temperature=training.temperature, seed=training.seed,
                           **decoding_options(script, training))


def make_parser() -> trl.TrlParser:
    return trl.TrlParser((GRPOScriptArguments, PlannerGRPOConfig, PlannerModelConfig))


def parse_args(args: list[str] | None = None) -> tuple[GRPOScriptArguments, PlannerGRPOConfig, PlannerModelConfig]:
    """Parse `--config RECIPE.yaml` plus overrides (`None`: sys.argv)."""
    return make_parser().parse_args_and_config(args)


# the stages as the launcher takes them; rft-select parses the GRPO recipe through the GRPO config (the control
# reads what the arm it controls reads)
GRPO_STAGE = Stage("grpo", "omnidecision.rl.train", parse_args)
RFT_STAGE = Stage("rft-select", "omnidecision.rl.rft", parse_args, accelerate=False, aliases=RFT_ALIASES)
