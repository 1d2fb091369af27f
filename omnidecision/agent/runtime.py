"""Old home of the run's bookkeeping, importable from here this release (CHANGELOG.md): `Run` and its helpers live
in `omnidecision.agent.ledger_loop`, beside the loop that uses them at every step.

    python -c "from omnidecision.agent.ledger_loop import Run; help(Run)"
"""

from __future__ import annotations

from omnidecision.agent.ledger_loop import (  # noqa: F401
    ROLE_FALLBACKS,
    Run,
    ToolRunner,
    config_digest,
    default_tool_runner,
)
