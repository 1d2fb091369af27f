"""The `omnidecision` command line: one entry for every stage. Run `omnidecision --help`.

Each stage keeps its commands in its own `<package>/cli.py` (imports of torch/TRL/vLLM happen inside the
command functions, so `omnidecision --help` stays fast); this module only mounts them, and translates the old flag
spellings (CHANGELOG.md, "Deprecated") before a command parses them. Flag spelling: docs/architecture.md, "Flag
spelling"; tests/architecture/test_flag_spelling.py holds every command to it.
"""

from __future__ import annotations

import importlib
import os

import typer
from typer.core import TyperGroup

from omnidecision.launch import translate_command_aliases
from omnidecision.procs import stop_group_on_sigterm


class _Root(TyperGroup):
    """The `omnidecision` group: old flag spellings (launch.COMMAND_ALIASES, listed in CHANGELOG.md) become the
    current ones, with a warning, before any command parses its options; a command given `--dry-run` runs with
    stdout held for its report (preflight.dry_run_stdout)."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        args = translate_command_aliases(args)
        ctx.meta["omnidecision.dry_run"] = "--dry-run" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: typer.Context) -> object:
        if not ctx.meta.get("omnidecision.dry_run"):
            return super().invoke(ctx)
        from omnidecision.outputs import dry_run_stdout  # loaded for a dry run only (fast --help)

        # a dry run's stdout is its report alone: what libraries print while it runs goes to stderr
        with dry_run_stdout():
            return super().invoke(ctx)


app = typer.Typer(cls=_Root, no_args_is_help=True, add_completion=False,
                  help="Train and serve the ledger agent's planner.")

# (module, attribute, name): a typer.Typer is mounted as a command group, a function as a command.
_MOUNTS: list[tuple[str, str, str]] = [
    ("omnidecision.tasks.cli", "app", "tasks"),
    ("omnidecision.agent.cli", "run", "run"),
    ("omnidecision.agent.cli", "replay", "replay"),
    ("omnidecision.tools.cli", "tool", "tool"),
    ("omnidecision.collect.cli", "collect_app", "collect"),
    ("omnidecision.collect.cli", "harvest", "harvest"),
    ("omnidecision.branch.cli", "branch", "branch"),
    ("omnidecision.sft.cli", "tiny_planner", "tiny-planner"),
    ("omnidecision.sft.cli", "sft", "sft"),
    ("omnidecision.sft.cli", "export", "export"),
    ("omnidecision.rl.cli", "grpo", "grpo"),
    ("omnidecision.grounding.grpo_cli", "grpo_agent", "grpo-agent"),
    ("omnidecision.rl.judge_train", "judge_app", "judge"),
    ("omnidecision.rl.rft", "rft_select", "rft-select"),
    ("omnidecision.onpolicy.cli", "rounds", "rounds"),
    ("omnidecision.eval.cli", "serve", "serve"),
    ("omnidecision.eval.cli", "eval_cmd", "eval"),
    ("omnidecision.eval.cli", "compare", "compare"),
    ("omnidecision.eval.cli", "ablate", "ablate"),
    ("omnidecision.eval.cli", "audit_app", "audit"),
    ("omnidecision.view.cli", "view", "view"),
    ("omnidecision.pipeline.cli", "demo", "demo"),
    ("omnidecision.pipeline.cli", "experiment", "experiment"),
]

# (module, attribute, (group module, group attribute), name): a command mounted inside a group of another package
# (the reward audit lives above eval, in grounding, but belongs with `omnidecision audit`)
_SUBCOMMANDS: list[tuple[str, str, tuple[str, str], str]] = [
    ("omnidecision.grounding.cli", "audit_rewards", ("omnidecision.eval.cli", "audit_app"), "rewards"),
]

# Commands that forward unknown options (TrlParser-style `--learning_rate 1e-4` overrides).
_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def _mount() -> None:
    for module, attr, (group_module, group_attr), name in _SUBCOMMANDS:
        group = getattr(importlib.import_module(group_module), group_attr)
        group.command(name)(getattr(importlib.import_module(module), attr))
    for module, attr, name in _MOUNTS:
        # a stage that fails to import fails the whole CLI, loudly: a silently missing command hides a broken install
        obj = getattr(importlib.import_module(module), attr)
        if isinstance(obj, typer.Typer):
            app.add_typer(obj, name=name)
        else:
            settings = _PASSTHROUGH if getattr(obj, "passthrough", False) else {}
            app.command(name, context_settings=settings)(obj)


@app.callback()
def main() -> None:
    """omnidecision: collect → harvest → sft → grpo → export → serve → eval for the ledger agent's planner."""
    from omnidecision.gpustats import install
    from omnidecision.protocol.redaction import install as install_redaction

    install()  # OMNIDECISION_GPU_STATS=FILE: peak GPU memory of this command, recorded at exit
    install_redaction()  # every key hidden by value in what this command prints and logs (protocol/redaction.py)
    if os.environ.get("OD_STEP_LEADER"):  # a step of a plan: its SIGTERM stops its whole process group
        stop_group_on_sigterm()


@app.command()
def version() -> None:
    """Print the package version."""
    from omnidecision import __version__

    print(__version__)


_mount()


if __name__ == "__main__":
    app()
