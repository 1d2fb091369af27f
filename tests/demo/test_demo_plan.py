"""The demo's plan (fast: nothing runs): one project command per step over shipped recipes, overriding only paths,
sizes and seeds; no training stage reads a rule-planner label except the named ceiling arm `oracle_sft`; only the
final evaluations read the test suite."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from omnidecision.pipeline.arms import ARMS, provenance, served
from omnidecision.pipeline.plan import CONFIGS, DemoConfig, build_plan, unit

PROVENANCE = provenance()
SERVED = served()

# option -> why the demo may set it: a path, a size, a seed, or the switch that defines an arm
PATHS = {"--out", "--tasks.path", "--model_name_or_path", "--dataset_name", "--output_dir", "--data", "--val",
         "--judge_path", "--judge", "--serve.model", "--backends.planner.model",
         "--validation-from"}
SIZES = {"--n", "--tasks.limit", "--samples", "--max_steps", "--eval_steps",
         "--save_steps", "--max_train_seconds"}
SEEDS = {"--seed", "--backends.default.options.seed", "--backends.planner.options.seed"}
ARM_SWITCHES = {"--label", "--dedup", "--switch-copies", "--name", "--split", "--heads", "--title", "--no-progress"}


def script_commands(text: str) -> list[list[str]]:
    """The commands of a dry-run script, its variables ($OUT, $CONFIGS) expanded as bash would."""
    env: dict[str, str] = {}
    commands = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#") or line.startswith(("set ", "export ")):
            continue
        if "=" in line.split()[0] and not line.startswith("omnidecision"):
            key, value = line.split("=", 1)
            env[key] = shlex.split(value)[0]
            continue
        for key, value in env.items():
            line = line.replace(f"${key}", value)
        commands.append(shlex.split(line))
    return commands


def _options(argv: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for i, a in enumerate(argv):
        if a.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            out[a] = None if nxt is None or nxt.startswith("--") else nxt
    return out


def test_the_dry_run_lists_only_shipped_recipes_and_path_size_seed_overrides(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "omnidecision.cli", "demo", "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    commands = script_commands(proc.stdout)
    plan = build_plan(DemoConfig(), tmp_path)
    assert len(commands) == len(plan)
    assert proc.stdout.count("\n# --- ") == len({s.group for s in plan}), "one comment heads each group"
    recipes = set()
    for argv, step in zip(commands, plan, strict=True):
        assert argv[0] == "omnidecision", argv
        opts = _options(argv[1:])
        if "--config" in opts:
            recipe = Path(opts.pop("--config") or "")
            assert recipe.is_file() and recipe.resolve().is_relative_to(CONFIGS.resolve()), step
            recipes.add(recipe.relative_to(CONFIGS).as_posix())
        unknown = set(opts) - PATHS - SIZES - SEEDS - ARM_SWITCHES
        assert not unknown, f"{step.name} sets recipe values {unknown} that are not paths, sizes or seeds"
        if step.budget_of:  # the step budget is read from the reference runs by the budget module
            assert opts["--max_steps"].startswith("$(python -m omnidecision.pipeline.budget --recipe "), argv
    assert {"collect/synthetic-habits.yaml", "sft/tiny-cpu.yaml", "grpo/tiny-cpu-judge.yaml",
            "eval/synthetic-tiny-vllm.yaml", "eval/synthetic-habits-teacher.yaml",
            "eval/own-states-tiny-local.yaml"} <= recipes


def test_no_training_stage_reads_a_rule_label_but_oracle_sft(tmp_path):
    plan = build_plan(DemoConfig(), tmp_path)
    by_name = {s.name: s for s in plan}
    oracle = str(tmp_path / "data-oracle")
    # the rule labels exist in one folder, written by the one harvest that asks for them
    rule_harvests = [s for s in plan if "--label" in s.argv and s.argv[s.argv.index("--label") + 1] == "rule"]
    assert [s.name for s in rule_harvests] == ["harvest-oracle"] and rule_harvests[0].writes == [oracle]
    assert by_name["harvest"].argv[by_name["harvest"].argv.index("--label") + 1] == "emitted"
    # the switch rows are repeated in the rule labels only (the teacher-labelled data stays as collected)
    oracle_argv = by_name["harvest-oracle"].argv
    assert oracle_argv[oracle_argv.index("--switch-copies") + 1] == str(DemoConfig().oracle_switch_copies)
    assert "--switch-copies" not in by_name["harvest"].argv
    # every step that reads them is oracle_sft (or its export / evaluation, which read the model)
    readers = [s.name for s in plan if any(r.startswith(oracle) for r in s.reads)]
    assert readers == ["oracle_sft"]
    assert PROVENANCE["oracle_sft"] == "rule"
    assert all(PROVENANCE[a] in ("emitted", "emitted+reward", "emitted+executed", "own+reward") for a in SERVED
               if a != "oracle_sft")
    # the models the other arms start from never descend from oracle_sft
    for step in plan:
        if step.arm and step.arm != "oracle_sft":
            assert not any("oracle_sft" in r for r in step.reads), step.name


def test_only_the_final_evaluations_read_the_test_suite(tmp_path):
    plan = build_plan(DemoConfig(), tmp_path)
    test_suite = str(tmp_path / "tasks-test")
    names = [s.name for s in plan]
    readers = [s.name for s in plan if any(r.startswith(test_suite) for r in s.reads)]
    assert readers and all(n.startswith("eval-") for n in readers)
    for s in plan:
        if not s.name.startswith(("synth-", "eval-", "compare", "view")):
            assert not any(test_suite in a for a in s.argv), s.name
    first_eval = min(i for i, n in enumerate(names) if n.startswith("eval-"))
    trained = [s.name for s in plan if s.arm and not s.name.startswith(("eval-", "export-"))]
    assert trained and all(names.index(a) < first_eval for a in trained)
    # the compute-matched controls train for the rows judge training and grpo_judge (same replicate) consumed
    budgeted = {s.name: s.budget_of for s in plan if s.budget_of}
    cfg = DemoConfig()
    assert set(budgeted) == {f"{a}.r{k}" for a in ("rft", "sft_plus", "rft_own") for k in range(cfg.replicates)}
    for n, b in budgeted.items():  # rft_own is matched to grpo_own as rft to grpo_judge
        rep = n.split(".r")[1]
        assert b == ("judge-train", f"grpo_own.r{rep}" if n.startswith("rft_own") else f"grpo_judge.r{rep}"), n


def test_steps_side_by_side_are_independent_and_budgets_come_from_earlier_groups(tmp_path):
    plan = build_plan(DemoConfig(), tmp_path)
    position = {s.name: i for i, s in enumerate(plan)}
    groups: dict[str, list] = {}
    for step in plan:
        if step.group:
            groups.setdefault(step.group, []).append(step)
    assert {"sft", "judge+grpo", "rl", "controls", "eval"} <= set(groups)
    for name, steps in groups.items():
        idx = [position[s.name] for s in steps]
        assert idx == list(range(idx[0], idx[0] + len(idx))), f"group {name} is not contiguous"
        for a in steps:
            for b in steps:
                if a is not b:  # nothing in a group reads what another step of the same group writes
                    assert not set(a.reads) & set(b.writes), (name, a.name, b.name)
    for step in plan:  # a budget is what steps consumed that finished before the step starts (another group)
        for other in step.budget_of:
            assert position[other] < position[step.name]
            assert not step.group or plan[position[other]].group != step.group, (step.name, other)


def test_every_post_sft_arm_is_replicated_with_distinct_seeds_on_the_same_test_tasks(tmp_path):
    cfg = DemoConfig(replicates=3, seed=2)
    plan = build_plan(cfg, tmp_path)
    by_name = {s.name: s for s in plan}
    for arm in ARMS:
        evals = [s for s in plan if s.name.startswith("eval-") and s.arm == arm.name]
        assert len(evals) == (3 if arm.replicated else 1), arm.name
        # every replicate of the start is evaluated on the same test suite, the same number of tasks
        assert len({(s.argv[s.argv.index("--tasks.path") + 1], tuple(s.argv[s.argv.index("--tasks.path") + 2:][:2]))
                    for s in evals}) == 1
        if arm.replicated:
            seeds = [by_name[unit(arm, k)].argv[by_name[unit(arm, k)].argv.index("--seed") + 1] for k in range(3)]
            assert len(set(seeds)) == 3 and seeds == [str(cfg.rl_seed(k)) for k in range(3)], (arm.name, seeds)
    # each control's selection (rft, rft_own) runs once per replicate with that replicate's seed, into its own folder
    selects = [s for s in plan if s.argv[0] == "rft-select"]
    assert len(selects) == 6 and len({s.writes[0] for s in selects}) == 6
    # the references and the once-per-start stages are not replicated
    assert sum(1 for s in plan if s.name == "judge-train") == 1
    assert {s.name for s in plan if s.name in ("eval-teacher", "eval-rule", "eval-sft", "eval-oracle_sft")} == {
        "eval-teacher", "eval-rule", "eval-sft", "eval-oracle_sft"}


def _arg(step, flag: str) -> str:
    return step.argv[step.argv.index(flag) + 1]


@pytest.mark.parametrize(("control", "grpo", "states"), [("rft", "grpo_judge", "data/rl"),
                                                         ("rft_own", "grpo_own", "data-own/rl")])
def test_each_rft_control_selects_on_the_states_its_grpo_arm_trains_on(tmp_path, control, grpo, states):
    """The same states (issue 36): the selection step reads the GRPO arm's recipe (its splits, select_states, K,
    decoding, reward), its data folder, its seed, its judge and its step count, replicate by replicate; the
    runtime side (the same state ids in the same order for one recipe and seed) is tests/rl/test_fair_controls.py."""
    cfg = DemoConfig(replicates=2, seed=3)
    by = {s.name: s for s in build_plan(cfg, tmp_path)}
    for k in range(cfg.replicates):
        select, train = by[f"{control}.r{k}-select"], by[f"{grpo}.r{k}"]
        assert _arg(select, "--config") == _arg(train, "--config")
        assert _arg(select, "--dataset_name") == _arg(train, "--dataset_name") == str(tmp_path / states)
        assert _arg(select, "--seed") == _arg(train, "--seed") == str(cfg.rl_seed(k))
        assert _arg(select, "--judge_path") == _arg(train, "--judge_path")
        assert _arg(select, "--max_steps") == _arg(train, "--max_steps")
        # the control fine-tunes on what its selection wrote, for what judge-train + its GRPO arm consumed
        assert _arg(by[f"{control}.r{k}"], "--dataset_name") == select.writes[0]
        assert by[f"{control}.r{k}"].budget_of == ("judge-train", f"{grpo}.r{k}")


def test_the_own_states_are_collected_and_harvested_once_per_start_before_the_arms_that_read_them(tmp_path):
    cfg = DemoConfig(replicates=3, own_tasks=50, own_samples=3)
    plan = build_plan(cfg, tmp_path)
    names = [s.name for s in plan]
    by = {s.name: s for s in plan}
    own = str(tmp_path / "data-own/rl")
    assert names.count("collect-own") == names.count("harvest-own") == 1
    collect, harvest = by["collect-own"], by["harvest-own"]
    # the served SFT planner on the TRAIN tasks (never the test suite), K samples each
    assert _arg(collect, "--backends.planner.model") == str(tmp_path / "models/sft")
    assert _arg(collect, "--tasks.path") == str(tmp_path / "tasks-train") and collect.reads[1] == _arg(
        collect, "--tasks.path")
    assert (_arg(collect, "--tasks.limit"), _arg(collect, "--samples")) == ("50", "3")
    assert collect.writes == [str(tmp_path / "collect-own")]
    # every run's states, no label; the teacher's dev runs are the validation split (grpo_judge's held-out states)
    assert _arg(harvest, "--label") == "none" and _arg(harvest, "--validation-from") == str(tmp_path / "collect-dev")
    assert harvest.reads == [str(tmp_path / "collect-own"), str(tmp_path / "collect-dev")]
    assert harvest.writes == [str(tmp_path / "data-own")]
    readers = {s.name for s in plan if own in s.reads}
    assert readers == {f"{a}.r{k}" for a in ("grpo_own",) for k in range(3)} | {
        f"rft_own.r{k}-select" for k in range(3)}
    # order: export-sft → collect-own → harvest-own (alone: its own group) → every reader
    assert names.index("export-sft") < names.index("collect-own") < names.index("harvest-own")
    assert all(names.index("harvest-own") < names.index(r) for r in readers)
    assert collect.group == "judge+grpo" and harvest.group == "harvest-own"
    assert sum(1 for s in plan if s.group == "harvest-own") == 1
    # an arm table without own-states arms plans neither step
    from omnidecision.pipeline.arms import ARMS as TABLE

    plain = build_plan(cfg, tmp_path, tuple(a for a in TABLE if a.name not in ("grpo_own", "rft_own")))
    assert not {"collect-own", "harvest-own"} & {s.name for s in plain}


def test_a_single_arm_runs_replicate_0_only_and_keeps_its_budget_reference(tmp_path):
    cfg = DemoConfig(replicates=3, single=("sft_plus",))
    plan = build_plan(cfg, tmp_path)
    names = {s.name for s in plan}
    assert {"sft_plus.r0", "export-sft_plus.r0", "eval-sft_plus.r0"} <= names
    assert not any(n.startswith(("sft_plus.r1", "sft_plus.r2", "eval-sft_plus.r1", "export-sft_plus.r2"))
                   for n in names)
    assert {s.name for s in plan if s.budget_of and s.arm == "sft_plus"} == {"sft_plus.r0"}
    assert next(s for s in plan if s.name == "sft_plus.r0").budget_of == ("judge-train", "grpo_judge.r0")
    # every other post-SFT arm keeps its three replicates
    for arm in ARMS:
        if arm.replicated and arm.name != "sft_plus":
            assert sum(1 for s in plan if s.name.startswith("eval-") and s.arm == arm.name) == 3, arm.name
