"""Every command of the cluster docs resolves: docs/cluster-workflow.md and its step pages (docs/cluster/), the
README's cluster quick start and the CPU walk-through of docs/getting-started.md.

Each ```bash block runs in bash as written (loops, variables, `export`, `cd`), in a scratch project that holds
small local stand-ins at the paths the docs name (a harvested SFT/RL dataset, a tiny Qwen3 and LoRA adapters over
it, an OmniGAIA file). The programs the docs call (`omnidecision`, `sbatch`, and the set-up's `git`, `python`,
`pip`) are recording shims there; then each recorded call is replayed for real:
- `omnidecision sft|grpo|serve|collect|eval|ablate ...` with `--dry-run` (in process): exit 0, no failed check;
- `sbatch SCRIPT ...` as `bash SCRIPT ... --dry-run` (the script's own pre-flight, outside SLURM): exit 0;
- every other `omnidecision` command (harvest, export, replay, compare, collect merge, tasks) is parsed by the CLI.
A command written inside a comment is an error: alternatives are commands of their own.

    .venv/bin/pytest tests/cluster/test_docs_commands.py -q
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("trl")  # skips without it; fails under CI=true (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
# the cluster guide: its first page (set-up) and its steps, one page each, read in order as one shell session
CLUSTER_PAGES = ["cluster-workflow.md", "cluster/collect.md", "cluster/train.md", "cluster/serve.md",
                 "cluster/evaluate.md"]
DOCS_TEXT = "\n".join((ROOT / "docs" / page).read_text("utf-8") for page in CLUSTER_PAGES)
DRY_RUN_COMMANDS = {"sft", "grpo", "serve", "collect", "eval", "ablate"}
SETUP_PROGRAMS = {"git", "python", "pip"}
RECORDED_ENV = ("OD_", "OPENAI_", "WANDB_", "HF_")
# a documented command hidden in a comment (an alternative must be a command of its own)
COMMENTED_COMMAND = re.compile(r"#[^`]*?(\bomnidecision [a-z]|\bsbatch |\baccelerate launch|scripts/\S+\.(sh|slurm))")


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


README_QUICK_START = "## Cluster quick start"
README_MAX_LINES, QUICK_START_BY_LINE = 250, 120  # the front door's limits (issue 56)
QUICK_START_STAGES = ("collect", "harvest", "sft", "grpo", "export", "serve", "eval")


def readme_cluster_section() -> str:
    text = (ROOT / "README.md").read_text("utf-8")
    start = text.index(README_QUICK_START)
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


SOURCES = {"docs/cluster-workflow.md": DOCS_TEXT, "README cluster section": readme_cluster_section(),
           "docs/getting-started.md": (ROOT / "docs" / "getting-started.md").read_text("utf-8")}


def test_readme_is_short_and_starts_the_cluster_quick_start_early():
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    heading = next(i for i, line in enumerate(lines, 1) if line.startswith(README_QUICK_START))
    assert heading <= QUICK_START_BY_LINE, f"the cluster quick start begins at line {heading}"
    blocks = bash_blocks(readme_cluster_section())
    assert len(blocks) == 1, "the quick start is one copy-pasteable block"

_RECORDER = """#!{python}
import json, os, sys, time
env = {{k: v for k, v in os.environ.items() if k.startswith({prefixes!r})}}
name = os.path.join(os.environ["OD_RECORD_DIR"], f"{{time.time_ns()}}-{{os.getpid()}}.json")
with open(name, "w") as fh:
    json.dump({{"prog": os.path.basename(sys.argv[0]), "cwd": os.getcwd(), "args": sys.argv[1:], "env": env}}, fh)
"""


def _tiny_models(project: Path) -> None:
    """A tiny Qwen3 (full model folders) and LoRA adapters over it, at the paths the docs name."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    base = build_tiny_planner(project / "runs" / "tiny-base", texts=list(default_corpus(n=50)), hidden=32,
                              layers=1, heads=2, vocab_size=512)
    for name in ("runs/export/qwen3-8b-sft", "runs/export/qwen3-8b-grpo"):
        shutil.copytree(base, project / name)
    lora = get_peft_model(AutoModelForCausalLM.from_pretrained(str(base)),
                          LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    for name in ("runs/sft/qwen3-8b-lora", "runs/grpo/qwen3-8b-lora", "runs/export/grpo-adapter"):
        lora.save_pretrained(project / name)
    # the exported adapter the docs serve on Qwen/Qwen3-8B records that base, as the real one does (serving checks it)
    config = project / "runs/export/grpo-adapter/adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "base_model_name_or_path": "Qwen/Qwen3-8B"}))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The scratch project the docs' commands run in (paths relative to it, as in the docs)."""
    from omnidecision.rl.data import write_rl_dataset
    from omnidecision.synthetic.states import write_sft_dataset
    from omnidecision.tasks.folds import write_folds
    from omnidecision.tasks.synth import write_suite

    work = tmp_path_factory.mktemp("docs-commands")
    project = work / "project"
    project.mkdir()
    for name in ("configs", "scripts"):
        (project / name).symlink_to(ROOT / name)
    (project / "tests").mkdir()
    (project / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    (work / "clone").mkdir()
    (work / "clone" / "omnidecision").symlink_to(project)  # `git clone ... omnidecision && cd omnidecision`
    write_sft_dataset(project / "data" / "harvest" / "sft", n_train=8, n_validation=4, seed=0)
    write_rl_dataset(project / "data" / "harvest", n_train=8, n_validation=4, seed=0)
    write_rl_dataset(project / "data" / "own-states", n_train=8, n_validation=4, seed=1)  # `harvest --label none`
    (project / "data" / "omnigaia" / "media").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "omnigaia_dev" / "dev_metadata.json",
                project / "data" / "omnigaia" / "test_metadata.json")
    # what `omnidecision tasks split data/omnigaia/test_metadata.json --folds 5 --seed 0 --out ...` writes
    write_folds(project / "data" / "omnigaia" / "test_metadata.json", "auto", 5, 0,
                project / "data" / "omnigaia" / "folds")
    (project / "runs" / "collect").mkdir(parents=True)
    write_suite(6, 0, project / "runs" / "synth")  # what `omnidecision tasks synth --out runs/synth` writes
    _tiny_models(project)
    # the getting-started page's CPU walk-through: its tiny planner at each stage, and its held-out test suite
    for name in ("runs/tiny", "runs/tiny-sft", "runs/tiny-grpo", "runs/tiny-export"):
        shutil.copytree(project / "runs" / "tiny-base", project / name)
    write_suite(6, 1, project / "runs" / "synth-eval")
    return project


def _shims(folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shim = folder / name
        shim.write_text(_RECORDER.format(python=sys.executable, prefixes=RECORDED_ENV))
        shim.chmod(0o755)


def record(block: str, cwd: Path, record_dir: Path, project: Path) -> list[dict]:
    """Run a docs block in bash with recording shims; the calls it made, in order."""
    record_dir.mkdir(parents=True, exist_ok=True)
    shims = record_dir.parent / "shims"
    _shims(shims, ["omnidecision", "sbatch", "git", "python", "pip"])
    _shims(project / ".venv" / "bin", ["omnidecision", "pip"])  # after `export PATH=$PWD/.venv/bin:$PATH`
    env = {k: v for k, v in os.environ.items() if not k.startswith(RECORDED_ENV)}
    env.update(PATH=f"{shims}:{env['PATH']}", OD_RECORD_DIR=str(record_dir),
               OMNIDECISION_REPO="https://example.invalid/omnidecision.git", OMNIDECISION=str(shims / "omnidecision"))
    res = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, f"bash failed on the block:\n{block}\n{res.stderr[-2000:]}"
    calls = [json.loads(f.read_text()) for f in sorted(record_dir.glob("*.json"))]
    for f in record_dir.glob("*.json"):
        f.unlink()
    return calls


def _parse_only(args: list[str]) -> None:
    """The CLI parses the command line (options, arguments, types) without running the command. Groups are told by
    their `commands` (Typer carries its own copy of click, so `click.Group` is not their class)."""
    import typer.main

    from omnidecision.cli import app

    cmd = typer.main.get_command(app)
    rest, name = list(args), "omnidecision"
    while isinstance(getattr(cmd, "commands", None), dict) and rest and rest[0] in cmd.commands:
        name, rest = rest[0], rest[1:]
        cmd = cmd.commands[name]
    assert not isinstance(getattr(cmd, "commands", None), dict) or not rest or rest[0].startswith("-"), \
        f"unknown command {rest[0]!r} in {args}"
    cmd.make_context(name, rest)  # raises on an unknown option, a missing argument or a bad value


def _dry_run(call: dict, monkeypatch) -> dict:
    from typer.testing import CliRunner

    from omnidecision.cli import app

    monkeypatch.chdir(call["cwd"])
    res = CliRunner().invoke(app, [*call["args"], "--dry-run"], env=call["env"])
    assert "{" in res.stdout, f"omnidecision {' '.join(call['args'])} --dry-run printed no report:\n" \
                              f"{res.output[-3000:]}"
    report = json.loads(res.stdout[res.stdout.index("{"):])
    # a live environment's endpoints and media files are on the cluster, not here: the documented dry run is there
    # to name them when they are missing; what must resolve is the recipe, the tasks and everything else
    failed = [c for c in report["checks"] if c["status"] == "error" and c["what"] != "environment"]
    assert not failed, f"omnidecision {' '.join(call['args'])}: failed checks {failed}"
    missing_live = [c for c in report["checks"] if c["status"] == "error" and c["what"] == "environment"]
    assert res.exit_code == (2 if missing_live else 0), \
        f"omnidecision {' '.join(call['args'])} --dry-run exited {res.exit_code}:\n{res.output[-3000:]}"
    return report


def _sbatch_dry_run(call: dict, cli_dir: Path) -> str:
    args = call["args"]
    script = next(i for i, a in enumerate(args) if a.endswith(".slurm"))
    options = args[:script]
    nodes = options[options.index("--nodes") + 1] if "--nodes" in options else "1"
    cli_dir.mkdir(parents=True, exist_ok=True)
    cli = cli_dir / "omnidecision"
    cli.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'from omnidecision.cli import app; app()' \"$@\"\n")
    cli.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(RECORDED_ENV)}
    env.update(call["env"], PATH=f"{cli_dir}:{env['PATH']}", PYTHON=sys.executable, SLURM_NNODES=nodes,
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("SLURM_JOB_NODELIST", None)
    res = subprocess.run(["bash", *args[script:], "--dry-run"], cwd=call["cwd"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, f"sbatch {' '.join(args)} (dry run) exited {res.returncode}:\n{res.stderr[-3000:]}"
    return res.stdout


def test_no_command_hides_in_a_comment():
    for source, text in SOURCES.items():
        for block in bash_blocks(text):
            for line in block.splitlines():
                match = COMMENTED_COMMAND.search(line)
                assert not match, f"{source}: a command inside a comment (make it a command of its own): {line}"


@pytest.mark.long  # 44 s on 2 cores (every command of every page): make long-test, which CI runs
def test_every_documented_command_resolves(project, tmp_path, monkeypatch):
    for key in [k for k in os.environ if k.startswith(RECORDED_ENV)]:
        monkeypatch.delenv(key)
    calls: list[dict] = []
    # the docs page is one shell session from the clone onwards; the README block runs in the project folder
    calls += record("\n".join(bash_blocks(SOURCES["docs/cluster-workflow.md"])), project.parent / "clone",
                    tmp_path / "rec-docs", project)
    readme_calls = record("\n".join(bash_blocks(SOURCES["README cluster section"])), project,
                          tmp_path / "rec-readme", project)
    # the quick start goes collect → harvest → sft → grpo → export → serve → eval, each stage a command of its own
    stages = [c["args"][0] if c["prog"] == "omnidecision" else "grpo" for c in readme_calls
              if c["prog"] == "omnidecision" or (c["prog"] == "sbatch" and "grpo.slurm" in " ".join(c["args"]))]
    assert [s for s in stages if s in QUICK_START_STAGES] == list(QUICK_START_STAGES), stages
    calls += readme_calls
    # the CPU walk-through of the getting-started page, in the project folder too
    walk = [b for b in bash_blocks(SOURCES["docs/getting-started.md"]) if "omnidecision tasks synth" in b]
    assert len(walk) == 1, "the getting-started page has one CPU walk-through block"
    started = record(walk[0], project, tmp_path / "rec-start", project)
    assert {"collect", "sft", "grpo", "eval"} <= {c["args"][0] for c in started if c["prog"] == "omnidecision"}
    calls += started
    programs = {c["prog"] for c in calls}
    assert programs <= {"omnidecision", "sbatch"} | SETUP_PROGRAMS, programs

    seen: set[str] = set()
    replayed = {"dry_run": [], "sbatch": [], "parsed": []}
    for call in calls:
        key = json.dumps([call["prog"], call["cwd"], call["args"], call["env"]])
        if call["prog"] in SETUP_PROGRAMS or key in seen:
            continue
        seen.add(key)
        args = call["args"]
        if call["prog"] == "sbatch":
            out = _sbatch_dry_run(call, tmp_path / "cli")
            assert "srun" in out and "accelerate launch" in out, out[-2000:]
            replayed["sbatch"].append(args)
        elif args[0] in DRY_RUN_COMMANDS and args[:2] != ["collect", "merge"]:
            report = _dry_run(call, monkeypatch)
            assert report["command"] == args[0]
            replayed["dry_run"].append(args)
        else:
            _parse_only(args)
            replayed["parsed"].append(args)
    # what the docs hold, counted: every stage is exercised, the loop ran its four shards
    dry = [a[0] for a in replayed["dry_run"]]
    assert {"sft", "grpo", "serve", "collect", "eval", "ablate"} <= set(dry), dry
    assert sum(1 for a in replayed["dry_run"] if a[0] == "collect" and "--shard" in a) >= 4
    assert len(replayed["sbatch"]) >= 2 and {a[0] for a in replayed["parsed"]} >= {"harvest", "export", "compare"}
