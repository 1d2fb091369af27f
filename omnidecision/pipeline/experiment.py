"""The experiment: the demo's protocol over several SFT starts with RL replicates, pooled, planned contrasts first.

    omnidecision experiment --config configs/experiment/default.yaml --out runs/experiment   # = make experiment
    omnidecision experiment --config configs/experiment/default.yaml --starts 0 --replicates 2 --dry-run

The recipe (`ExperimentRecipe`, YAML under configs/experiment/) declares, before anything runs: the SFT starts,
the RL replicates per start of every post-SFT arm, the suite sizes, the step counts, and the **planned contrasts**
(`b-a`: accuracy(b) − accuracy(a)). Every other pair of the arm table is reported as exploratory with Holm-adjusted
p-values (pipeline/contrasts.py). The result file holds per-(start, replicate, arm) per-task outcomes, each arm's
consumed budget, the contrasts with their hierarchical intervals, and the CPU and library versions.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from omnidecision.pipeline.arms import ALL_ARMS, ARMS, Arm, below_teacher, pairs, planners
from omnidecision.pipeline.contrasts import contrast_section, paired_rows, per_task_mean
from omnidecision.pipeline.decisions import decision_rows, pooled_decisions
from omnidecision.pipeline.plan import SWITCH_COPIES, DemoConfig
from omnidecision.rollout.recipe import load_recipe
from omnidecision.stats import Estimate, excludable_effect, min_detectable_effect, paired_in_loop

logger = logging.getLogger(__name__)


class ExperimentRecipe(BaseModel):
    """configs/experiment/*.yaml: what the experiment runs and which contrasts carry its claims.

    Attributes:
        train_tasks: training tasks per start (the teacher collects on them)
        dev_tasks: dev tasks per start (validation rows, the judge's AUROC, every checkpoint choice)
        sft_steps: SFT optimizer steps per start
        sft_eval_steps: SFT steps between dev-loss evaluations (the best dev-loss checkpoint is kept)
        sft_epochs: SFT sized to its data: epochs over its rows, evaluated every epoch, stopped early (None:
            sft_steps)
        sft_patience: epochs without a better dev loss before a sized SFT stops
        judge_steps: optimizer steps of the learned reward judge
        grpo_steps: GRPO steps of every RL replicate
    """

    model_config = ConfigDict(extra="forbid")
    starts: list[int] = Field(description="SFT starts: the seeds of suites, teacher draws and SFT", min_length=1)
    replicates: int = Field(ge=1, description="RL replicates per start of every post-SFT arm (distinct RL seeds)")
    train_tasks: int = Field(240, ge=1)
    dev_tasks: int = Field(30, ge=1)
    test_tasks: int = Field(ge=1, description="test tasks per start (every replicate of a start: the same tasks)")
    sft_steps: int = Field(1200, ge=1)
    sft_eval_steps: int = Field(250, ge=1)
    sft_epochs: float | None = Field(None, gt=0, description="SFT sized to its data: an epoch budget with early "
                                     "stopping on the dev loss (the fixed-steps SFT runs as the sft_fixed arm)")
    sft_patience: int = Field(5, ge=1, description="dev evaluations (epochs) without a better dev loss before a "
                                                   "sized SFT stops")
    judge_steps: int = Field(150, ge=1)
    grpo_steps: int = Field(30, ge=1)
    threads: int = Field(1, ge=1, description="threads of every step (fixed: a rerun reproduces)")
    own_tasks: int = Field(120, ge=1, description="train tasks the SFT planner's own runs are collected on "
                                                  "(grpo_own's and rft_own's states)")
    own_samples: int = Field(2, ge=1, description="own runs per train task (K samples at the recipe's temperature)")
    oracle_switch_copies: int = Field(SWITCH_COPIES, ge=1, description="oracle_sft's data: each rule-labelled "
                                      "train row that calls a tried need with an untried listed tool, this many times")
    planned: list[str] = Field(min_length=1, description="contrasts `b-a` declared before the run")
    single: list[str] = Field(default_factory=list, description="post-SFT arms outside the planned contrasts that "
                                                               "run replicate 0 only at each start (saves time)")
    checks: Literal["first", "every"] = Field("first", description="starts that also serve the SFT planner by vLLM "
                                              "(serving parity) and write the HTML view: the first, or every one")
    arms: list[str] = Field(default_factory=list, description="the arms this experiment runs (names of the arm "
                            "table); empty: every arm. An arm whose budget or states come from another arm needs it")
    teacher_tasks: list[int] = Field(default_factory=list, description="the teacher-data curve: the teacher's runs "
                                     "cover the first N train tasks, one cell per (N, start); empty: no curve (the "
                                     "teacher runs on every train task). The SFT planner's own runs use the first "
                                     "`own_tasks` train tasks at every N: questions are free, teacher runs are not")
    teacher_price_per_call: float | None = Field(None, ge=0, description="the curve's price of one teacher tool "
                                                 "call in USD (the synthetic teacher has no bill: an assumption, "
                                                 "named by `teacher_price_source`)")
    teacher_price_source: str = Field("", description="where `teacher_price_per_call` comes from (an assumption "
                                      "is named as one)")
    curve_rl_arms: list[str] = Field(default_factory=list, description="the RL arms the curve's headline reads "
                                     "(declared before the run): at each N the best of them is compared with SFT "
                                     "at the largest N")
    curve_margin: float = Field(0.05, ge=0, description="the curve's headline: an RL arm at N matches SFT at the "
                                "largest N when the lower end of the 95% interval of their difference is above "
                                "−margin")

    @field_validator("starts")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"starts must be distinct, got {v}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentRecipe:
        """The checks that read several fields, one after another: the first that fails is the error reported."""
        for check in (self._contrasts_name_arms, self._single_arms, self._arm_subset, self._curve):
            check()
        return self

    def _contrasts_name_arms(self) -> None:
        names = set(planners(ALL_ARMS))
        for c in self.planned:
            parts = c.split("-")
            if len(parts) != 2 or not all(parts):
                raise ValueError(f"planned contrast {c!r}: write it as `b-a` (e.g. grpo_judge-sft)")
            unknown = [p for p in parts if p not in names]
            if unknown:
                raise ValueError(f"planned contrast {c!r}: {unknown} not in the arm table ({sorted(names)})")

    def _single_arms(self) -> None:
        table = {a.name: a for a in ARMS}
        for name in self.single:
            if name not in table or not table[name].replicated:
                replicated = sorted(a.name for a in ARMS if a.replicated)
                raise ValueError(f"single: {name!r} is not a replicated post-SFT arm ({replicated})")
        planned = {n for a, b in self.contrasts() for n in (a, b)}
        both = sorted(planned & set(self.single))
        if both:
            raise ValueError(f"single: {both} appear in a planned contrast (a planned contrast needs every replicate)")

    def _arm_subset(self) -> None:
        table = {a.name: a for a in ALL_ARMS}
        unknown = sorted(set(self.arms) - set(table))
        if unknown:
            raise ValueError(f"arms: {unknown} not in the arm table ({sorted(table)})")
        if not self.arms:
            return
        chosen = set(self.arms)
        fixed = sorted(a.name for a in ALL_ARMS if a.fixed_steps and a.name in chosen)
        if fixed and self.sft_epochs is None:
            raise ValueError(f"arms: {fixed} train the fixed sft_steps beside an SFT sized to its data: set "
                             "sft_epochs (without it they repeat sft)")
        for name in self.arms:  # what an arm's budget is matched to, and the states its selection samples on
            arm = table[name]
            budget = sorted(r for r in (arm.budget.reference if arm.budget else ()) if r in table and r not in chosen)
            if budget:
                raise ValueError(f"arms: {name!r} trains for what {budget} consumed: list it too")
        absent = sorted({n for pair in self.contrasts() for n in pair} - chosen)
        if absent:
            raise ValueError(f"planned contrasts name arms this experiment does not run: {absent}")

    def _curve(self) -> None:
        if not self.teacher_tasks:
            if self.curve_rl_arms:
                raise ValueError("curve_rl_arms: only a curve (teacher_tasks) has a headline to read")
            return
        n = self.teacher_tasks
        if sorted(set(n)) != n:
            raise ValueError(f"teacher_tasks must be distinct and ascending, got {n}")
        if n[-1] > self.train_tasks:
            raise ValueError(f"teacher_tasks: {n[-1]} > train_tasks ({self.train_tasks}): the teacher cannot run on "
                             "more train tasks than the suite has")
        if self.teacher_price_per_call is None or not self.teacher_price_source:
            raise ValueError("a curve prices the teacher's runs: set teacher_price_per_call and say where it comes "
                             "from in teacher_price_source")
        names = set(self.arms) or {a.name for a in ARMS}
        bad = [a for a in self.curve_rl_arms if a not in names or a == "sft"]
        if not self.curve_rl_arms or bad or "sft" not in names:
            raise ValueError(f"curve_rl_arms: name the RL arms the headline reads, among the arms run and other than "
                             f"sft (got {self.curve_rl_arms}; sft must run)")

    def arm_table(self) -> tuple[Arm, ...]:
        """The arms this experiment runs, in table order."""
        return tuple(a for a in ALL_ARMS if a.name in self.arms) if self.arms else ARMS

    def cells(self) -> list[tuple[int | None, int]]:
        """(N, start) per cell: N is None outside a curve (the teacher covers every train task)."""
        return [(n, s) for n in (self.teacher_tasks or [None]) for s in self.starts]

    def contrasts(self) -> list[tuple[str, str]]:
        """(a, b) per planned contrast `b-a`."""
        return [(c.split("-")[1], c.split("-")[0]) for c in self.planned]

    def start_config(self, start: int, teacher_tasks: int | None = None) -> DemoConfig:
        return DemoConfig(teacher_tasks=teacher_tasks, train_tasks=self.train_tasks, dev_tasks=self.dev_tasks,
                          test_tasks=self.test_tasks,
                          sft_steps=self.sft_steps, sft_eval_steps=self.sft_eval_steps, sft_epochs=self.sft_epochs,
                          sft_patience=self.sft_patience, judge_steps=self.judge_steps,
                          grpo_steps=self.grpo_steps, seed=start, replicates=self.replicates, threads=self.threads,
                          own_tasks=self.own_tasks, own_samples=self.own_samples, single=tuple(self.single),
                          oracle_switch_copies=self.oracle_switch_copies,
                          checks=self.checks == "every" or start == self.starts[0])


def load_experiment(path: Path, overrides: list[str] | None = None) -> ExperimentRecipe:
    """Read a recipe; a bad file or field raises an error naming the file (YAML line) and the field."""
    return load_recipe(path, overrides, model=ExperimentRecipe)


DEFAULT_RECIPE = Path(__file__).resolve().parents[2] / "configs" / "experiment" / "default.yaml"


def planned_contrasts(recipe: Path = DEFAULT_RECIPE) -> list[tuple[str, str]]:
    """The planned contrasts (a, b) of the shipped experiment recipe: the demo reports the same ones at its start."""
    return load_experiment(recipe).contrasts()


def exploratory(planned: list[tuple[str, str]], arms: tuple[Arm, ...] = ARMS) -> list[tuple[str, str]]:
    """Every pair of the summary that is not planned (reported with Holm-adjusted p-values)."""
    return [p for p in pairs(arms) if p not in planned]


def pool(summaries: list[dict[str, Any]], folders: list[Path], recipe: ExperimentRecipe | None = None,
         plot: Path | None = None) -> dict[str, Any]:
    """Per-start accuracies, the pooled paired comparisons over every (start, task) unit, and (with a recipe) the
    planned contrasts' hierarchical intervals over start → replicate → task."""
    names = list(summaries[0]["planners"]) if summaries else list(planners(ARMS))
    nested: dict[str, dict[str, Any]] = {n: {} for n in names}
    for s in summaries:
        for n in names:
            nested[n].update(s["outcomes_by_replicate"][n])
    per_seed = {n: [s["planners"][n]["accuracy"] for s in summaries] for n in names}
    families: dict[str, dict[str, Any]] = {}
    for s in summaries:
        for n in names:
            for f, v in s["planners"][n].get("by_family", {}).items():
                cell = families.setdefault(f, {}).setdefault(n, {"n": 0, "correct": 0.0})
                cell["n"] += v["n"]
                cell["correct"] += (v["accuracy"] or 0.0) * v["n"]
    by_family = {f: {n: round(c["correct"] / c["n"], 4) if c["n"] else None for n, c in cells.items()}
                 | {"n": max(c["n"] for c in cells.values())} for f, cells in sorted(families.items())}
    table = recipe.arm_table() if recipe is not None else ARMS
    result = {
        "seeds": [s["seed"] for s in summaries], "per_seed_accuracy": per_seed,
        # replicates whose checkpoint policy kept the start's weights (chosen step 0: the SFT planner itself), per arm
        "ended_at_start": {n: sum(v == 0 for s in summaries for v in s["planners"][n].get("chosen_step", {}).values())
                           for n in names},
        # per start, the trained planners below the teacher whose runs they learned from (test accuracy)
        "below_teacher": {str(s["seed"]): below_teacher({n: per_seed[n][i] for n in names}, table)
                          for i, s in enumerate(summaries)},
        "pooled_by_family": by_family,
        "per_seed_paired": {str(s["seed"]): s["paired_in_loop"] for s in summaries},
        "judge_eval": [s["judge_eval"] for s in summaries],
        "wall_s": [s["total_wall_s"] for s in summaries],
        "per_replicate_accuracy": {n: {str(s["seed"]): s["planners"][n].get("replicates", {}) for s in summaries}
                                   for n in names},
        "budget": {str(s["seed"]): s.get("budget", {}) for s in summaries},
        "provenance": [s.get("provenance") for s in summaries],
        "outcomes": nested,
        "decisions": pooled_decisions(summaries, names),  # pipeline/decisions.py
        # the SFT planner served by vLLM against in-process (how every arm was evaluated), per start
        "serving_parity": {str(s["seed"]): s.get("serving_parity") for s in summaries},
    }
    return derived(result, names, recipe, plot)


def derived(result: dict[str, Any], names: list[str], recipe: ExperimentRecipe | None,
            plot: Path | None) -> dict[str, Any]:
    """Add what is computed from the per-task outcomes: pooled accuracy and n, the per-(start, task) paired table,
    and with a recipe the planned and exploratory contrasts (pool and pipeline/merge.py share it)."""
    nested = result["outcomes"]
    correct: dict[str, dict[str, float]] = {n: {} for n in names}
    for n in names:
        for start, reps in nested[n].items():
            correct[n].update({f"{start}:{t}": v for t, v in per_task_mean({start: reps}).items()})
    result["pooled_accuracy"] = {n: round(sum(correct[n].values()) / len(correct[n]), 4) if correct[n] else None
                                 for n in names}
    result["pooled_n"] = {n: len(correct[n]) for n in names}
    table = recipe.arm_table() if recipe is not None else ARMS
    result["pooled_paired"] = [paired_in_loop(correct[a], correct[b], (a, b)) for a, b in pairs(table)
                               if a in correct and b in correct]
    if recipe is not None:
        planned = recipe.contrasts()
        result["recipe"] = recipe.model_dump()
        result["contrasts"] = contrast_section(nested, planned, exploratory(planned, recipe.arm_table()), plot=plot)
    return result


def contrast_rows(section: dict[str, Any]) -> list[str]:
    """The planned contrasts (with what each can exclude and the effect it had 80% power for) and the exploratory."""
    rows = [f"Planned contrasts ({section['method']}; 95% interval over start → replicate → task; `excludes`: no "
            "effect beyond ± this in either direction is compatible with the interval; `80% power`: the true effect "
            "this design would detect 4 times in 5, at the observed standard error and df):", "",
            "| contrast | estimate | 95% interval | half-width | excludes | 80% power | p "
            "| per-replicate Δ (start: …) |",
            "|---|---|---|---|---|---|---|---|"]
    for k, v in section["planned"].items():
        by_start: dict[str, list[str]] = {}
        for r in v.get("per_replicate", []):
            by_start.setdefault(str(r["start"]), []).append(f"{r['delta']:+.3f}")
        reps = "; ".join(f"{s}: {', '.join(d)}" for s, d in by_start.items())
        e = Estimate.model_validate(v)
        rows.append(f"| {k} | {v['estimate']:+.3f} | [{v['low']:+.3f}, {v['high']:+.3f}] | {v['half_width']:.3f} | "
                    f"±{excludable_effect(e):.3f} | {min_detectable_effect(e):.3f} | {v['p_value']:.3g} | {reps} |")
    if section.get("exploratory"):
        rows += ["", "Exploratory (every other pair; Holm-adjusted p):", "",
                 "| contrast | estimate | 95% interval | p (Holm) |", "|---|---|---|---|"]
        for k, v in section["exploratory"].items():
            rows.append(f"| {k} | {v['estimate']:+.3f} | [{v['low']:+.3f}, {v['high']:+.3f}] | {v['p_holm']:.3g} |")
    return rows


def experiment_table(pooled: dict[str, Any]) -> str:
    names = list(pooled["per_seed_accuracy"])
    means = (pooled.get("contrasts") or {}).get("means", {})
    rows = ["| planner | " + " | ".join(f"seed {s}" for s in pooled["seeds"]) + " | mean | 95% interval "
            "(start → replicate → task) | n |", "|---|" + "---|" * (len(pooled["seeds"]) + 3)]
    for n in names:
        accs = " | ".join("–" if a is None else f"{a:.3f}" for a in pooled["per_seed_accuracy"][n])
        m = means.get(n)
        ci = f"[{m['low']:.3f}, {m['high']:.3f}]" if m else "–"
        rows.append(f"| {n} | {accs} | {pooled['pooled_accuracy'][n]:.3f} | {ci} | {pooled['pooled_n'][n]} |")
    below = {s: f["below"] for s, f in (pooled.get("below_teacher") or {}).items() if f and f["below"]}
    if below:
        rows += ["", "**Below the teacher** whose runs they learned from (test accuracy in the loop, per start): " +
                 "; ".join(f"start {s}: " + ", ".join(f"{n} {d:+.3f}" for n, d in b.items()) for s, b in below.items())
                 + "."]
    if pooled.get("contrasts"):
        rows += ["", *contrast_rows(pooled["contrasts"])]
    else:  # no recipe: the task-only paired comparison (it leaves out the training noise: not for claims)
        rows += ["", "Pooled over seeds, paired per (seed, task); task noise only:", "",
                 *paired_rows(pooled["pooled_paired"])]
    parity = [v for v in (pooled.get("serving_parity") or {}).values() if v]
    if parity:
        rows += ["", f"Serving parity (the SFT planner served by vLLM against in-process, {len(parity)} start(s)): "
                     f"{sum(v['steps_identical'] for v in parity)} of {sum(v['steps'] for v in parity)} decisions "
                     f"identical, {sum(v['runs_identical'] for v in parity)} of {sum(v['runs'] for v in parity)} "
                     "test runs identical throughout."]
    if any((pooled.get("decisions") or {}).values()):
        rows += ["", "Decisions where the digest says what to do (eval/decisions.py; mean over every start and "
                     "replicate): repeating the same (need, tool) after it came back without the value while another "
                     "listed source is untried; finishing while a blocking need can still advance:", "",
                 *decision_rows(pooled["decisions"])]
    rows += ["", "Pooled test accuracy per synthetic family (n tasks over all seeds):", "",
             "| family | n | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for f, cells in pooled.get("pooled_by_family", {}).items():
        rows.append(f"| {f} | {cells['n']} | " + " | ".join("–" if cells.get(n) is None else f"{cells[n]:.2f}"
                                                          for n in names) + " |")
    return "\n".join(rows) + "\n"


REPO = Path(__file__).resolve().parents[2]


def write_result(pooled: dict[str, Any], out: Path, results: Path | None) -> None:
    """OUT/experiment.json, and the committed copy `results` with paths relative to the repository (the steps'
    command lines name this machine's checkout otherwise)."""
    text = json.dumps(pooled, indent=2)
    (out / "experiment.json").write_text(text, "utf-8")
    if results is not None:
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(text.replace(json.dumps(f"{REPO}/")[1:-1], ""), "utf-8")
