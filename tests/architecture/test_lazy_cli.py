"""The root command line mounts the stages lazily (omnidecision/cli.py, `_MOUNTS`): `omnidecision --help` lists
every command, with the first sentence of its help read from its module's source, and imports no stage; a command
imports its own stage when it runs or prints its help. That is what lets a stage's cli module import what it needs
at its top (tests/architecture/test_imports_at_top.py) without `omnidecision --help` loading torch.

- the listing read from the source is the loaded command's own help, for every mount (`source_help` cannot drift);
- `--help` before and after loading every command prints the same text;
- in a fresh interpreter, `--help` (and a mistyped command) loads no stage module and no torch/TRL/transformers, and
  `compare --help` loads eval's cli and no other stage's.

    .venv/bin/pytest -q tests/architecture/test_lazy_cli.py
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from omnidecision import cli
from omnidecision.cli import _MOUNTS, _PASSTHROUGH, app, source_help

HEAVY = {"torch", "trl", "transformers", "vllm", "peft", "datasets", "accelerate", "deepspeed"}
STAGES = sorted({module for module, _, _ in _MOUNTS})

_PROBE = """
import json, sys
from omnidecision.cli import app
try:
    app(sys.argv[1:], prog_name="omnidecision")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("omnidecision.") or m.split(".")[0] in {heavy})))
"""


def loaded_after(*argv: str) -> set[str]:
    """The project and heavy modules a fresh interpreter holds after `omnidecision ARGV` (its stdout's last line)."""
    out = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=sorted(HEAVY)), *argv], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(("module", "attr", "name"), _MOUNTS, ids=[name for _, _, name in _MOUNTS])
def test_the_help_read_from_the_source_is_the_commands_own(module: str, attr: str, name: str):
    loaded = typer.main.get_command(app).commands[name]
    assert loaded.help and source_help(module, attr) == loaded.help


def _root_help(group: object, capsys: pytest.CaptureFixture[str]) -> str:
    group.main(["--help"], prog_name="omnidecision", standalone_mode=False, terminal_width=80)  # type: ignore
    return capsys.readouterr().out


def test_the_listing_is_the_same_before_and_after_the_commands_load(capsys: pytest.CaptureFixture[str]):
    lazy = _root_help(typer.main.get_command(app), capsys)
    group = typer.main.get_command(app)
    assert len(group.commands) == len(_MOUNTS) + 1  # every mount and `version`, loaded
    assert _root_help(group, capsys) == lazy
    for _, _, name in _MOUNTS:
        assert f"\n  {name} " in lazy, name


def test_help_and_a_typo_load_no_stage():
    for argv in (["--help"], ["comapre"]):
        loaded = loaded_after(*argv)
        assert not loaded & set(STAGES) and not {m.split(".")[0] for m in loaded} & HEAVY, (argv, sorted(loaded))


def test_a_typo_is_offered_the_command_it_meant():
    res = CliRunner().invoke(app, ["comapre"])
    assert res.exit_code == 2 and "Did you mean 'compare'?" in res.output


def test_a_commands_help_loads_its_own_stage_only():
    loaded = loaded_after("compare", "--help")
    assert "omnidecision.eval.cli" in loaded
    assert not loaded & (set(STAGES) - {"omnidecision.eval.cli"}), sorted(loaded & set(STAGES))


def test_passthrough_commands_forward_unknown_options_and_the_others_do_not():
    group = typer.main.get_command(app)
    forwarding = {name for name, cmd in group.commands.items() if cmd.context_settings == _PASSTHROUGH}
    assert {"sft", "grpo", "grpo-agent", "rft-select", "rounds", "eval", "ablate"} <= forwarding
    assert not forwarding & {"harvest", "compare", "view", "run", "version"}


def test_a_subcommand_of_another_package_is_mounted_in_its_group_once():
    for _ in range(2):  # a second root built in the same process does not mount it twice
        audit = typer.main.get_command(app).commands["audit"]
        assert list(audit.commands).count("rewards") == 1
    assert all(sub in cli._SUBCOMMANDS[0] for sub in ("omnidecision.grounding.cli", "rewards"))
