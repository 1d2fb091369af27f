"""The command-line reference: every command of the `omnidecision` Typer app with every option and argument, read
from the command tree Typer builds (the same objects `--help` prints). Typer carries its own copy of click, so the
objects are read by what they have (`commands`, `param_type_name`), not by their class.

    python -m docgen        # writes docs/reference/cli.md among the others
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from docgen.common import NOTE, Page, cell, code, one_line, portable, type_text

Command = Any  # a (Typer) click command or group
Parameter = Any  # a (Typer) click option or argument


def is_group(cmd: Command) -> bool:
    return isinstance(getattr(cmd, "commands", None), dict)


def walk(cmd: Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Command]]:
    """(command path, command) for every command below `cmd`, groups included, in the order `--help` lists them."""
    yield path, cmd
    if is_group(cmd):
        for name in cmd.commands:
            yield from walk(cmd.commands[name], (*path, name))


def root() -> Command:
    import typer.main

    from omnidecision.cli import app

    return typer.main.get_command(app)


def params(cmd: Command) -> list[Parameter]:
    """The command's documented parameters: every option and argument except `--help`."""
    return [p for p in cmd.params if p.name != "help"]


def is_option(param: Parameter) -> bool:
    return param.param_type_name == "option"


def param_help(param: Parameter) -> str:
    return one_line(getattr(param, "help", None) or "")


def param_names(param: Parameter) -> str:
    if is_option(param):
        names = [*param.opts, *param.secondary_opts]
        return ", ".join(names)
    return (param.metavar or param.name or "").upper()


def param_type(param: Parameter) -> str:
    if is_option(param) and param.is_flag:
        return "flag"
    choices = getattr(getattr(param, "type", None), "choices", None)
    descriptor = getattr(param, "type_descriptor", None)  # Typer >= 0.2x: the annotation itself
    if choices:
        name = " | ".join(str(c) for c in choices)
    elif descriptor is not None:
        name = type_text(descriptor.annotation)
    else:
        name = getattr(getattr(param, "type", None), "name", "text")
    return code(name)


def param_default(param: Parameter) -> str:
    if param.required:
        return "required"
    default = param.default
    if default is None or (param.multiple and not default):
        return "–"
    if is_option(param) and param.is_flag and param.secondary_opts:
        return param.opts[0] if default else param.secondary_opts[0]
    return code(portable(default))


def command_help(cmd: Command) -> str:
    return one_line(cmd.help or cmd.short_help or "")


def render(cmd: Command | None = None) -> Page:
    cmd = cmd or root()
    problems: list[str] = []
    lines = ["# Command line", "", NOTE, "",
             "`omnidecision COMMAND --help` prints the same. Commands that take a recipe (`sft`, `grpo`, `judge "
             "train`, `rft-select`) also accept any field of their recipe as `--field value`, and `collect`, `eval`, "
             "`ablate`, `rounds` any recipe key as `--key.path VALUE`: the fields are in the "
             "[recipe reference](recipes.md).", ""]
    for path, sub in walk(cmd):
        if not path:
            continue
        name = " ".join(("omnidecision", *path))
        doc = command_help(sub)
        if not doc:
            problems.append(f"command `{name}` has no help text")
        lines += [f"## {' '.join(path)}", "", f"`{name}`" + (" COMMAND" if is_group(sub) else ""),
                  "", doc or "**(no help text)**", ""]
        if getattr(sub, "context_settings", {}).get("ignore_unknown_options"):
            lines += ["Extra `--field value` options override the recipe: see the [recipe reference](recipes.md).",
                      ""]
        if is_group(sub):
            lines += ["| command | what it does |", "|---|---|"]
            for child in sub.commands:
                anchor = "-".join((*path, child))
                lines.append(f"| [`{child}`](#{anchor}) | {cell(command_help(sub.commands[child]))} |")
            lines.append("")
        ps = params(sub)
        if not ps:
            lines += [] if is_group(sub) else ["No options.", ""]
            continue
        if is_group(sub):
            lines += [f"`{name}` itself (without a subcommand) takes:", ""]
        lines += ["| option | type | default | what it does |", "|---|---|---|---|"]
        for p in ps:
            text = param_help(p)
            if not text:
                problems.append(f"`{name}`: {param_names(p)} has no help text")
            lines.append(f"| `{param_names(p)}` | {param_type(p)} | {param_default(p)} | "
                         f"{cell(text) or '**(no help text)**'} |")
        lines.append("")
    return Page("reference/cli.md", "\n".join(lines), problems)
