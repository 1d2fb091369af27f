"""The arm table: every planner the demo and the experiment train or evaluate, one row each.

    python -c "from omnidecision.pipeline.arms import ARMS; print(*ARMS, sep='\\n')"

A row names the arm, the stage that makes it (`kind`), the recipe that stage reads, where its training data comes
from, its provenance (what the summary's "trained on" column says), the group it runs in beside others, and its
budget rule. `omnidecision.pipeline.plan.build_plan` turns the table into commands; the summary derives its rows
and pairs from it. Adding an arm is one row here plus its recipe under `configs/` (tests/demo/test_toy_arm.py).

Kinds (one step builder each in plan.py):
- `sft`: SFT from the untrained tiny planner on `data` (once per start);
- `grpo`: GRPO from the SFT planner on ledger states (`data`): the teacher's (`data/rl`) or the SFT planner's own
  (`data-own/rl`: its served runs on the train tasks, `harvest --label none`), replicated per start (RL seeds);
- `control`: SFT continued from the SFT planner on `data`, for the rows its `budget` reference consumed,
  replicated; `select_recipe` names a selection step that makes its data first (rft's best-of-K) on `states`
  (those of the GRPO arm it controls: rft on the teacher's, rft_own on the planner's own);
- `reference`: no training; `recipe` is the evaluation recipe (teacher, rule).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)

Kind = Literal["sft", "grpo", "control", "reference"]
# every trained planner is decoded in-process in the loop (backends/local.py: no vLLM start per replicate); the SFT
# planner of each start is also served by vLLM, and the summary's `serving_parity` compares the two decision by
# decision (docs/research/evaluation.md, "In-process evaluation")
PLANNER_EVAL = "eval/synthetic-tiny-local.yaml"
PARITY_EVAL = "eval/synthetic-tiny-vllm.yaml"
PARITY_ARM = "sft"
TEACHER_STATES = "data/rl"  # the ledger states of the teacher's collected runs (harvest's rl/)
# the SFT planner's own ledger states: its served runs on the TRAIN tasks, every run kept, no label (plan.py's
# collect-own and harvest-own steps, once per start; issue 37)
OWN_STATES = "data-own/rl"


class Budget(BaseModel):
    """A control trains for what its reference stages consumed, in optimizer rows (steps × batch × grad_accum,
    read from each run's trainer_state.json: omnidecision/pipeline/budget.py), of the same start and replicate."""

    model_config = ConfigDict(frozen=True)
    reference: tuple[str, ...] = Field(description="the steps whose consumed rows add up to the control's budget "
                                                   "(an arm of the same replicate, or a once-per-start step)")
    unit: Literal["rows"] = "rows"
    tolerance_rows: str = Field("batch", description="how far the control may miss: within one of its batches")


class Arm(BaseModel):
    """One planner of the pipeline (a row of the table)."""

    model_config = ConfigDict(frozen=True)
    name: str
    kind: Kind
    recipe: str = Field(description="the stage's recipe, relative to configs/ (or an absolute path)")
    command: str = Field("", description="the command that trains a `grpo` arm: grpo, or grpo-agent where the "
                                         "recipe runs the agent (an environment or the executed reward)")
    data: str = Field("", description="training data, relative to the start's folder; `{rep}` = the replicate")
    provenance: str = Field("-", description="what the arm learns from (the summary's 'trained on')")
    group: str = Field("", description="steps of one group run side by side (`--jobs` at a time)")
    budget: Budget | None = None
    judge: bool = Field(False, description="the learned reward judge takes part in the reward")
    select_recipe: str = Field("", description="a selection step (rft-select) that writes `data` first")
    states: str = Field(TEACHER_STATES, description="the RL states the selection step samples on (those of the GRPO "
                                                    "arm it controls), relative to the start's folder")
    eval_recipe: str = PLANNER_EVAL
    baseline: bool = Field(False, description="every other arm is compared with it in the summary")
    fixed_steps: bool = Field(False, description="an sft arm that trains the start's fixed `sft_steps` even where "
                                                 "the start sizes SFT to its data (`sft_epochs`)")

    @property
    def replicated(self) -> bool:
        """Post-SFT arms are replicated per start (distinct RL seeds); sft, oracle_sft and references are not."""
        return self.kind in ("grpo", "control")

    @property
    def served(self) -> bool:
        return self.kind != "reference"


# the post-SFT compute of grpo_judge: its judge's training and its GRPO run (the controls are charged both)
GRPO_JUDGE_SPENT = Budget(reference=("judge-train", "grpo_judge"))
# the same for grpo_own (its judge is the same judge-train step): rft_own is matched to it as rft to grpo_judge
GRPO_OWN_SPENT = Budget(reference=("judge-train", "grpo_own"))

ARMS: tuple[Arm, ...] = (
    Arm(name="teacher", kind="reference", recipe="eval/synthetic-habits-teacher.yaml", baseline=True),
    Arm(name="sft", kind="sft", recipe="sft/tiny-cpu.yaml", data="data/sft", provenance="emitted", group="sft"),
    Arm(name="sft_plus", kind="control", recipe="sft/tiny-cpu-continue.yaml", data="data/sft", provenance="emitted",
        group="controls", budget=GRPO_JUDGE_SPENT, baseline=True),
    Arm(name="rft", kind="control", recipe="sft/tiny-cpu-continue.yaml", data="data-rft/r{rep}",
        provenance="emitted+reward", group="controls", budget=GRPO_JUDGE_SPENT, judge=True,
        select_recipe="grpo/tiny-cpu-judge.yaml", baseline=True),
    Arm(name="grpo", kind="grpo", recipe="grpo/tiny-cpu.yaml", data="data/rl", provenance="emitted+reward",
        group="judge+grpo"),
    Arm(name="grpo_judge", kind="grpo", recipe="grpo/tiny-cpu-judge.yaml", data="data/rl",
        provenance="emitted+reward", group="rl", judge=True),
    Arm(name="grpo_shuffled", kind="grpo", recipe="grpo/tiny-cpu-judge-shuffled.yaml", data="data/rl",
        provenance="emitted+reward", group="rl", judge=True),
    # GRPO on executed returns: each candidate applied at its recorded state and the run continued by the teacher
    # (omnidecision/grounding/reward.py); grpo_judge's recipe otherwise, without the judge
    Arm(name="grpo_exec", kind="grpo", recipe="grpo/tiny-cpu-exec.yaml", data="data/rl",
        provenance="emitted+executed", group="rl", command="grpo-agent"),
    # grpo_judge's recipe on the SFT planner's own states: the training states are the one difference (the same
    # judge, selection, checkpoint policy and held-out dev states: harvest-own keeps the teacher's dev runs as its
    # validation split)
    Arm(name="grpo_own", kind="grpo", recipe="grpo/tiny-cpu-judge.yaml", data=OWN_STATES, provenance="own+reward",
        group="rl", judge=True),
    # its control: rft's recipe on the same own states and selection, for what judge-train + grpo_own consumed
    Arm(name="rft_own", kind="control", recipe="sft/tiny-cpu-continue.yaml", data="data-rft-own/r{rep}",
        provenance="own+reward", group="controls", budget=GRPO_OWN_SPENT, judge=True,
        select_recipe="grpo/tiny-cpu-judge.yaml", states=OWN_STATES),
    # the named ceiling: the only arm that reads rule-planner labels (tests/demo/test_demo_plan.py)
    Arm(name="oracle_sft", kind="sft", recipe="sft/tiny-cpu.yaml", data="data-oracle/sft", provenance="rule",
        group="sft"),
    Arm(name="rule", kind="reference", recipe="eval/synthetic-rule.yaml"),
)
# Arms a recipe runs only when it lists them (`arms:`), never in the demo: sft_fixed is the fixed-steps SFT the
# teacher curve ran, beside the SFT sized to its data (an epoch budget with early stopping: `sft_epochs`)
OPTIONAL_ARMS: tuple[Arm, ...] = (
    Arm(name="sft_fixed", kind="sft", recipe="sft/tiny-cpu.yaml", data="data/sft", provenance="emitted", group="sft",
        fixed_steps=True),
)
ALL_ARMS: tuple[Arm, ...] = ARMS + OPTIONAL_ARMS
# the order groups run in (a new group goes at the end of its kind's stages); eval runs last
GROUP_ORDER = ("sft", "judge+grpo", "rl", "controls")
# pairs of the summary beyond "every arm against each baseline": the placebo, and every post-SFT arm against its start
# (a control that drifts below SFT would flatter every arm compared with it)
EXTRA_PAIRS = (("grpo_shuffled", "grpo_judge"), ("grpo", "grpo_judge"), ("sft", "grpo"), ("sft", "grpo_judge"),
               ("sft", "rft"), ("sft", "oracle_sft"),
               # the own-states arm against the teacher-states arm, its start and its control
               ("grpo_judge", "grpo_own"), ("sft", "grpo_own"), ("rft_own", "grpo_own"), ("sft", "rft_own"),
               # executed returns against the proxy reward, best-of-K by it, and the start (issue 54)
               ("grpo_judge", "grpo_exec"), ("rft", "grpo_exec"), ("sft", "grpo_exec"),
               # SFT sized to its data against the fixed-steps SFT (an optional arm)
               ("sft_fixed", "sft"))


def below_teacher(accuracy: dict[str, float | None], arms: tuple[Arm, ...] = ARMS) -> dict[str, Any] | None:
    """The trained planners whose accuracy is below the teacher's, whose runs they learned from (every served arm
    but one trained on rule labels), with the gap: {"teacher": accuracy, "below": {arm: accuracy - teacher}}.
    None without a teacher arm. A planner below its teacher is reported, never silently kept (the summary's line)."""
    teacher = accuracy.get("teacher")
    if teacher is None or "teacher" not in planners(arms):
        return None
    learned = [a.name for a in arms if a.served and a.provenance != "rule" and accuracy.get(a.name) is not None]
    return {"teacher": teacher,
            "below": {n: round(float(accuracy[n] or 0.0) - teacher, 4) for n in learned
                      if float(accuracy[n] or 0.0) < teacher}}


def served(arms: tuple[Arm, ...] = ARMS) -> tuple[str, ...]:
    """The arms a trained planner drives in the loop (everything but the references), in table order."""
    return tuple(a.name for a in arms if a.served)


def planners(arms: tuple[Arm, ...] = ARMS) -> tuple[str, ...]:
    """Every row of the summary, in table order."""
    return tuple(a.name for a in arms)


def provenance(arms: tuple[Arm, ...] = ARMS) -> dict[str, str]:
    return {a.name: a.provenance for a in arms}


def pairs(arms: tuple[Arm, ...] = ARMS) -> list[tuple[str, str]]:
    """(a, b) pairs of the summary: every served arm against each baseline, then EXTRA_PAIRS among present arms."""
    names = set(planners(arms))
    baselines = sorted((b for b in arms if b.baseline), key=lambda b: b.kind == "reference")  # controls first
    out = [(b.name, a) for b in baselines for a in served(arms) if a != b.name]
    return out + [(a, b) for a, b in EXTRA_PAIRS if a in names and b in names]


def by_name(arms: tuple[Arm, ...] = ARMS) -> dict[str, Arm]:
    names = [a.name for a in arms]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"arm table: names {dup} appear more than once")
    return {a.name: a for a in arms}
