"""`omnidecision demo`: the whole pipeline on a CPU, offline, learning from an imperfect teacher without an oracle.

    omnidecision demo --out runs/demo              # = make demo (one seed)
    omnidecision demo --out runs/demo-q --quick    # a smaller smoke run (tests use it)
    omnidecision demo --dry-run                    # the plan: one project command per line, what it reads/writes
    omnidecision experiment --seeds 0,1,2 --test-tasks 300 --out runs/experiment   # = make experiment

The plan is a flat list of the project's own commands over shipped recipes (`configs/...`); the demo overrides
only paths, sizes (task counts, steps, wall-time budgets) and seeds (tests/demo/test_demo_plan.py checks it). Three
synthetic suites with distinct seeds: TRAIN (collection, training), DEV (validation rows: SFT's best checkpoint and
the judge's AUROC) and TEST (reported; read only by the final evaluations).

1. the teacher with habits (configs/collect/synthetic-habits.yaml: an API planner's systematic failures) collects
   train and dev; `harvest --label emitted` keeps the decisions it made in its judge-correct runs (no rule label);
2. a tiny planner, SFT on those rows (`sft`); `oracle_sft`, the named ceiling arm, the same SFT on rule-planner labels
   of every visited state (`harvest --label rule`), the only rule label in the demo;
3. the learned reward judge (`judge train`: TRL RewardTrainer on what followed each decision in the teacher's runs),
   its AUROC against the closure checks on dev (`judge eval`);
4. GRPO from the SFT planner on the teacher's ledger states: `grpo` (closure checks), `grpo_judge` (checks + judge),
   `grpo_shuffled` (checks + the judge's scores shuffled within each group: the placebo);
5. the controls at grpo_judge's post-SFT compute (judge training + GRPO wall time): `sft_plus` (SFT further on the
   SFT data, best dev-loss checkpoint) and `rft` (best-of-K decisions by the same reward, fine-tuned);
6. every planner served by vLLM in the loop on the test suite; `teacher` (with habits) and `rule` as reference rows;
   paired per-task comparisons of every arm against sft_plus, rft and teacher.

Independent steps run side by side, `--jobs` (2) at a time with the cores shared out (`Step.group`: sft beside
oracle_sft, the post-SFT stages in pairs, the evaluations); `--jobs 1` runs every step alone.
Writes OUT/summary.json, OUT/summary.md, OUT/compare/, OUT/view/ and each evaluation's report with plots.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import typer

logger = logging.getLogger(__name__)

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
ARMS = ("sft", "sft_plus", "rft", "grpo", "grpo_judge", "grpo_shuffled", "oracle_sft")  # served planners
REFERENCES = ("teacher", "rule")
PLANNERS = ("teacher", *ARMS, "rule")
# where each arm's training data comes from: every arm but oracle_sft learns from the teacher's emitted decisions
# in its judge-correct runs, or from rewards that read the ledger (tests/demo/test_demo_plan.py)
PROVENANCE = {
    "sft": "emitted", "sft_plus": "emitted", "rft": "emitted+reward", "grpo": "emitted+reward",
    "grpo_judge": "emitted+reward", "grpo_shuffled": "emitted+reward", "oracle_sft": "rule", "teacher": "-",
    "rule": "-",
}
# a → b pairs of the summary: every arm against the controls and the teacher, and the judge's placebo
BASELINES = ("sft_plus", "rft", "teacher")


def pairs() -> list[tuple[str, str]]:
    out = [(a, b) for a in BASELINES for b in ARMS if b != a]
    # and against their common start: a control that drifts below SFT would flatter every arm compared with it
    return out + [("grpo_shuffled", "grpo_judge"), ("grpo", "grpo_judge"), ("sft", "grpo"), ("sft", "grpo_judge"),
                  ("sft", "rft"), ("sft", "oracle_sft")]


@dataclass
class DemoConfig:
    """The embedded default (sizes, steps, seed). `quick` shrinks it for a smoke test."""

    train_tasks: int = 240
    dev_tasks: int = 30
    test_tasks: int = 60  # the most that keeps make demo within 15 min on 2 cores; `experiment` runs 300 per seed
    sft_steps: int = 1200  # from-scratch SFT budget (sft and oracle_sft); the best dev-loss checkpoint is kept
    sft_eval_steps: int = 250
    judge_steps: int = 150
    grpo_steps: int = 30
    seed: int = 0

    @classmethod
    def quick(cls) -> DemoConfig:
        # 150 SFT steps: the fewest after which the tiny planner writes well-formed actions (rft-select needs some)
        return cls(train_tasks=40, dev_tasks=8, test_tasks=8, sft_steps=150, sft_eval_steps=50, judge_steps=4,
                   grpo_steps=2)


@dataclass
class Step:
    """One command of the plan. `budget_of`: the command's `{budget}` is the summed wall time of those steps, less
    that of `budget_less` (a compute-matched control trains for what the stage it controls took)."""

    name: str
    argv: list[str]
    reads: list[str]
    writes: list[str]
    budget_of: tuple[str, ...] = ()
    budget_less: tuple[str, ...] = ()
    # runs beside the steps next to it with the same group (--jobs at a time, the cores shared out between them):
    # independent steps. The final evaluations (mostly the single-threaded start of a vLLM server); sft beside
    # oracle_sft; the post-SFT stages in pairs, so every stage whose wall time is a budget ran as its controls do
    group: str = ""

    def line(self) -> str:
        return " ".join(["omnidecision", *self.argv])


def _recipe(*parts: str) -> str:
    return str(CONFIGS.joinpath(*parts))


def build_plan(cfg: DemoConfig, out: Path) -> list[Step]:
    """The demo as a list of commands (no state, no closures): what --dry-run prints and `run_plan` executes."""
    o = str(out)
    seeds = {"train": cfg.seed, "dev": cfg.seed + 1000, "test": cfg.seed + 2000}
    sizes = {"train": cfg.train_tasks, "dev": cfg.dev_tasks, "test": cfg.test_tasks}
    s = str(cfg.seed)
    plan: list[Step] = []

    def add(name: str, argv: list[str], reads: list[str], writes: list[str], **kw: Any) -> None:
        plan.append(Step(name, argv, reads, writes, **kw))

    # 1. suites, the teacher's collections, the harvests (emitted labels; rule labels only for oracle_sft)
    for split in ("train", "dev", "test"):
        add(f"synth-{split}", ["tasks", "synth", "--n", str(sizes[split]), "--seed", str(seeds[split]),
                               "--out", f"{o}/tasks-{split}"], [], [f"{o}/tasks-{split}"])
    for split in ("train", "dev"):
        add(f"collect-{split}", ["collect", "--config", _recipe("collect", "synthetic-habits.yaml"),
                                 "--tasks.path", f"{o}/tasks-{split}", "--out", f"{o}/collect-{split}",
                                 "--backends.default.options.seed", s, "--no-progress"],
            [f"{o}/tasks-{split}"], [f"{o}/collect-{split}"])
    runs = [f"{o}/collect-train", f"{o}/collect-dev"]
    add("harvest", ["harvest", *runs, "--validation-from", f"{o}/collect-dev", "--label", "emitted",
                    "--out", f"{o}/data"], runs, [f"{o}/data"])
    add("harvest-oracle", ["harvest", *runs, "--validation-from", f"{o}/collect-dev", "--label", "rule",
                           "--dedup", "--out", f"{o}/data-oracle"], runs, [f"{o}/data-oracle"])

    # 2. tiny planner; SFT on the emitted rows, and the oracle ceiling on rule labels (same model, same steps)
    m = f"{o}/models"
    add("tiny-planner", ["tiny-planner", "--out", f"{m}/untrained", "--data", f"{o}/data/sft", "--heads", "2"],
        [f"{o}/data/sft"], [f"{m}/untrained"])
    # sft and oracle_sft side by side, one thread each: the 0.2 M-parameter model gains little from a second thread
    # (docs/findings.md), and neither's wall time sets a budget (they are step-matched, not time-matched)
    sft_arms = (("sft", f"{o}/data/sft"), ("oracle_sft", f"{o}/data-oracle/sft"))
    for arm, data in sft_arms:
        add(arm, ["sft", "--config", _recipe("sft", "tiny-cpu.yaml"), "--model_name_or_path", f"{m}/untrained",
                  "--dataset_name", data, "--output_dir", f"{m}/{arm}-run", "--max_steps", str(cfg.sft_steps),
                  "--eval_steps", str(cfg.sft_eval_steps), "--save_steps", str(cfg.sft_eval_steps), "--seed", s],
            [f"{m}/untrained", data], [f"{m}/{arm}-run"], group="sft")
    for arm, _ in sft_arms:
        add(f"export-{arm}", ["export", f"{m}/{arm}-run", "--out", f"{m}/{arm}"], [f"{m}/{arm}-run"], [f"{m}/{arm}"],
            group="export-sft")

    # 3-5. post-SFT, in pairs side by side with one thread each (--jobs 2; --jobs 1: one after another, all threads):
    # every stage runs under the same conditions, so the controls' wall-time budget buys them what it bought
    # grpo_judge. The learned judge (on the teacher's (state, decision, what followed) rows) beside `grpo`, which
    # needs no judge; the judge's AUROC on dev beside rft-select; grpo_judge beside its placebo; the two controls.
    add("judge-train", ["judge", "train", "--data", f"{o}/data/rl", "--model", f"{m}/sft", "--out", f"{m}/judge",
                        "--max-steps", str(cfg.judge_steps), "--seed", s],
        [f"{o}/data/rl", f"{m}/sft"], [f"{m}/judge"], group="judge+grpo")
    grpo = {"grpo": "tiny-cpu.yaml", "grpo_judge": "tiny-cpu-judge.yaml",
            "grpo_shuffled": "tiny-cpu-judge-shuffled.yaml"}

    def grpo_arm(arm: str, group: str) -> None:
        judge = [] if arm == "grpo" else ["--judge_path", f"{m}/judge"]
        add(arm, ["grpo", "--config", _recipe("grpo", grpo[arm]), "--model_name_or_path", f"{m}/sft",
                  "--dataset_name", f"{o}/data/rl", "--output_dir", f"{m}/{arm}-run", "--max_steps",
                  str(cfg.grpo_steps), "--seed", s, *judge],
            [f"{m}/sft", f"{o}/data/rl"] + ([] if arm == "grpo" else [f"{m}/judge"]), [f"{m}/{arm}-run"],
            group=group)

    grpo_arm("grpo", "judge+grpo")
    add("judge-eval", ["judge", "eval", "--data", f"{o}/data/rl", "--split", "validation", "--judge", f"{m}/judge",
                       "--out", f"{o}/judge_eval.json"], [f"{o}/data/rl", f"{m}/judge"], [f"{o}/judge_eval.json"],
        group="select")
    # rft's selection: K samples on as many states as GRPO's steps consume, best by grpo_judge's reward
    add("rft-select", ["rft-select", "--config", _recipe("grpo", "tiny-cpu-judge.yaml"), "--model", f"{m}/sft",
                       "--data", f"{o}/data/rl", "--val", f"{o}/data/sft", "--out", f"{o}/data-rft", "--seed", s,
                       "--judge_path", f"{m}/judge", "--match-steps", str(cfg.grpo_steps)],
        [f"{m}/sft", f"{o}/data/rl", f"{m}/judge"], [f"{o}/data-rft"], group="select")
    grpo_arm("grpo_judge", "grpo+placebo")
    grpo_arm("grpo_shuffled", "grpo+placebo")
    for arm in grpo:
        add(f"export-{arm}", ["export", f"{m}/{arm}-run", "--out", f"{m}/{arm}"], [f"{m}/{arm}-run"], [f"{m}/{arm}"],
            group="export-grpo")

    # the controls at grpo_judge's post-SFT compute (judge training + GRPO; rft's selection counts against it)
    spent = ("judge-train", "grpo_judge")
    controls = (("rft", f"{o}/data-rft", ("rft-select",)), ("sft_plus", f"{o}/data/sft", ()))
    for arm, data, less in controls:
        add(arm, ["sft", "--config", _recipe("sft", "tiny-cpu-continue.yaml"), "--model_name_or_path", f"{m}/sft",
                  "--dataset_name", data, "--output_dir", f"{m}/{arm}-run", "--max_train_seconds", "{budget}",
                  "--seed", s], [f"{m}/sft", data], [f"{m}/{arm}-run"], budget_of=spent, budget_less=less,
            group="controls")
    for arm, _, _ in controls:
        add(f"export-{arm}", ["export", f"{m}/{arm}-run", "--out", f"{m}/{arm}"], [f"{m}/{arm}-run"], [f"{m}/{arm}"],
            group="export-controls")

    # 6. in the loop on the test suite: every planner served by vLLM; the teacher and the rule planner as references
    test = f"{o}/tasks-test"
    for arm in ARMS:
        add(f"eval-{arm}", ["eval", "--config", _recipe("eval", "synthetic-tiny-vllm.yaml"), "--name", arm,
                            "--tasks.path", test, "--tasks.limit", str(cfg.test_tasks), "--serve.model", f"{m}/{arm}",
                            "--out", f"{o}/eval/{arm}/test", "--no-progress"],
            [f"{m}/{arm}", test], [f"{o}/eval/{arm}/test"], group="eval")
    for ref, recipe in (("teacher", "synthetic-habits-teacher.yaml"), ("rule", "synthetic-rule.yaml")):
        add(f"eval-{ref}", ["eval", "--config", _recipe("eval", recipe), "--tasks.path", test,
                            "--backends.default.options.seed", s, "--out", f"{o}/eval/{ref}/test", "--no-progress"],
            [test], [f"{o}/eval/{ref}/test"], group="eval")
    reports = [f"{o}/eval/{p}/test" for p in PLANNERS]
    add("compare", ["compare", *reports, "--out", f"{o}/compare", "--title", "Test suite: planners in the loop"],
        reports, [f"{o}/compare"])
    add("view", ["view", *reports, "--out", f"{o}/view"], reports, [f"{o}/view"])
    return plan


# ---- running the plan --------------------------------------------------------------------------------------------
class Runner:
    """Runs the plan's commands, streams their output into the console and OUT/demo.log, records wall times."""

    def __init__(self, out: Path) -> None:
        self.out, self.times = out, {}
        self.log = out / "demo.log"
        self.lock = threading.Lock()
        self.threads = 1
        self.slots: queue.Queue[int] = queue.Queue()
        self.cores = sorted(os.sched_getaffinity(0))  # the cores this process may use (a cluster job's share)

    def budget(self, step: Step) -> str:
        seconds = sum(self.times.get(k, 0.0) for k in step.budget_of) - sum(self.times.get(k, 0.0)
                                                                           for k in step.budget_less)
        return f"{max(seconds, 1.0):.1f}"

    def execute(self, step: Step, quiet: bool = False) -> None:
        """Run one step; `quiet` (beside other steps, in a job slot): its output goes to OUT/logs/STEP.log, then
        into demo.log."""
        argv = [self.budget(step) if a == "{budget}" else a for a in step.argv]
        cmd = [sys.executable, "-m", "omnidecision.cli", *argv]
        print(f"\n=== [{step.name}] omnidecision {' '.join(argv)}", flush=True)
        t0 = time.perf_counter()
        own = self.out / "logs" / f"{step.name}.log"
        if quiet:
            own.parent.mkdir(exist_ok=True)
        with (own if quiet else self.log).open("wb" if quiet else "ab") as log:
            log.write(f"\n=== [{step.name}] {' '.join(cmd)}\n".encode())
            log.flush()
            env = os.environ.copy()
            slot = self.slots.get() if quiet else None
            if slot is not None:  # beside other steps: each job slot has its own cores (a user's own setting wins)
                env.setdefault("OMP_NUM_THREADS", str(self.threads))
                cores = self.cores[slot * self.threads:(slot + 1) * self.threads]
                if cores:
                    # vLLM's CPU worker pins its threads; left to itself every server pins the same core and two
                    # evaluations side by side fight over it (measured: docs/findings.md, "Demo wall time on 2 cores")
                    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))
            try:
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                assert proc.stdout is not None
                for chunk in iter(lambda: proc.stdout.read1(4096), b""):  # type: ignore[union-attr]
                    log.write(chunk)
                    if not quiet:
                        sys.stdout.buffer.write(chunk)
                        sys.stdout.flush()
                code = proc.wait()
            finally:
                if slot is not None:
                    self.slots.put(slot)
        if quiet:
            with self.lock, self.log.open("ab") as log:
                log.write(own.read_bytes())
        if code != 0:
            where = own if quiet else self.log
            raise typer.Exit(f"demo step {step.name!r} failed (exit {code}); see {where}") from None
        self.times[step.name] = round(time.perf_counter() - t0, 1)
        print(f"=== [{step.name}] done in {self.times[step.name]:.1f}s", flush=True)

    def execute_group(self, steps: list[Step], jobs: int) -> None:
        """Run independent steps `jobs` at a time; the first failure stops the demo after the others finish."""
        if jobs <= 1 or len(steps) == 1:
            for step in steps:
                self.execute(step)
            return
        self.threads = max(1, len(self.cores) // jobs)
        self.slots = queue.Queue()
        for slot in range(jobs):
            self.slots.put(slot)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(self.execute, step, True) for step in steps]
        for future in futures:
            future.result()  # re-raises the first failure (its log named)


def run_plan(plan: list[Step], out: Path, jobs: int = 2) -> dict[str, float]:
    out.mkdir(parents=True, exist_ok=True)
    # OMP_WAIT_POLICY=PASSIVE: on a busy 2-core machine torch's spinning OpenMP threads lose most of their time
    # (docs/findings.md, "OpenMP"); every stage inherits it, a user's own setting wins
    for var, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("WANDB_MODE", "offline"),
                       ("OMP_WAIT_POLICY", "PASSIVE")):
        os.environ.setdefault(var, value)
    runner = Runner(out)
    times_file = out / "stage_wall_s.json"
    # a restarted demo keeps the steps it finished (their wall time recorded, their outputs there) and runs the rest
    done = _read(times_file) if times_file.exists() else {}
    todo: list[Step] = []
    for step in plan:
        if step.name in done and all(Path(w).exists() for w in step.writes):
            runner.times[step.name] = done[step.name]
            print(f"=== [{step.name}] finished in an earlier run ({done[step.name]:.1f}s): kept", flush=True)
        else:
            todo.append(step)
    kept = {s.name for s in plan if s.name in runner.times}
    for key, value in done.items():  # a group that finished whole keeps its wall time (the total counts it once)
        members = {s.name for s in plan if s.group == key.removeprefix("group:")}
        if key.startswith("group:") and members and members <= kept:
            runner.times[key] = value
    # consecutive steps of one group run side by side; a step without a group runs alone, in plan order
    groups: list[list[Step]] = []
    for step in todo:
        if step.group and groups and groups[-1][-1].group == step.group:
            groups[-1].append(step)
        else:
            groups.append([step])
    for group in groups:
        t0 = time.perf_counter()
        try:
            runner.execute_group(group, jobs)
        finally:  # what finished is kept for a restart, also when a step beside it failed
            times_file.write_text(json.dumps(runner.times, indent=2), "utf-8")
        if len(group) > 1 and jobs > 1:
            runner.times[f"group:{group[0].group}"] = round(time.perf_counter() - t0, 1)
            times_file.write_text(json.dumps(runner.times, indent=2), "utf-8")
    return runner.times


# ---- the summary: read from the files the commands wrote --------------------------------------------------------
def total_wall(plan: list[Step], times: dict[str, float]) -> float:
    """The plan's wall time: steps that ran beside others count through their group's wall time (`group:NAME`),
    not one by one (with --jobs 1 no group is recorded and each step counts)."""
    ran = {k.removeprefix("group:") for k in times if k.startswith("group:")}
    beside = {s.name for s in plan if s.group in ran}
    return round(sum(v for k, v in times.items() if k not in beside), 1)


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8"))


def summarise(out: Path, cfg: DemoConfig, times: dict[str, float]) -> dict[str, Any]:
    from omnidecision.eval.compare import task_correct
    from omnidecision.stats import paired_in_loop

    planners: dict[str, Any] = {}
    for name in PLANNERS:
        rep = _read(out / "eval" / name / "test" / "report.json")
        planners[name] = {
            "accuracy": rep["accuracy"], "ci95": rep["ci95"], "n": rep["n"], "outcomes": rep["outcomes"],
            "invalid_action_rate": rep.get("invalid_action_rate"), "data": PROVENANCE[name],
            "report": f"eval/{name}/test/report.json",  # relative to the demo folder (no machine path)
            "by_family": {f: {"n": v["n"], "accuracy": v["accuracy"]} for f, v in rep.get("by_category", {}).items()},
            # why the wrong runs failed (eval.attribution's categories, the ones that occurred)
            "attribution": {k: v for k, v in (rep.get("attribution") or {}).items() if v},
        }
    correct = {n: task_correct(out / "eval" / n / "test") for n in PLANNERS}
    harvest = _read(out / "data" / "stats.json")
    summary = {
        "seed": cfg.seed, "config": asdict(cfg), "planners": planners,
        "paired_in_loop": [paired_in_loop(correct[a], correct[b], (a, b)) for a, b in pairs()],
        # the judge's figures without the machine path of the data folder (summaries are committed as results)
        "judge_eval": {k: v for k, v in _read(out / "judge_eval.json").items() if k != "data"},
        "harvest": {"runs": harvest["runs"], "correct_runs": harvest["correct_runs"], "sft_rows": harvest["sft"],
                    "rl_rows": harvest["rl"]},
        "post_sft_budget_s": round(sum(times.get(k, 0.0) for k in ("judge-train", "grpo_judge")), 1),
        "stage_wall_s": times, "total_wall_s": total_wall(build_plan(cfg, out), times),
        "protocol": "train/dev/test suites with distinct seeds; every arm but oracle_sft learns from the teacher's "
                    "emitted decisions in its judge-correct runs (or from rewards over the ledger); sft_plus and rft "
                    "train for grpo_judge's post-SFT wall time; the table reports test",
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2), "utf-8")
    return summary


def _paired_rows(paired: list[dict[str, Any]]) -> list[str]:
    rows = ["| a | b | n | a only | b only | Δ (b − a) | 95% CI | p |", "|---|---|---|---|---|---|---|---|"]
    for p in paired:
        rows.append(f"| {p['a']} | {p['b']} | {p['n']} | {p['a_only']} | {p['b_only']} | {p['delta']:+.3f} | "
                    f"[{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] | {p['p_value']:.3g} |")
    return rows


def table(summary: dict[str, Any]) -> str:
    rows = ["| planner | trained on | test accuracy | 95% CI | n | outcomes | invalid-action rate |",
            "|---|---|---|---|---|---|---|"]
    for name in PLANNERS:
        p = summary["planners"][name]
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(p["outcomes"].items()) if v)
        invalid = "–" if p["invalid_action_rate"] is None else f"{p['invalid_action_rate']:.3f}"
        rows.append(f"| {name} | {p['data']} | {p['accuracy']:.3f} | [{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}] | "
                    f"{p['n']} | {outcomes} | {invalid} |")
    rows += ["", "Paired on the test tasks (exact McNemar; paired bootstrap 95% CI of b − a):", "",
             *_paired_rows(summary["paired_in_loop"])]
    families = sorted({f for p in summary["planners"].values() for f in p.get("by_family", {})})
    rows += ["", "Test accuracy per synthetic family (n tasks):", "",
             "| family | n | " + " | ".join(PLANNERS) + " |", "|---|---|" + "---|" * len(PLANNERS)]
    for f in families:
        fam = {n: summary["planners"][n].get("by_family", {}).get(f) for n in PLANNERS}
        n = next((v["n"] for v in fam.values() if v), 0)
        rows.append(f"| {f} | {n} | " + " | ".join("–" if v is None or v["accuracy"] is None
                                                  else f"{v['accuracy']:.2f}" for v in fam.values()) + " |")
    j = summary["judge_eval"]
    rows += ["", f"Learned judge on dev decisions (n {j['n']}, {j['positive']} moved the ledger): AUROC judge "
                 f"{j.get('auroc_judge')}, closure checks alone {j.get('auroc_closure')}, both "
                 f"{j.get('auroc_closure_plus_judge')}."]
    times = ", ".join(f"{k} {v:.0f}s" for k, v in summary["stage_wall_s"].items())
    total = summary["total_wall_s"]
    return ("\n".join(rows) + f"\n\nPost-SFT budget of the controls (judge training + grpo_judge): "
            f"{summary['post_sft_budget_s']:.0f}s.\nStage wall times: {times} (total {total:.0f}s)\n")


def demo(
    out: Path = typer.Option(Path("runs/demo"), help="output folder (everything the demo makes goes here)"),
    quick: bool = typer.Option(False, help="a small smoke run instead of the embedded default"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan (one command per line) and stop"),
    seed: int = typer.Option(0, help="seed of the suites, the teacher's draws and every training stage"),
    test_tasks: int | None = typer.Option(None, help="test suite size (default 60; quick 8)"),
    sft_steps: int | None = typer.Option(None, help="override the SFT step budget"),
    grpo_steps: int | None = typer.Option(None, help="override the GRPO steps"),
    jobs: int = typer.Option(2, min=1, help="independent steps (sft and oracle_sft; the final evaluations) run this "
                                             "many at a time, sharing the cores (1: one after another)"),
) -> None:
    """synth → collect (teacher with habits) → harvest → SFT → judge → GRPO arms → controls → eval, on CPU, offline."""
    cfg = DemoConfig.quick() if quick else DemoConfig()
    cfg.seed = seed
    cfg.test_tasks = test_tasks or cfg.test_tasks
    cfg.sft_steps = sft_steps or cfg.sft_steps
    cfg.grpo_steps = grpo_steps or cfg.grpo_steps
    out = out.resolve()
    plan = build_plan(cfg, out)
    if dry_run:
        for step in plan:
            print(json.dumps({"stage": step.name, "command": step.line(), "reads": step.reads,
                              "writes": step.writes, "budget_of": list(step.budget_of),
                              "group": step.group}))
        return
    times = run_plan(plan, out, jobs)
    summary = summarise(out, cfg, times)
    text = table(summary) + ("\nEvery test-suite run of every planner, step by step (offline HTML): "
                             "[view/index.html](view/index.html)\n")
    (out / "summary.md").write_text("# omnidecision demo\n\n" + text, "utf-8")
    print("\n" + text)
    print(f"summary: {out / 'summary.json'}; reports and plots under {out / 'eval'}/*/")


# ---- several seeds: the experiment --------------------------------------------------------------------------------
def pool(summaries: list[dict[str, Any]], folders: list[Path]) -> dict[str, Any]:
    """Per-seed accuracies and the pooled paired comparisons over every (seed, task) unit."""
    from omnidecision.eval.compare import task_correct
    from omnidecision.stats import paired_in_loop

    correct: dict[str, dict[str, float]] = {n: {} for n in PLANNERS}
    for s, folder in zip(summaries, folders, strict=True):
        for n in PLANNERS:
            correct[n].update({f"{s['seed']}:{t}": c for t, c in task_correct(folder / "eval" / n / "test").items()})
    per_seed = {n: [s["planners"][n]["accuracy"] for s in summaries] for n in PLANNERS}
    pooled = {n: round(sum(correct[n].values()) / len(correct[n]), 4) if correct[n] else None for n in PLANNERS}
    families: dict[str, dict[str, Any]] = {}
    for s in summaries:
        for n in PLANNERS:
            for f, v in s["planners"][n].get("by_family", {}).items():
                cell = families.setdefault(f, {}).setdefault(n, {"n": 0, "correct": 0.0})
                cell["n"] += v["n"]
                cell["correct"] += (v["accuracy"] or 0.0) * v["n"]
    by_family = {f: {n: round(c["correct"] / c["n"], 4) if c["n"] else None for n, c in cells.items()}
                 | {"n": max(c["n"] for c in cells.values())} for f, cells in sorted(families.items())}
    return {
        "seeds": [s["seed"] for s in summaries], "per_seed_accuracy": per_seed, "pooled_accuracy": pooled,
        "pooled_by_family": by_family,
        "pooled_n": {n: len(correct[n]) for n in PLANNERS},
        "pooled_paired": [paired_in_loop(correct[a], correct[b], (a, b)) for a, b in pairs()],
        "per_seed_paired": {str(s["seed"]): s["paired_in_loop"] for s in summaries},
        "judge_eval": [s["judge_eval"] for s in summaries],
        "wall_s": [s["total_wall_s"] for s in summaries],
    }


def experiment(
    out: Path = typer.Option(Path("runs/experiment"), help="one demo folder per seed goes under it"),
    seeds: str = typer.Option("0,1,2", help="comma-separated seeds"),
    test_tasks: int = typer.Option(300, help="test suite size per seed"),
    sft_steps: int = typer.Option(2000, help="SFT steps per seed (sft and oracle_sft)"),
    judge_steps: int = typer.Option(200, help="reward-judge training steps per seed"),
    results: Path | None = typer.Option(None, help="also write the pooled result here (e.g. "
                                                   "docs/results/experiment.json)"),
    jobs: int = typer.Option(2, min=1, help="independent steps (sft and oracle_sft; the final evaluations) run this "
                                             "many at a time, sharing the cores (1: one after another)"),
) -> None:
    """The demo's protocol over several seeds, pooled: per-seed and pooled accuracy, paired deltas with CI and p."""
    summaries, folders = [], []
    for seed in [int(x) for x in seeds.split(",") if x.strip()]:
        folder = (out / f"seed-{seed}").resolve()
        cfg = DemoConfig(seed=seed, test_tasks=test_tasks, sft_steps=sft_steps, judge_steps=judge_steps)
        if (folder / "summary.json").exists():  # a restarted experiment keeps the seeds it finished (and summarises
            # them again from their files, so the figures follow the current report and statistics code)
            summaries.append(summarise(folder, cfg, _read(folder / "stage_wall_s.json")))
        else:
            times = run_plan(build_plan(cfg, folder), folder, jobs)
            summaries.append(summarise(folder, cfg, times))
        folders.append(folder)
    pooled = pool(summaries, folders)
    pooled["test_tasks_per_seed"] = test_tasks
    text = json.dumps(pooled, indent=2)
    (out / "experiment.json").write_text(text, "utf-8")
    if results is not None:
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(text, "utf-8")
    print(experiment_table(pooled))


def experiment_table(pooled: dict[str, Any]) -> str:
    rows = ["| planner | " + " | ".join(f"seed {s}" for s in pooled["seeds"]) + " | pooled | n |",
            "|---|" + "---|" * (len(pooled["seeds"]) + 2)]
    for n in PLANNERS:
        accs = " | ".join("–" if a is None else f"{a:.3f}" for a in pooled["per_seed_accuracy"][n])
        rows.append(f"| {n} | {accs} | {pooled['pooled_accuracy'][n]:.3f} | {pooled['pooled_n'][n]} |")
    rows += ["", "Pooled over seeds, paired per (seed, task):", "", *_paired_rows(pooled["pooled_paired"])]
    rows += ["", "Pooled test accuracy per synthetic family (n tasks over all seeds):", "",
             "| family | n | " + " | ".join(PLANNERS) + " |", "|---|---|" + "---|" * len(PLANNERS)]
    for f, cells in pooled.get("pooled_by_family", {}).items():
        rows.append(f"| {f} | {cells['n']} | " + " | ".join("–" if cells.get(n) is None else f"{cells[n]:.2f}"
                                                          for n in PLANNERS) + " |")
    return "\n".join(rows) + "\n"
