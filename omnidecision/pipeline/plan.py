"""The plan: the arm table (arms.py) at one SFT start, as a flat list of the project's own commands.

    omnidecision demo --dry-run              # the plan as a shell script: one command per line, a comment per group
    python -c "from omnidecision.pipeline.plan import *; print(script(build_plan(DemoConfig(), Path('runs/demo'))))"

Each command runs a shipped recipe (`configs/...`) and overrides only paths, sizes (task counts, steps) and seeds
(tests/demo/test_demo_plan.py checks it). Three synthetic suites with distinct seeds: TRAIN (collection, training),
DEV (validation rows: SFT's best checkpoint and the judge's AUROC) and TEST (read only by the final evaluations).
Post-SFT arms run `replicates` times with distinct RL seeds (`rl_seed`), all evaluated on the same test tasks;
the controls' `--max_steps` is the budget rule's (plan.budget_argument: read from the reference runs'
trainer_state.json when the control starts). With an own-states arm in the table (grpo_own, rft_own), two steps
run once per start: `collect-own` (the SFT planner in-process on the first `own_tasks` train tasks, `own_samples` runs
each) and `harvest-own` (`--label none` → data-own/rl, the teacher's dev runs as its validation split).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnidecision.pipeline.arms import ARMS, GROUP_ORDER, OWN_STATES, PARITY_ARM, PARITY_EVAL, Arm, by_name

logger = logging.getLogger(__name__)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
BUDGET = "{budget_steps}"  # a control's --max_steps, resolved by the scheduler from its budget rule
SELECT_GROUP = "rl"  # where selection steps (rft-select) run: beside the RL arms whose sampling they mirror
OWN_COLLECT_GROUP = "judge+grpo"  # the SFT planner's own collection runs beside judge training (both need only sft)
# oracle_sft's harvest repeats each switch row this many times: 1 (none), because copies traded source_switch for
# another family rather than making every family reliable (docs/research/source-switch.md, "Too few switches?")
SWITCH_COPIES = 1
OWN_RECIPE = "eval/own-states-tiny-local.yaml"  # the SFT planner (in-process) on the train tasks, K samples at 0.7


@dataclass
class DemoConfig:
    """Sizes, steps and seeds of one SFT start. `quick` shrinks it for a smoke test."""

    train_tasks: int = 240
    dev_tasks: int = 30
    # The demo's sizes are the largest that hold `make demo` within 15 min, install included, on the slower CPU type
    # (2 cores): the whole pipeline, every arm once, at the cost of a weaker SFT start than the experiment's
    # (configs/experiment/default.yaml sets its own sizes). Fewer SFT steps leave a planner that has not learnt to
    # copy its tool; more overrun the 15 min (measured: docs/research/timing.md, docs/results/demo-summary.json).
    test_tasks: int = 40
    sft_steps: int = 900
    sft_eval_steps: int = 300
    # SFT sized to its data: an epoch budget, the dev split evaluated after every epoch, stopped after `sft_patience`
    # epochs without a better dev loss, the best kept (None: `sft_steps` whatever the rows; sft_fixed always is)
    sft_epochs: float | None = None
    sft_patience: int = 5
    judge_steps: int = 60
    grpo_steps: int = 10
    seed: int = 0  # the start: suites, the teacher's draws, SFT
    replicates: int = 1  # RL replicates per post-SFT arm at this start (distinct RL seeds); the demo's time bound
    threads: int = 1  # every step's thread count, whatever runs beside it (a rerun reproduces: scheduler.py)
    # the SFT planner's own runs (grpo_own's and rft_own's states): the first `own_tasks` train tasks, K samples each
    own_tasks: int = 40
    own_samples: int = 2
    # oracle_sft's data: each rule-labelled train row that leaves a tried source for an untried listed one, this many
    # times (harvest --switch-copies; docs/research/source-switch.md, "Too few switches?")
    oracle_switch_copies: int = SWITCH_COPIES
    # post-SFT arms run once per start (replicate 0 only): arms outside the planned contrasts (the experiment's
    # `single`; the demo keeps every arm replicated)
    single: tuple[str, ...] = ()
    # the start's checks beside the arms: the SFT planner served by vLLM (serving parity against in-process) and the
    # HTML view of every test run; the experiment runs them at its first start only (71 s each at 42f1e44)
    checks: bool = True
    # the teacher-data curve (pipeline/curve.py): the teacher's runs cover the first N train tasks (None: all of them)
    teacher_tasks: int | None = None

    @classmethod
    def quick(cls) -> DemoConfig:
        # 150 SFT steps: the fewest after which the tiny planner writes well-formed actions (rft-select needs some)
        return cls(train_tasks=40, dev_tasks=8, test_tasks=8, sft_steps=150, sft_eval_steps=50, judge_steps=4,
                   grpo_steps=2, replicates=1, own_tasks=8)

    def rl_seed(self, rep: int) -> int:
        """The seed of replicate `rep` of every post-SFT arm at this start: distinct per (start, replicate)."""
        return self.seed * 1000 + rep

    def replicates_of(self, arm: Arm) -> list[int | None]:
        """The replicates of `arm` at this start: 0..replicates-1 for a replicated arm, only 0 for one listed in
        `single`, [None] for an arm trained once per start (sft, oracle_sft) or a reference."""
        if not arm.replicated:
            return [None]
        return [0] if arm.name in self.single else list(range(self.replicates))


@dataclass
class Step:
    """One command of the plan. `budget_of`: the steps whose consumed optimizer rows are the command's
    `{budget_steps}` (a control trains for what the stage it controls consumed: pipeline/budget.py)."""

    name: str
    argv: list[str]
    reads: list[str]
    writes: list[str]
    budget_of: tuple[str, ...] = ()
    # runs beside the steps next to it with the same group (--jobs at a time, each with `threads` threads)
    group: str = ""
    arm: str = ""  # the arm (and replicate) this step trains, exports or evaluates
    replicate: int | None = None
    seeds: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        return " ".join(["omnidecision", *self.argv])


def model_flag(recipe: str) -> str:
    """The override that points an eval recipe at one planner folder: its `serve.model` when it serves one with vLLM,
    else its in-process planner backend's `backends.planner.model`."""
    import yaml

    return "--serve.model" if yaml.safe_load(Path(recipe_path(recipe)).read_text("utf-8")).get("serve") else \
        "--backends.planner.model"


def unit(arm: Arm, rep: int | None) -> str:
    """The name of one trained planner: the arm, and its replicate for a replicated arm (`grpo_judge.r1`)."""
    return arm.name if rep is None else f"{arm.name}.r{rep}"


def recipe_path(recipe: str) -> str:
    path = Path(recipe)
    return str(path if path.is_absolute() else CONFIGS / path)


def build_plan(cfg: DemoConfig, out: Path, arms: tuple[Arm, ...] = ARMS) -> list[Step]:
    """One start of the protocol as a list of commands (no state, no closures): what --dry-run prints and
    `scheduler.run_plan` executes."""
    o, m = str(out), f"{out}/models"
    plan: list[Step] = []
    add = _adder(plan)
    # 1. suites, the teacher's collections, the harvests (emitted labels; rule labels only for oracle_sft)
    data_steps(add, cfg, o, m, arms)
    # 2-5. the trained arms, group by group; every trained planner is exported for serving
    trained = trained_arm_steps(plan, add, cfg, o, m, arms)
    # 6. in the loop on the test suite: every trained planner, the serving-parity check and the references
    reports = eval_steps(add, cfg, o, m, arms, trained)
    # 7. the comparison of every test report, and their HTML view
    add("compare", ["compare", *reports, "--out", f"{o}/compare", "--title", "Test suite: planners in the loop"],
        reports, [f"{o}/compare"], group="report")
    if cfg.checks:
        add("view", ["view", *reports, "--out", f"{o}/view"], reports, [f"{o}/view"], group="report")
    return plan


def _adder(plan: list[Step]) -> Callable[..., None]:
    """`add(name, argv, reads, writes, **Step fields)`: append one Step to `plan` (what the step builders call)."""
    def add(name: str, argv: list[str], reads: list[str], writes: list[str], **kw: Any) -> None:
        plan.append(Step(name, argv, reads, writes, **kw))

    return add


def data_steps(add: Callable[..., None], cfg: DemoConfig, o: str, m: str, arms: tuple[Arm, ...]) -> None:
    """The three synthetic suites, the teacher's train and dev collections, the harvests (emitted labels; rule
    labels for an oracle arm) and the untrained tiny planner."""
    seeds = {"train": cfg.seed, "dev": cfg.seed + 1000, "test": cfg.seed + 2000}
    sizes = {"train": cfg.train_tasks, "dev": cfg.dev_tasks, "test": cfg.test_tasks}
    s = str(cfg.seed)
    for split in ("train", "dev", "test"):
        add(f"synth-{split}", ["tasks", "synth", "--n", str(sizes[split]), "--seed", str(seeds[split]),
                               "--out", f"{o}/tasks-{split}"], [], [f"{o}/tasks-{split}"], group="data")
    for split in ("train", "dev"):
        limit = ["--tasks.limit", str(cfg.teacher_tasks)] if split == "train" and cfg.teacher_tasks else []
        add(f"collect-{split}", ["collect", "--config", recipe_path("collect/synthetic-habits.yaml"),
                                 "--tasks.path", f"{o}/tasks-{split}", *limit, "--out", f"{o}/collect-{split}",
                                 "--backends.default.options.seed", s, "--no-progress"],
            [f"{o}/tasks-{split}"], [f"{o}/collect-{split}"], group="collect")
    runs = [f"{o}/collect-train", f"{o}/collect-dev"]
    add("harvest", ["harvest", *runs, "--validation-from", f"{o}/collect-dev", "--label", "emitted",
                    "--out", f"{o}/data"], runs, [f"{o}/data"], group="harvest")
    if any(a.data.startswith("data-oracle") for a in arms):
        add("harvest-oracle", ["harvest", *runs, "--validation-from", f"{o}/collect-dev", "--label", "rule",
                               "--dedup", "--switch-copies", str(cfg.oracle_switch_copies),
                               "--out", f"{o}/data-oracle"], runs, [f"{o}/data-oracle"], group="harvest")
    # 4 heads of 32 (attention 128 wide on the 64-wide residual): with 2 heads the 64-wide planner learnt to copy
    # the digest's tool field in some SFT runs only (docs/research/source-switch.md, "oracle_sft in the pipeline")
    add("tiny-planner", ["tiny-planner", "--out", f"{m}/untrained", "--data", f"{o}/data/sft", "--heads", "4"],
        [f"{o}/data/sft"], [f"{m}/untrained"])


def trained_arm_steps(plan: list[Step], add: Callable[..., None], cfg: DemoConfig, o: str, m: str,
                      arms: tuple[Arm, ...]) -> list[tuple[Arm, int | None]]:
    """Group by group (GROUP_ORDER, then any other served group): the learned judge, the own-states collection and
    harvest, the selection steps, every served arm's training and its export. Returns the trained (arm, replicate)
    pairs in plan order."""
    table = by_name(arms)
    own = any(OWN_STATES in (a.data, a.states) for a in arms)
    trained: list[tuple[Arm, int | None]] = []
    groups = list(GROUP_ORDER) + sorted({a.group for a in arms if a.group not in GROUP_ORDER and a.served})
    for group in groups:
        start = len(plan)
        if group == "judge+grpo" and any(a.judge for a in arms):
            # the learned judge, on the teacher's (state, decision, what followed) rows: once per start
            add("judge-train", ["judge", "train", "--dataset_name", f"{o}/data/rl", "--model_name_or_path",
                                f"{m}/sft", "--output_dir", f"{m}/judge", "--max_steps", str(cfg.judge_steps),
                                "--seed", str(cfg.seed)],
                [f"{o}/data/rl", f"{m}/sft"], [f"{m}/judge"], group=group, seeds={"judge": cfg.seed})
        if group == OWN_COLLECT_GROUP and own:
            _own_collect_step(add, cfg, o, m)
        if group == SELECT_GROUP and own:  # alone, between the collection's group and the arms that read it
            _own_harvest_step(add, o)
        if group == "rl" and any(a.judge for a in arms):
            add("judge-eval", ["judge", "eval", "--data", f"{o}/data/rl", "--split", "validation", "--judge",
                               f"{m}/judge", "--out", f"{o}/judge_eval.json"], [f"{o}/data/rl", f"{m}/judge"],
                [f"{o}/judge_eval.json"], group=group)
        if group == SELECT_GROUP:  # the controls' selection steps (rft's best-of-K) beside the RL arms they mirror
            for arm in (a for a in arms if a.select_recipe):
                for rep in cfg.replicates_of(arm):
                    _select_step(add, arm, rep, cfg, o, m)
        for arm in (a for a in arms if a.group == group and a.served):
            for rep in cfg.replicates_of(arm):
                _arm_steps(add, arm, rep, cfg, o, m, table)
                trained.append((arm, rep))
        if group == "sft":  # the post-SFT stages start from the exported SFT planner
            for arm in (a for a in arms if a.group == "sft" and a.served):
                _export(add, unit(arm, None), m, "export-sft")
        for step in plan[start:]:
            step.group = step.group or group
    for arm, rep in trained:
        if arm.group != "sft":
            _export(add, unit(arm, rep), m, "export")
    return trained


def eval_steps(add: Callable[..., None], cfg: DemoConfig, o: str, m: str, arms: tuple[Arm, ...],
               trained: list[tuple[Arm, int | None]]) -> list[str]:
    """In the loop on the test suite: every trained planner (in-process: arms.PLANNER_EVAL), the SFT planner once
    more served by vLLM (the serving-parity check), the teacher and the rule planner as references. Returns the
    report folders of the arms (the check's is not one)."""
    test, s = f"{o}/tasks-test", str(cfg.seed)
    reports = []
    for arm, rep in trained:
        name = unit(arm, rep)
        add(f"eval-{name}", ["eval", "--config", recipe_path(arm.eval_recipe), "--name", name, "--tasks.path", test,
                             "--tasks.limit", str(cfg.test_tasks), model_flag(arm.eval_recipe), f"{m}/{name}",
                             "--out", f"{o}/eval/{name}/test", "--no-progress"],
            [f"{m}/{name}", test], [f"{o}/eval/{name}/test"], group="eval", arm=arm.name, replicate=rep)
        reports.append(f"{o}/eval/{name}/test")
    if cfg.checks and any(arm.name == PARITY_ARM for arm, _ in trained):
        add(f"eval-{PARITY_ARM}.vllm", ["eval", "--config", recipe_path(PARITY_EVAL), "--name", f"{PARITY_ARM}.vllm",
                                        "--tasks.path", test, "--tasks.limit", str(cfg.test_tasks),
                                        model_flag(PARITY_EVAL), f"{m}/{PARITY_ARM}",
                                        "--out", f"{o}/eval/{PARITY_ARM}.vllm/test", "--no-progress"],
            [f"{m}/{PARITY_ARM}", test], [f"{o}/eval/{PARITY_ARM}.vllm/test"], group="eval")  # a check, not an arm
    for arm in (a for a in arms if not a.served):
        add(f"eval-{arm.name}", ["eval", "--config", recipe_path(arm.recipe), "--tasks.path", test,
                                 "--backends.default.options.seed", s, "--out", f"{o}/eval/{arm.name}/test",
                                 "--no-progress"], [test], [f"{o}/eval/{arm.name}/test"], group="eval",
            arm=arm.name, seeds={"teacher": cfg.seed})
        reports.append(f"{o}/eval/{arm.name}/test")
    return reports


def _export(add: Any, name: str, m: str, group: str) -> None:
    add(f"export-{name}", ["export", f"{m}/{name}-run", "--out", f"{m}/{name}"], [f"{m}/{name}-run"], [f"{m}/{name}"],
        group=group)


def _arm_steps(add: Any, arm: Arm, rep: int | None, cfg: DemoConfig, o: str, m: str, table: dict[str, Arm]) -> None:
    """The training steps of one arm (and replicate): one builder per kind."""
    name = unit(arm, rep)
    seed = cfg.seed if rep is None else cfg.rl_seed(rep)
    data = f"{o}/{arm.data.format(rep=rep)}"
    judge = [f"{m}/judge"] if arm.judge else []
    meta = {"arm": arm.name, "replicate": rep, "seeds": {"train": seed}}
    if arm.kind == "sft":
        add(name, ["sft", "--config", recipe_path(arm.recipe), "--model_name_or_path", f"{m}/untrained",
                   "--dataset_name", data, "--output_dir", f"{m}/{name}-run", *sft_budget(cfg, arm), "--seed",
                   str(seed)], [f"{m}/untrained", data], [f"{m}/{name}-run"], **meta)
    elif arm.kind == "grpo":
        flags = ["--judge_path", judge[0]] if judge else []
        add(name, [arm.command or "grpo", "--config", recipe_path(arm.recipe), "--model_name_or_path", f"{m}/sft",
                   "--dataset_name", data, "--output_dir", f"{m}/{name}-run", "--max_steps", str(cfg.grpo_steps),
                   "--seed", str(seed), *flags], [f"{m}/sft", data, *judge], [f"{m}/{name}-run"], **meta)
    elif arm.kind == "control":
        if arm.budget is None:
            raise ValueError(f"arm {arm.name!r}: a control needs a budget rule (arms.Budget)")
        missing = [r for r in arm.budget.reference if r not in table and r != "judge-train"]
        if missing:
            raise ValueError(f"arm {arm.name!r}: budget reference {missing} is not an arm of the table")
        ref = tuple(unit(table[r], rep) if r in table and table[r].replicated else r for r in arm.budget.reference)
        add(name, ["sft", "--config", recipe_path(arm.recipe), "--model_name_or_path", f"{m}/sft", "--dataset_name",
                   data, "--output_dir", f"{m}/{name}-run", "--max_steps", BUDGET, "--seed", str(seed)],
            [f"{m}/sft", data], [f"{m}/{name}-run"], budget_of=ref, **meta)
    else:
        raise ValueError(f"arm {arm.name!r}: kind {arm.kind!r} trains nothing")


def sft_budget(cfg: DemoConfig, arm: Arm) -> list[str]:
    """An sft arm's training budget: `sft_epochs` over its rows with early stopping on the dev loss (evaluated and
    saved every epoch, the best kept), or the fixed `sft_steps` (evaluated every `sft_eval_steps`)."""
    if cfg.sft_epochs is not None and not arm.fixed_steps:
        return ["--max_steps", "-1", "--num_train_epochs", f"{cfg.sft_epochs:g}", "--eval_strategy", "epoch",
                "--save_strategy", "epoch", "--early_stopping_patience", str(cfg.sft_patience)]
    return ["--max_steps", str(cfg.sft_steps), "--eval_steps", str(cfg.sft_eval_steps), "--save_steps",
            str(cfg.sft_eval_steps)]


def _select_step(add: Any, arm: Arm, rep: int | None, cfg: DemoConfig, o: str, m: str) -> None:
    """rft's data: K samples on as many states as GRPO's steps consume, best by the arm's reward (its recipe)."""
    seed = cfg.seed if rep is None else cfg.rl_seed(rep)
    data = f"{o}/{arm.data.format(rep=rep)}"
    judge = [f"{m}/judge"] if arm.judge else []
    flags = ["--judge_path", judge[0]] if judge else []
    states = f"{o}/{arm.states}"
    add(f"{unit(arm, rep)}-select", ["rft-select", "--config", recipe_path(arm.select_recipe),
                                     "--model_name_or_path", f"{m}/sft", "--dataset_name", states, "--val",
                                     f"{o}/data/sft", "--out", data, "--seed", str(seed), *flags, "--max_steps",
                                     str(cfg.grpo_steps)],
        [f"{m}/sft", states, *judge], [data], arm=arm.name, replicate=rep, seeds={"train": seed})


def _own_collect_step(add: Any, cfg: DemoConfig, o: str, m: str) -> None:
    """The SFT planner's own runs: served in the loop on the first `own_tasks` TRAIN tasks, `own_samples` runs each
    at the recipe's temperature (configs/eval/own-states-tiny-local.yaml), every run kept whatever its outcome."""
    add("collect-own", ["eval", "--config", recipe_path(OWN_RECIPE), "--name", "own-states", "--tasks.path",
                        f"{o}/tasks-train", "--tasks.limit", str(cfg.own_tasks), "--samples", str(cfg.own_samples),
                        model_flag(OWN_RECIPE), f"{m}/sft", "--backends.default.options.seed", str(cfg.seed),
                        "--backends.planner.options.seed", str(cfg.seed), "--out",
                        f"{o}/collect-own", "--no-progress"],
        [f"{m}/sft", f"{o}/tasks-train"], [f"{o}/collect-own"], seeds={"teacher": cfg.seed})


def _own_harvest_step(add: Any, o: str) -> None:
    """Every own run's ledger states, no label (`--label none`: RL rows only) → data-own/rl/train; the teacher's dev
    runs are its validation split, the held-out states of grpo_judge too (the same checkpoint choice)."""
    runs = [f"{o}/collect-own", f"{o}/collect-dev"]
    add("harvest-own", ["harvest", *runs, "--validation-from", f"{o}/collect-dev", "--label", "none", "--out",
                        f"{o}/{OWN_STATES.split('/')[0]}"], runs, [f"{o}/{OWN_STATES.split('/')[0]}"],
        group="harvest-own")


def needed(plan: list[Step], targets: list[str]) -> list[Step]:
    """The steps `targets` need (themselves and, transitively, the steps that write what they read), in plan order:
    a part of the plan that runs alone (`omnidecision demo --only eval-rule`)."""
    by_write = {w: s for s in plan for w in s.writes}
    known = {s.name: s for s in plan}
    unknown = [t for t in targets if t not in known]
    if unknown:
        raise ValueError(f"no step named {unknown} in the plan (steps: {', '.join(known)})")
    keep, todo = set(), list(targets)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        step = known[name]
        for r in (*step.reads, *(output_dir(known[b]).as_posix() for b in step.budget_of)):
            writer = next((s for w, s in by_write.items() if r == w or r.startswith(w + "/")), None)
            if writer is not None:
                todo.append(writer.name)
    return [s for s in plan if s.name in keep]


def output_dir(step: Step) -> Path:
    """The folder a training step writes (its trainer_state.json is there)."""
    for flag in ("--output_dir", "--out"):
        if flag in step.argv:
            return Path(step.argv[step.argv.index(flag) + 1])
    raise ValueError(f"step {step.name!r} names no output folder")


def script(plan: list[Step], out: Path | None = None, kept: dict[str, float] | None = None) -> str:
    """The plan as a shell script a person can read and run: one command per line, a `#` comment heading each
    group, paths under `$OUT` and `$CONFIGS`. A control's step budget is a command substitution that reads the
    reference runs (pipeline/budget.py). `kept`: the steps a restart in `out` keeps (scheduler.kept_steps), written
    as comments, so the script runs what the run would."""
    kept = kept or {}
    by = {s.name: s for s in plan}
    prefixes = [(str(CONFIGS), "$CONFIGS")] + ([(str(out), "$OUT")] if out is not None else [])

    def word(arg: str) -> str:
        for prefix, var in prefixes:
            if arg == prefix or arg.startswith(prefix + "/"):
                return f'"{var}{arg[len(prefix):]}"' if any(c.isspace() for c in arg) else var + arg[len(prefix):]
        return shlex.quote(arg)

    lines = ["#!/usr/bin/env bash", "# One start of the omnidecision protocol (`omnidecision demo --dry-run`): every "
             "step is one command; steps under one heading are independent.", "set -euo pipefail",
             f"CONFIGS={shlex.quote(str(CONFIGS))}"]
    if out is not None:
        lines.append(f"OUT={shlex.quote(str(out))}")
    lines.append("# every step with one thread, whatever runs beside it: a rerun reproduces (pipeline/scheduler.py)")
    lines.append("export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONHASHSEED=0 OMP_WAIT_POLICY=PASSIVE")
    current = None
    for step in plan:
        if step.group != current:
            current = step.group
            n = sum(1 for s in plan if s.group == current)
            lines += ["", f"# --- {current or step.name}" + (f" ({n} steps, side by side)" if n > 1 else "")]
        argv = [word(a) for a in step.argv]
        if step.budget_of:
            refs = " ".join(word(str(output_dir(by[r]))) for r in step.budget_of)
            recipe = word(step.argv[step.argv.index("--config") + 1])
            sub = f'"$(python -m omnidecision.pipeline.budget --recipe {recipe} {refs})"'
            argv = [sub if a == BUDGET else w for a, w in zip(step.argv, argv, strict=True)]
        command = " ".join(["omnidecision", *argv])
        lines.append(command if step.name not in kept else
                     f"# kept (finished in an earlier run, {kept[step.name]:.1f}s): {command}")
    return "\n".join(lines) + "\n"
