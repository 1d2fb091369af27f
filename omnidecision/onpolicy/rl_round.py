"""One round of the RL variant of `omnidecision rounds` (`mode: rl`): on-policy RL at the decision level.

Round r, in `out/round-r/`:
1. serve the current planner with vLLM and run the agent on the TRAINING tasks (`collect:`, K samples per task at
   the planner backend's temperature) → `collect/` (resumable);
2. keep the state of every run, whatever its outcome (`harvest --label none`: no label; each row holds the decision
   made there, whether it moved the ledger, the run's end) → `data/own/rl`;
3. optionally (`judge_refresh`) retrain the learned judge on what followed the decisions of every round's runs so
   far plus `judge_data` → `judge/`, which scores this round's GRPO;
4. GRPO from the current planner on the own states (`state_sources`: own, weight `own_weight`, plus `state_mix`)
   with `grpo_config` for `grpo_steps` steps → `grpo/`, exported → `model/`, served next round.
`round.json` marks the round done: a restart skips it and serves its `model/`. Every round's planner is kept.

    omnidecision rounds --config configs/rounds/tiny-cpu-rl.yaml [--rounds 2 --grpo_steps 30]
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from omnidecision.collect.harvest import HarvestOptions, run_harvest, write_splits
from omnidecision.onpolicy.rounds import RoundsRecipe, _cli, _load_rows, _run, start_round
from omnidecision.outputs import write_json_atomic
from omnidecision.rollout.recipe import read_yaml

logger = logging.getLogger(__name__)


def _grpo_recipe(recipe: RoundsRecipe) -> dict[str, Any]:
    data = read_yaml(Path(recipe.grpo_config), "the GRPO recipe") or {}
    return {**data, **recipe.grpo_overrides}


def check_rl_recipe(recipe: RoundsRecipe) -> None:
    """What the RL rounds need before round 1 starts a server: a readable GRPO recipe, and a learned judge in it
    when the judge is to be refreshed (a refreshed judge that no reward reads would be time spent for nothing)."""
    grpo = _grpo_recipe(recipe)
    if recipe.judge_refresh and grpo.get("judge_weight") is None and "judge" not in (grpo.get("reward_funcs") or []):
        raise ValueError(f"judge_refresh: the GRPO recipe {recipe.grpo_config} has no judge (judge_weight or the "
                         "`judge` reward): use a judge recipe such as configs/grpo/tiny-cpu-judge.yaml")


def own_states(recipe: RoundsRecipe, out: Path) -> dict[str, Any]:
    """Step 2: every run's states (no label) → out/data/own (rl/ train and validation splits)."""
    h = run_harvest([str(out / "collect")], out / "data" / "own",
                    HarvestOptions(label="none", val_fraction=recipe.own_val_fraction))
    correct = h["correct_runs"]
    return {"runs": h["runs"], "correct_runs": correct, "failed_runs": h["runs"] - correct,
            "states": h["rl"]["train"] + h["rl"]["validation"], "train": h["rl"]["train"],
            "validation": h["rl"]["validation"], "path": str(out / "data" / "own")}


def refresh_judge(recipe: RoundsRecipe, r: int, model: str, out: Path, log: Path) -> str:
    """Step 3: the learned judge retrained on `judge_data` and every round's own states so far → out/judge."""
    rows: list[dict[str, Any]] = []
    if recipe.judge_data:  # a harvest folder holding rl/, or the rl/ folder itself
        base = Path(recipe.judge_data)
        rows = _load_rows(base / "rl" if (base / "rl").is_dir() else base, "train")
    for k in range(1, r + 1):
        rows += _load_rows(Path(recipe.out) / f"round-{k}" / "data" / "own" / "rl", "train")
    data = out / "data" / "judge"
    write_splits(rows, "rl", data, {row["task_id"]: "train" for row in rows})
    _run(_cli("judge", "train", "--dataset_name", str(data), "--model_name_or_path", model, "--output_dir",
              str(out / "judge"), "--max_steps", str(recipe.judge_steps)), log)
    return str(out / "judge")


def run_rl_round(recipe: RoundsRecipe, r: int, model: str) -> dict[str, Any]:
    """One RL round from the served `model`; writes round.json last (the mark that the round is done)."""
    out, log, times, report = start_round(recipe, r, model)
    # 2. its own states: every run, no label
    t0 = time.perf_counter()
    own = own_states(recipe, out)
    times["harvest"] = time.perf_counter() - t0
    # 3. the judge, refreshed on the new runs' outcomes (a recipe choice)
    overrides: dict[str, Any] = dict(recipe.grpo_overrides)
    judge = None
    if recipe.judge_refresh:
        t0 = time.perf_counter()
        judge = overrides["judge_path"] = refresh_judge(recipe, r, model, out, log)
        times["judge"] = time.perf_counter() - t0
    # 4. GRPO on the own states (+ the mix), exported for the next round's server
    t0 = time.perf_counter()
    sources = [{"path": own["path"], "weight": recipe.own_weight, "name": "own"}, *recipe.state_mix]
    overrides.update({"model_name_or_path": model, "state_sources": json.dumps(sources),
                      "output_dir": str(out / "grpo"), "max_steps": recipe.grpo_steps})
    args = [a for k, v in overrides.items() for a in (f"--{k}", str(v))]
    _run(_cli("grpo", "--config", recipe.grpo_config, *args), log)
    _run(_cli("export", str(out / "grpo"), "--out", str(out / "model")), log)
    times["grpo"] = time.perf_counter() - t0
    closure = json.loads((out / "grpo" / "closure_eval.json").read_text("utf-8"))
    info = {"round": r, "mode": "rl", "served": model, "model": str(out / "model"),
            "accuracy_on_train_tasks": report["accuracy"], "outcomes": report["outcomes"],
            "invalid_action_rate": report.get("invalid_action_rate"),
            # how the served planner decided where the digest says what to do (eval/decisions.py)
            "decisions": {k: report.get("decisions", {}).get(k) for k in ("repeat_after_empty", "premature_finish")},
            "own_states": own, "state_sources": closure.get("state_sources"), "judge": judge,
            "grpo": {"steps": closure.get("steps"), "delta_mean": closure.get("delta_mean"),
                     "selection": closure.get("selection")},
            "wall_s": {k: round(v, 1) for k, v in times.items()}}
    write_json_atomic(out / "round.json", info)  # the mark a restart reads: never half-written
    return info
