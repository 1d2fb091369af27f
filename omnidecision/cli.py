"""The `omnidecision` command line: one entry for every stage. Run `omnidecision --help`.

Each stage keeps its commands in its own `<package>/cli.py`; this module mounts them by name (`_MOUNTS`) and imports
a stage's module only when one of its commands runs or shows its own help, so `omnidecision --help` and a light
command never load torch, TRL or vLLM, and a stage's cli module may import what it needs at its top. It also
translates the old flag spellings (CHANGELOG.md, "Deprecated") before a command parses them. Flag spelling:
docs/architecture.md, "Flag spelling"; tests/architecture/test_flag_spelling.py holds every command to it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
from difflib import get_close_matches
from functools import cache
from pathlib import Path
from typing import Any

import typer
import typer.main
from typer._click import Command, Context, HelpFormatter  # Typer's own copy of click: the classes its commands are
from typer._click.exceptions import UsageError
from typer._click.utils import make_default_short_help
from typer.core import TyperGroup
from typer.models import CommandInfo, TyperInfo

import omnidecision
from omnidecision.gpustats import install as install_gpu_stats
from omnidecision.launch import translate_command_aliases
from omnidecision.outputs import dry_run_stdout
from omnidecision.procs import stop_group_on_sigterm
from omnidecision.protocol.redaction import install as install_redaction

# (module, attribute, name): a typer.Typer is mounted as a command group, a function as a command; `--help` lists
# them in this order (after the commands of this module), the groups last.
_MOUNTS: list[tuple[str, str, str]] = [
    ("omnidecision.agent.cli", "run", "run"),
    ("omnidecision.agent.cli", "replay", "replay"),
    ("omnidecision.tools.cli", "tool", "tool"),
    ("omnidecision.collect.cli", "harvest", "harvest"),
    ("omnidecision.branch.cli", "branch", "branch"),
    ("omnidecision.sft.cli", "tiny_planner", "tiny-planner"),
    ("omnidecision.sft.cli", "sft", "sft"),
    ("omnidecision.sft.cli", "export", "export"),
    ("omnidecision.rl.cli", "grpo", "grpo"),
    ("omnidecision.grounding.grpo_cli", "grpo_agent", "grpo-agent"),
    ("omnidecision.rl.rft", "rft_select", "rft-select"),
    ("omnidecision.onpolicy.cli", "rounds", "rounds"),
    ("omnidecision.eval.cli", "serve", "serve"),
    ("omnidecision.eval.cli", "eval_cmd", "eval"),
    ("omnidecision.eval.cli", "compare", "compare"),
    ("omnidecision.eval.cli", "ablate", "ablate"),
    ("omnidecision.view.cli", "view", "view"),
    ("omnidecision.pipeline.cli", "demo", "demo"),
    ("omnidecision.pipeline.cli", "experiment", "experiment"),
    ("omnidecision.tasks.cli", "app", "tasks"),
    ("omnidecision.collect.cli", "collect_app", "collect"),
    ("omnidecision.rl.judge_train", "judge_app", "judge"),
    ("omnidecision.eval.cli", "audit_app", "audit"),
]

# (module, attribute, (group module, group attribute), name): a command mounted inside a group of another package
# (the reward audit lives above eval, in grounding, but belongs with `omnidecision audit`)
_SUBCOMMANDS: list[tuple[str, str, tuple[str, str], str]] = [
    ("omnidecision.grounding.cli", "audit_rewards", ("omnidecision.eval.cli", "audit_app"), "rewards"),
]

# Commands that forward unknown options (TrlParser-style `--learning_rate 1e-4` overrides).
_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def source_help(module: str, attr: str) -> str:
    """The help text Typer gives the mounted `module.attr`, read from the module's source without importing it.

    Why the source: importing a stage's cli module to print one line of `omnidecision --help` would load the stage
    (the reason every command used to defer its imports), and a second copy of each line here would drift from the
    command's own docstring. Typer takes a command's help from its function's docstring, and a group's from the
    `help=` of its `typer.Typer(...)` or else from the docstring of its `@group.callback()`; the same three places are
    read here (tests/architecture/test_lazy_cli.py holds the lines equal to the loaded commands' help).
    """
    tree = _module_tree(module)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == attr:
            return ast.get_docstring(node) or ""
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and any(isinstance(t, ast.Name) and t.id == attr for t in node.targets)):
            given = next((k.value for k in node.value.keywords if k.arg == "help"), None)
            if isinstance(given, ast.Constant) and isinstance(given.value, str):
                return inspect.cleandoc(given.value)
            return _callback_doc(tree, attr)
    return ""


def _callback_doc(tree: ast.Module, group: str) -> str:
    """The docstring of the function decorated `@group.callback(...)` in `tree`, "" when there is none."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if (isinstance(target, ast.Attribute) and target.attr == "callback"
                        and isinstance(target.value, ast.Name) and target.value.id == group):
                    return ast.get_docstring(node) or ""
    return ""


@cache
def _module_tree(module: str) -> ast.Module:
    # the path from the package folder, not importlib.util.find_spec: finding a spec imports the parent packages
    path = Path(omnidecision.__file__).parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return ast.parse(path.read_text("utf-8"), str(path))


def _attach_subcommands(module: str, attr: str, group: typer.Typer) -> None:
    """Mount the `_SUBCOMMANDS` that belong inside `group` (once per process: the group object is the module's)."""
    for sub_module, sub_attr, where, name in _SUBCOMMANDS:
        if where == (module, attr) and all(info.name != name for info in group.registered_commands):
            group.command(name)(getattr(importlib.import_module(sub_module), sub_attr))


def load_mounted(module: str, attr: str, name: str, *, rich_markup_mode: Any) -> Command:
    """The click command (or group) of one mount, built by Typer as `app.command`/`app.add_typer` would build it.

    A stage that fails to import fails its command loudly (and every listing that loads all of them, as the docs'
    generator and the architecture tests do): a silently missing command hides a broken install.
    """
    obj = getattr(importlib.import_module(module), attr)
    if isinstance(obj, typer.Typer):
        _attach_subcommands(module, attr, obj)
        return typer.main.get_group_from_info(TyperInfo(obj, name=name), rich_markup_mode=rich_markup_mode,
                                              pretty_exceptions_short=app.pretty_exceptions_short,
                                              suggest_commands=app.suggest_commands)
    settings = _PASSTHROUGH if getattr(obj, "passthrough", False) else {}
    return typer.main.get_command_from_info(CommandInfo(name=name, callback=obj, context_settings=settings),
                                            rich_markup_mode=rich_markup_mode,
                                            pretty_exceptions_short=app.pretty_exceptions_short)


class _Root(TyperGroup):
    """The `omnidecision` group.

    - Mounted lazily: `list_commands` names every command without importing it, `get_command` imports one command's
      module when it runs or shows its help, and `--help` lists each mounted command with the first line of help read
      from its source (`source_help`). Reading `.commands` (what the docs' generator and the command walks of the
      tests do) loads every command, in the order of `list_commands`.
    - Old flag spellings (launch.COMMAND_ALIASES, listed in CHANGELOG.md) become the current ones, with a warning,
      before any command parses its options; a command given `--dry-run` runs with stdout held for its report
      (outputs.dry_run_stdout).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loaded: dict[str, Command] = {}
        self._pending = {name: (module, attr) for module, attr, name in _MOUNTS}
        super().__init__(*args, **kwargs)  # the commands of `app` itself (version), through the setter below

    @property
    def commands(self) -> dict[str, Command]:  # type: ignore[override]
        for name in list(self._pending):
            self._load(name)
        ordered = {name: self._loaded[name] for name in self.list_commands(None) if name in self._loaded}
        self._loaded.clear()
        self._loaded.update(ordered)  # the same dict object: what is added to it stays
        return self._loaded

    @commands.setter
    def commands(self, value: dict[str, Command]) -> None:
        self._loaded = dict(value)

    def _load(self, name: str) -> Command | None:
        if name in self._pending:
            module, attr = self._pending.pop(name)
            self._loaded[name] = load_mounted(module, attr, name, rich_markup_mode=self.rich_markup_mode)
        return self._loaded.get(name)

    def list_commands(self, ctx: Context | None) -> list[str]:
        mounted = [name for _, _, name in _MOUNTS]
        return [*(n for n in self._loaded if n not in mounted), *mounted]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        return self._load(cmd_name)

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        """The command list of `--help`: a mounted command not yet loaded gives its help from its source. Each
        command's first sentence, up to two lines of the column (click's default, one line, cuts most of them)."""
        names = self.list_commands(ctx)
        limit = 2 * (formatter.width - 6 - max(len(name) for name in names))
        rows = []
        for name in names:
            if name in self._pending:
                module, attr = self._pending[name]
                rows.append((name, make_default_short_help(source_help(module, attr), limit).strip()))
            elif not (cmd := self._loaded[name]).hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        # Typer's "Did you mean" reads `self.commands`, which would load every stage to correct one typo
        try:
            return self._click_resolve_command(ctx, args)
        except UsageError as e:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches:
                e.message = f"{e.message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"
            raise

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        args = translate_command_aliases(args)
        ctx.meta["omnidecision.dry_run"] = "--dry-run" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Context) -> object:
        if not ctx.meta.get("omnidecision.dry_run"):
            return super().invoke(ctx)
        # a dry run's stdout is its report alone: what libraries print while it runs goes to stderr
        with dry_run_stdout():
            return super().invoke(ctx)


# rich_markup_mode=None: click's plain help, which wraps an option's help under its whole name at any width (Typer's
# rich tables cut option names to fit 80 columns); tests/architecture/test_help_width.py holds every command to it.
app = typer.Typer(cls=_Root, no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  help="Train and serve the ledger agent's planner.")


@app.callback()
def main() -> None:
    """omnidecision: collect → harvest → sft → grpo → export → serve → eval for the ledger agent's planner."""
    install_gpu_stats()  # OMNIDECISION_GPU_STATS=FILE: peak GPU memory of this command, recorded at exit
    install_redaction()  # every key hidden by value in what this command prints and logs (protocol/redaction.py)
    if os.environ.get("OD_STEP_LEADER"):  # a step of a plan: its SIGTERM stops its whole process group
        stop_group_on_sigterm()


@app.command()
def version() -> None:
    """Print the package version."""
    print(omnidecision.__version__)


if __name__ == "__main__":
    app()
