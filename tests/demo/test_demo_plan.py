"""The demo's plan (fast: nothing runs): one project command per step over shipped recipes, overriding only paths,
sizes and seeds; no training stage reads a rule-planner label except the named ceiling arm `oracle_sft`; only the
final evaluations read the test suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from omnidecision.demo import ARMS, CONFIGS, PROVENANCE, DemoConfig, build_plan

# option -> why the demo may set it: a path, a size, a seed, or the switch that defines an arm
PATHS = {"--out", "--tasks.path", "--model_name_or_path", "--dataset_name", "--output_dir", "--data", "--model",
         "--val", "--judge_path", "--judge", "--serve.model", "--validation-from"}
SIZES = {"--n", "--match-steps", "--tasks.limit", "--max_steps", "--max-steps", "--eval_steps", "--save_steps",
         "--max_train_seconds"}
SEEDS = {"--seed", "--backends.default.options.seed"}
ARM_SWITCHES = {"--label", "--dedup", "--name", "--split", "--heads", "--title", "--no-progress"}


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
    steps = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(steps) == len(build_plan(DemoConfig(), tmp_path))
    recipes = set()
    for step in steps:
        argv = step["command"].split()
        assert argv[0] == "omnidecision", step
        opts = _options(argv[1:])
        if "--config" in opts:
            recipe = Path(opts.pop("--config") or "")
            assert recipe.is_file() and recipe.resolve().is_relative_to(CONFIGS.resolve()), step
            recipes.add(recipe.relative_to(CONFIGS).as_posix())
        unknown = set(opts) - PATHS - SIZES - SEEDS - ARM_SWITCHES
        assert not unknown, f"{step['stage']} sets recipe values {unknown} that are not paths, sizes or seeds"
    assert {"collect/synthetic-habits.yaml", "sft/tiny-cpu.yaml", "grpo/tiny-cpu-judge.yaml",
            "eval/synthetic-tiny-vllm.yaml", "eval/synthetic-habits-teacher.yaml"} <= recipes


def test_no_training_stage_reads_a_rule_label_but_oracle_sft(tmp_path):
    plan = build_plan(DemoConfig(), tmp_path)
    by_name = {s.name: s for s in plan}
    oracle = str(tmp_path / "data-oracle")
    # the rule labels exist in one folder, written by the one harvest that asks for them
    rule_harvests = [s for s in plan if "--label" in s.argv and s.argv[s.argv.index("--label") + 1] == "rule"]
    assert [s.name for s in rule_harvests] == ["harvest-oracle"] and rule_harvests[0].writes == [oracle]
    assert by_name["harvest"].argv[by_name["harvest"].argv.index("--label") + 1] == "emitted"
    # every step that reads them is oracle_sft (or its export / evaluation, which read the model)
    readers = [s.name for s in plan if any(r.startswith(oracle) for r in s.reads)]
    assert readers == ["oracle_sft"]
    assert PROVENANCE["oracle_sft"] == "rule"
    assert all(PROVENANCE[a] in ("emitted", "emitted+reward") for a in ARMS if a != "oracle_sft")
    # the models the other arms start from never descend from oracle_sft
    for arm in ARMS:
        if arm != "oracle_sft":
            assert not any("oracle_sft" in r for r in by_name[arm].reads), arm


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
    assert all(names.index(a) < first_eval for a in ARMS)
    # the compute-matched controls train for the post-SFT stages' wall time
    budgeted = {s.name: s.budget_of for s in plan if s.budget_of}
    assert set(budgeted) == {"rft", "sft_plus"} and all("grpo_judge" in b for b in budgeted.values())


def test_steps_side_by_side_are_independent_and_budgets_come_from_earlier_groups(tmp_path):
    plan = build_plan(DemoConfig(), tmp_path)
    position = {s.name: i for i, s in enumerate(plan)}
    groups: dict[str, list] = {}
    for step in plan:
        if step.group:
            groups.setdefault(step.group, []).append(step)
    assert {"sft", "judge+grpo", "grpo+placebo", "controls", "eval"} <= set(groups)
    for name, steps in groups.items():
        idx = [position[s.name] for s in steps]
        assert idx == list(range(idx[0], idx[0] + len(idx))), f"group {name} is not contiguous"
        for a in steps:
            for b in steps:
                if a is not b:  # nothing in a group reads what another step of the same group writes
                    assert not set(a.reads) & set(b.writes), (name, a.name, b.name)
    for step in plan:  # a budget is the wall time of steps that finished before the step starts (another group)
        for other in (*step.budget_of, *step.budget_less):
            assert position[other] < position[step.name]
            assert not step.group or plan[position[other]].group != step.group, (step.name, other)
    # the stages whose wall time is the controls' budget run paired, as the controls do (same threads per stage)
    assert all(len(groups[plan[position[k]].group]) == 2 for k in ("judge-train", "grpo_judge", "rft-select"))
    assert len(groups["controls"]) == 2
