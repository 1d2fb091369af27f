"""`omnidecision rounds`: R on-policy rounds of the planner (DAgger with aggregation), resumable per round.

Each round r = 1..R, in `out/round-r/`:
1. serve the current planner with vLLM and run the agent on the TRAINING tasks (`collect:`, an eval recipe: the
   other roles as configured, e.g. the scripted teacher) → `collect/trajectories.jsonl` (resumable);
2. label: by default (`labeller: own`, no oracle) keep what the planner itself decided in its own judge-correct
   runs (several samples per task at a temperature: expert iteration), harvested like the teacher's runs
   (`harvest --label emitted`); `labeller: rule` (DAgger with the rule planner: a named upper bound, not the
   pipeline) or a chat backend relabels every visited state → `data/onpolicy` (SFT rows; RL rows);
3. aggregate: the base SFT rows + every round's relabelled rows so far → `data/sft` (validation: the base's);
4. fine-tune the current planner on the aggregate (`omnidecision sft` with `sft_config`, `sft_steps` steps),
   export it → `model/`, which the next round serves. `round.json` marks the round done (a restart skips it).

`mode: rl` is the RL variant (issue 37; `onpolicy/rl_round.py`; the loop over rounds: `onpolicy/loop.py`): collect
as in 1, keep every run's ledger states
(`harvest --label none`: the planner's own states, failed runs and correct ones alike, no label), GRPO on them
(alone or mixed with `state_mix`, e.g. the teacher's states), export → `model/`, serve it next round. The learned
judge can be retrained each round on the new runs' outcomes (`judge_refresh: true`; off by default).

    omnidecision rounds --config configs/rounds/tiny-cpu.yaml [--rounds 3 --sft_steps 100]
    omnidecision rounds --config configs/rounds/tiny-cpu-rl.yaml [--rounds 2 --grpo_steps 30]
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from omnidecision.backends.factory import build_backend
from omnidecision.collect.harvest import HarvestOptions, run_harvest
from omnidecision.eval.runner import run_eval
from omnidecision.onpolicy.relabel import LLMLabeller, relabel_runs, rule_labeller, write_rows
from omnidecision.outputs import write_json_atomic
from omnidecision.protocol.chat import BackendSpec
from omnidecision.provenance import TrainingTasks, training_tasks, write_task_ids
from omnidecision.rollout.recipe import EvalRecipe, load_recipe

logger = logging.getLogger(__name__)


class RoundsRecipe(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["sft", "rl"] = Field(
        "sft", description="sft: label visited states (own judge-correct runs, or a labeller), aggregate, fine-tune; "
                           "rl: GRPO on the planner's own states, every run kept, no label (onpolicy/rl_round.py)")
    rounds: int = Field(2, ge=1, description="R: on-policy rounds")
    start_model: str = Field(..., description="the planner of round 1 (an exported SFT checkpoint)")
    base_sft_data: str | None = Field(
        None, description="sft mode (required there): SFT folder (train/validation) every round's data is added to")
    sft_config: str = Field("configs/sft/tiny-cpu.yaml", description="the SFT recipe each round fine-tunes with")
    sft_steps: int = Field(100, ge=1, description="SFT steps per round")
    sft_overrides: dict[str, bool | int | float | str] = Field(
        default_factory=dict, description="SFT recipe fields to override (passed as --name value)")
    collect: EvalRecipe = Field(
        ..., description="the eval recipe run with the current planner on the train tasks; serve.model and out are "
                         "set per round")
    labeller: Literal["own", "rule"] | BackendSpec = Field(
        "own", description="own: the planner's own judge-correct runs (no oracle); rule: the rule planner relabels "
                           "every visited state (an upper-bound arm); or a chat backend spec that relabels")
    out: str = Field("runs/rounds", description="output folder (round-1/, round-2/, …, rounds.json)")
    # -- mode: rl
    grpo_config: str = Field("configs/grpo/tiny-cpu.yaml", description="rl mode: the GRPO recipe of every round")
    grpo_steps: int = Field(30, ge=1, description="rl mode: GRPO steps per round")
    grpo_overrides: dict[str, bool | int | float | str] = Field(
        default_factory=dict, description="rl mode: GRPO recipe fields to override (passed as --name value)")
    own_weight: float = Field(1.0, gt=0, description="rl mode: the weight of the round's own states in the mix")
    state_mix: list[dict[str, Any]] = Field(
        default_factory=list, description="rl mode: more state sources mixed with the round's own states, each "
                                          "{path, weight, name} (GRPO's state_sources), e.g. the teacher's harvest")
    own_val_fraction: float = Field(
        0.1, ge=0.0, lt=1.0, description="rl mode: share of the round's tasks whose states are held out (GRPO's "
                                         "in-run closure evaluation)")
    judge_refresh: bool = Field(
        False, description="rl mode: retrain the learned judge each round on what followed the decisions of every "
                           "round's runs so far (plus `judge_data`), and score that round's GRPO with it; off by "
                           "default until it is shown to help. Needs a GRPO recipe with the learned judge")
    judge_data: str | None = Field(
        None, description="rl mode, judge_refresh: RL rows (a harvest's rl/ folder) the refreshed judge also trains "
                          "on, e.g. the teacher's harvest the first judge was trained on")
    judge_steps: int = Field(300, ge=1, description="rl mode, judge_refresh: optimizer steps of each judge")

    @model_validator(mode="before")
    @classmethod
    def _served_per_round(cls, data: Any) -> Any:
        # Every round serves its planner (collect_round sets serve.model); the recipe may leave serve.model out.
        if isinstance(data, dict) and isinstance(data.get("collect"), dict):
            collect = dict(data["collect"])
            serve = dict(collect.get("serve") or {})
            serve.setdefault("model", str(data.get("start_model") or ""))
            data = {**data, "collect": {**collect, "serve": serve}}
        return data

    @model_validator(mode="after")
    def _check_mode(self) -> RoundsRecipe:
        if self.mode == "sft" and not self.base_sft_data:
            raise ValueError("base_sft_data: required with mode sft (the SFT folder every round's data joins)")
        if self.mode == "rl" and self.state_mix:
            from omnidecision.rl.sources import parse_state_sources  # only when a round runs GRPO (import rules)

            names = [s.label() for s in parse_state_sources(self.state_mix) or []]
            if "own" in names:
                raise ValueError("state_mix: the name `own` is the round's own states; name the other sources apart")
        return self


def load_rounds_recipe(path: str | Path, overrides: list[str] | None = None) -> RoundsRecipe:
    """The YAML rounds recipe with `key.path=value` overrides (the same reader, ${VAR} expansion and errors as
    collect and eval recipes)."""
    return load_recipe(path, overrides, model=RoundsRecipe)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "omnidecision.cli", *args]


def _run(cmd: list[str], log: Path) -> None:
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=os.environ.copy())
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[3] if len(cmd) > 3 else cmd[0]} failed (exit {proc.returncode}); see {log}")


def _load_rows(folder: Path, split: str) -> list[dict[str, Any]]:
    import datasets

    files = sorted(str(f) for f in folder.glob(f"{split}-*.parquet"))
    return datasets.load_dataset("parquet", data_files=files, split="train").to_list() if files else []


def round_collect_recipe(recipe: RoundsRecipe, model: str, out: Path) -> EvalRecipe:
    """The eval recipe of a round's collection: `collect:` with `model` served and written to `out`, what
    `collect_round` runs and the dry run checks (one recipe, so the dry run never refuses what the run allows)."""
    base = recipe.collect
    assert base.serve is not None  # RoundsRecipe fills it in
    # on-policy collection runs the planner on its own training tasks by design: a collection, not a test, so the
    # eval's train/test check (which would refuse it from round 1 on) does not apply; its report still says so
    return base.model_copy(update={"serve": base.serve.model_copy(update={"model": model}), "out": str(out),
                                   "name": base.name or out.parent.name, "plots": False, "allow_train_overlap": True})


def collect_round(recipe: RoundsRecipe, model: str, out: Path) -> dict[str, Any]:
    """Step 1: the current planner served with vLLM, in the loop on the training tasks."""
    return run_eval(round_collect_recipe(recipe, model, out))


def finished_round(recipe: RoundsRecipe, r: int) -> dict[str, Any] | None:
    """Round `r`'s `round.json` (written last: the mark that the round is done), None while the round is not done
    (its folder may exist: a restart redoes the round, its collection resuming). The loop skips a done round; the
    dry run says which. ValueError naming the file when it is not JSON."""
    marker = Path(recipe.out) / f"round-{r}" / "round.json"
    if not marker.is_file():
        return None
    try:
        return json.loads(marker.read_text("utf-8"))
    except ValueError as exc:
        raise ValueError(f"{marker}: not JSON ({exc}): remove it to run round {r} again") from exc


def next_round(recipe: RoundsRecipe) -> tuple[list[int], int | None, str]:
    """(the done rounds, the first round a run starts or None when every round is done, the planner it serves:
    the last done round's model before it, else `start_model`), as `onpolicy.loop.run_rounds` goes through them."""
    infos = {r: finished_round(recipe, r) for r in range(1, recipe.rounds + 1)}
    first = next((r for r, info in infos.items() if info is None), None)
    model = recipe.start_model
    for r in range(1, first or recipe.rounds + 1):
        model = infos[r]["model"]  # type: ignore[index]  # rounds before `first` are done
    return [r for r, info in infos.items() if info is not None], first, model


def build_labeller(recipe: RoundsRecipe) -> Any:
    """What relabels an SFT round's states: "own", the rule planner, or an LLM labeller over the `labeller:`
    backend (built: no request sent, no weights loaded), the run's and the dry run's one build. ValueError
    `labeller: ...` when the backend cannot be built (an unknown kind, a missing local folder, a bad option)."""
    if recipe.labeller == "own":
        return "own"
    if not isinstance(recipe.labeller, BackendSpec):
        return rule_labeller
    try:
        return LLMLabeller(build_backend(recipe.labeller))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"labeller: {exc}") from exc


def _write_round_tasks(recipe: RoundsRecipe, r: int, folder: Path) -> None:
    """The aggregate's task ids (the base data's and every round's collection so far) in `folder/task_ids.json`,
    so the round's SFT records them and stage `rounds` in its provenance (omnidecision/provenance.py)."""
    parts = [training_tasks(recipe.base_sft_data, {"train": _load_rows(Path(recipe.base_sft_data), "train")})]
    for k in range(1, r + 1):
        onpolicy = Path(recipe.out) / f"round-{k}" / "data" / "onpolicy" / "sft"
        parts.append(training_tasks(onpolicy, {"train": _load_rows(onpolicy, "train")}))
    write_task_ids(folder, TrainingTasks.union(*parts), stage="rounds")


class RoundStart(NamedTuple):
    """A round's folder, its log, the seconds of its steps so far and the report of its collection."""

    out: Path
    log: Path
    times: dict[str, float]
    report: dict[str, Any]


def start_round(recipe: RoundsRecipe, r: int, model: str) -> RoundStart:
    """Round `r`'s folder, and step 1 of every round (SFT or RL): collect with the current planner (resumable:
    finished runs are skipped)."""
    out = Path(recipe.out) / f"round-{r}"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    report = collect_round(recipe, model, out / "collect")
    return RoundStart(out, out / "round.log", {"collect": time.perf_counter() - t0}, report)


def run_round(recipe: RoundsRecipe, r: int, model: str, labeller: Any) -> dict[str, Any]:
    """One SFT round from the served `model`; writes round.json last (the mark that the round is done)."""
    out, log, times, report = start_round(recipe, r, model)
    # 2. relabel every visited state
    t0 = time.perf_counter()
    if labeller == "own":  # what the planner decided in its own judge-correct runs
        h = run_harvest([str(out / "collect")], out / "data" / "onpolicy",
                        HarvestOptions(val_fraction=0.0, label="emitted"))
        stats = {"labeller": "own", "states": h["rl"]["train"], "rows": h["sft"]["train"],
                 "correct_runs": h["correct_runs"], "runs": h["runs"]}
    else:
        sft_new, rl_new, stats = relabel_runs([str(out / "collect")], labeller, source=f"round-{r}")
        write_rows(sft_new, "sft", out / "data" / "onpolicy" / "sft")
        write_rows(rl_new, "rl", out / "data" / "onpolicy" / "rl")
    # 3. aggregate with the base data and the earlier rounds
    base = Path(recipe.base_sft_data or "")
    train = _load_rows(base, "train")
    for k in range(1, r + 1):
        train += _load_rows(Path(recipe.out) / f"round-{k}" / "data" / "onpolicy" / "sft", "train")
    write_rows(train, "sft", out / "data" / "sft")
    _write_round_tasks(recipe, r, out / "data" / "sft")
    val = _load_rows(base, "validation")
    if val:
        write_rows(val, "sft", out / "data" / "sft", split="validation")
    times["relabel"] = time.perf_counter() - t0
    # 4. fine-tune on the aggregate, export for the next round's server
    t0 = time.perf_counter()
    overrides = {**recipe.sft_overrides, "model_name_or_path": model, "dataset_name": str(out / "data" / "sft"),
                 "output_dir": str(out / "sft"), "max_steps": recipe.sft_steps}
    if not val:
        overrides["eval_strategy"] = "no"
    args = [a for k, v in overrides.items() for a in (f"--{k}", str(v))]
    _run(_cli("sft", "--config", recipe.sft_config, *args), log)
    _run(_cli("export", str(out / "sft"), "--out", str(out / "model")), log)
    times["sft"] = time.perf_counter() - t0
    info = {"round": r, "served": model, "model": str(out / "model"), "accuracy_on_train_tasks": report["accuracy"],
            "outcomes": report["outcomes"], "invalid_action_rate": report.get("invalid_action_rate"),
            "relabel": stats, "aggregate_train_rows": len(train),
            "wall_s": {k: round(v, 1) for k, v in times.items()}}
    write_json_atomic(out / "round.json", info)  # the mark a restart reads: never half-written
    return info
