"""One flag spelling per kind across the `omnidecision` commands (docs/architecture.md, "Flag spelling").

The walk reads every command of the Typer app (`omnidecision/cli.py`) and every visible long option of it. `KINDS`
is the table: for each kind of option, the one spelling every command uses and the other spellings of that kind that
no command may use. A command that adds `--output` (or `--fmt`, `--seeds`, ...) fails
`test_every_command_spells_each_kind_one_way`, naming the command and the spelling to use. Options are kebab-case
(recipe fields, `--snake_case` or `--dotted.key`, are not Typer options: they pass through to the recipe parsers).

Old spellings still work, hidden from `--help`, with one warning on stderr (launch.COMMAND_ALIASES, JUDGE_ALIASES,
RFT_ALIASES); each is listed in CHANGELOG.md.

    python tests/architecture/test_flag_spelling.py      # every command with its long options
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from omnidecision import launch
from omnidecision.cli import app

ROOT = Path(__file__).resolve().parents[2]
# kind -> (the spelling every command uses, spellings of the same kind no command may use)
KINDS: dict[str, tuple[str, set[str]]] = {
    "recipe": ("--config", {"--recipe", "--cfg", "--config-file", "--config-path"}),
    "output folder or file": ("--out", {"--output", "--output-dir", "--out-dir", "--outdir", "--output-path"}),
    "dataset folder": ("--data", {"--dataset", "--data-dir", "--dataset-name", "--dataset-path"}),
    "task file": ("--tasks", {"--task", "--task-file", "--tasks-file", "--tasks-path"}),
    "task file format": ("--format", {"--fmt", "--task-format", "--tasks-format"}),
    "task id": ("--task-id", {"--id", "--tid", "--task-name"}),
    "seed": ("--seed", {"--random-seed", "--rng-seed"}),
    "experiment start list": ("--starts", {"--seeds", "--start-seeds"}),
    "check-only switch": ("--dry-run", {"--dryrun", "--check-only"}),
    "progress-bar switch": ("--no-progress", {"--no-no-progress", "--quiet-progress", "--hide-progress"}),
    "model name": ("--model", {"--model-name", "--model-name-or-path", "--model-path"}),
    "timeout in seconds": ("--timeout", {"--timeout-s", "--time-limit"}),
    "runs per task": ("--samples", {"--num-samples", "--n-samples"}),
    "requests in flight": ("--concurrency", {"--workers", "--num-workers", "--parallel"}),
}
KEBAB = re.compile(r"--[a-z0-9]+(-[a-z0-9]+)*")


def commands(root: typer.Typer = app) -> dict[str, object]:
    """"group sub" -> the click command, for every command of `root` (groups' own callbacks included)."""
    found: dict[str, object] = {}

    def walk(cmd: object, path: list[str]) -> None:
        if path and getattr(cmd, "callback", None) is not None:
            found[" ".join(path)] = cmd
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(root), [])
    return found


def visible_options(cmd: object) -> list[str]:
    """The long option names a command shows in --help (both sides of a --flag/--no-flag)."""
    return [name for p in cmd.params if p.param_type_name == "option" and not p.hidden  # type: ignore[attr-defined]
            for name in (*p.opts, *p.secondary_opts) if name.startswith("--")]


def misspellings(cmds: dict[str, object]) -> list[str]:
    """Every (command, option) that spells a kind of `KINDS` another way, or is not kebab-case."""
    wrong = {other: (kind, name) for kind, (name, others) in KINDS.items() for other in others}
    found = []
    for path, cmd in sorted(cmds.items()):
        for opt in visible_options(cmd):
            if opt in wrong:
                kind, name = wrong[opt]
                found.append(f"omnidecision {path} {opt}: the {kind} is {name} in every command")
            elif not KEBAB.fullmatch(opt):
                found.append(f"omnidecision {path} {opt}: a command's own option is --kebab-case")
    return found


def test_the_walk_reads_every_command():
    cmds = commands()
    assert {"collect", "collect merge", "judge train", "judge eval", "tasks synth", "audit progress", "run", "tool",
            "eval", "experiment", "demo", "harvest", "rft-select"} <= set(cmds)
    assert "--out" in visible_options(cmds["harvest"]) and "--tasks" in visible_options(cmds["run"])


def test_every_command_spells_each_kind_one_way():
    wrong = misspellings(commands())
    assert not wrong, "\n".join(wrong)


def test_every_spelling_of_the_table_is_in_use():
    """A kind no command has any more is dropped from the table (or its spelling changed) instead of kept stale."""
    used = {opt for cmd in commands().values() for opt in visible_options(cmd)}
    unused = {kind: name for kind, (name, _) in KINDS.items() if name not in used}
    assert not unused, f"no command uses {unused}"


def test_a_command_with_another_spelling_fails_the_check():
    planted = typer.Typer()

    @planted.command("one")
    def one(out: Path = typer.Option(..., "--out"), seed: int = typer.Option(0, "--seed")) -> None:
        """Consistent."""

    @planted.command("two")
    def two(out: Path = typer.Option(..., "--output"), fmt: str = typer.Option("auto", "--fmt"),
            batch: int = typer.Option(1, "--batch_size")) -> None:
        """Three misspellings."""

    wrong = misspellings(commands(planted))
    assert len(wrong) == 3 and all(w.startswith("omnidecision two ") for w in wrong), wrong
    assert any("--output: the output folder or file is --out" in w for w in wrong)


def test_old_spellings_are_hidden_and_point_at_options_that_exist():
    """An old spelling is no visible option of its command; its new spelling is one, or a recipe override (a
    dotted key) of a command that passes overrides to its recipe."""
    cmds = commands()
    for path, aliases in launch.COMMAND_ALIASES.items():
        shown = visible_options(cmds[" ".join(path)])
        for old, new in aliases.items():
            assert old not in shown, f"omnidecision {' '.join(path)} still shows {old}"
            assert new in shown or "." in new, f"omnidecision {' '.join(path)}: {new} is no option"


def test_the_changelog_lists_every_old_spelling():
    text = (ROOT / "CHANGELOG.md").read_text("utf-8")
    unreleased = text.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]
    deprecated = unreleased.split("### Deprecated", 1)[1].split("\n### ", 1)[0]
    tables = {**{" ".join(p): a for p, a in launch.COMMAND_ALIASES.items()},
              "judge train": launch.JUDGE_ALIASES, "rft-select": launch.RFT_ALIASES}
    missing = [f"{command} {old} → {new}" for command, aliases in tables.items() for old, new in aliases.items()
               if f"`omnidecision {command} {old}` → `{new}`" not in deprecated]
    assert not missing, f"CHANGELOG.md, Unreleased / Deprecated, lacks: {missing}"


# -- the old spellings still work, and warn once -----------------------------------------------------------------
@pytest.fixture()
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(launch, "_WARNED", set())


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "is deprecated, use" in line]


def test_an_old_spelling_runs_the_same_command_and_warns_once(tmp_path, fresh_warnings):
    from omnidecision.tasks.synth import write_suite

    task_id = json.loads(write_suite(2, 1, tmp_path / "synth").read_text("utf-8").splitlines()[0])["id"]
    runner = CliRunner()
    runs = {}
    for name, flags in (("old", ["--fmt", "synthetic"]), ("new", ["--format", "synthetic"])):
        out = tmp_path / f"{name}.jsonl"
        res = runner.invoke(app, ["run", "--tasks", str(tmp_path / "synth"), "--task-id", task_id, "--teacher",
                                  *flags, "--out", str(out)])
        assert res.exit_code == 0, res.output
        runs[name] = (res, out.read_text("utf-8"))
    assert _warnings(runs["old"][0].stderr) == [
        "warning: `omnidecision run --fmt` is deprecated, use `--format` (CHANGELOG.md)"]
    assert _warnings(runs["new"][0].stderr) == []
    assert "outcome=" in runs["old"][0].stdout and runs["old"][0].stdout == runs["new"][0].stdout
    # a second use in the same process runs without a second warning
    again = runner.invoke(app, ["run", "--tasks", str(tmp_path / "synth"), "--task-id", task_id, "--teacher",
                                "--fmt", "synthetic", "--out", str(tmp_path / "again.jsonl")])
    assert again.exit_code == 0 and _warnings(again.stderr) == []


def test_old_spellings_of_recipe_overrides_resolve_to_the_same_recipe(tmp_path, fresh_warnings):
    """collect's and judge train's old spellings: the dry run resolves the same recipe as the new spellings."""
    from omnidecision.tasks.synth import write_suite

    write_suite(2, 1, tmp_path / "synth")
    recipe = str(ROOT / "configs/collect/synthetic-teacher.yaml")
    old = ["collect", "--config", recipe, "--tasks", str(tmp_path / "synth"), "--limit", "1", "--mode", "react",
           "--out", str(tmp_path / "c"), "--dry-run"]
    new = ["collect", "--config", recipe, "--tasks.path", str(tmp_path / "synth"), "--tasks.limit", "1",
           "--agent.mode", "react", "--out", str(tmp_path / "c"), "--dry-run"]
    runner = CliRunner()
    res_old, res_new = runner.invoke(app, old), runner.invoke(app, new)
    assert res_old.exit_code == res_new.exit_code == 0, res_old.output + res_new.output
    assert res_old.stdout == res_new.stdout and "react" in res_new.stdout
    assert len(_warnings(res_old.stderr)) == 3 and not _warnings(res_new.stderr)

    data = tmp_path / "rl"
    data.mkdir()
    old = ["judge", "train", "--data", str(data), "--model", str(tmp_path / "m"), "--out", str(tmp_path / "j"),
           "--max-steps", "3", "--dry-run"]
    new = ["judge", "train", "--dataset_name", str(data), "--model_name_or_path", str(tmp_path / "m"),
           "--output_dir", str(tmp_path / "j"), "--max_steps", "3", "--dry-run"]
    res_old, res_new = runner.invoke(app, old), runner.invoke(app, new)
    assert res_old.exit_code == res_new.exit_code, res_old.output + res_new.output
    assert res_old.stdout == res_new.stdout and str(tmp_path / "j") in res_new.stdout
    assert _warnings(res_old.stderr) == [
        f"warning: `omnidecision judge train {old_flag}` is deprecated, use `{new_flag}` (CHANGELOG.md)"
        for old_flag, new_flag in (("--data", "--dataset_name"), ("--model", "--model_name_or_path"),
                                   ("--out", "--output_dir"), ("--max-steps", "--max_steps"))]


if __name__ == "__main__":
    for path, cmd in sorted(commands().items()):
        print(f"omnidecision {path}: {' '.join(visible_options(cmd))}")
