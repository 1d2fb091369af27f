"""A command refused by its dry run and by its run in the same words (the rule every dry run keeps): shared by the
tests that plant a bad input and hold both to one error line.

    from tests.refusals import cli_errors, same_refusal
"""

from __future__ import annotations

from typer.testing import CliRunner

from omnidecision.cli import app


def cli_errors(args: list[str]) -> tuple[int, list[str]]:
    """(exit code, the `error:` lines on stderr) of one CLI call."""
    res = CliRunner().invoke(app, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, [line for line in res.stderr.splitlines() if line.startswith("error:")]


def same_refusal(args: list[str], *, names: str) -> str:
    """Run `args` with and without --dry-run: both exit 2 with the same one error line, naming `names`; the line."""
    dry_code, dry = cli_errors([*args, "--dry-run"])
    real_code, real = cli_errors(args)
    assert dry_code == 2 and real_code == 2, (dry_code, dry, real_code, real)
    assert dry == real and len(real) == 1, (dry, real)
    assert names in real[0], real
    return real[0]
