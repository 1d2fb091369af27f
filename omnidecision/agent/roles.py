"""Old home of the role messages, importable from here this release (CHANGELOG.md): the decompose, critic and
finalizer messages live in `omnidecision.agent.ledger_loop`, the react, memory and history-finalizer messages in
`omnidecision.agent.baselines`, what each reply must parse as in `omnidecision.protocol.actions`.

    python -c "from omnidecision.agent.ledger_loop import decompose_messages; print(decompose_messages('Who?'))"
"""

from __future__ import annotations

from omnidecision.agent.baselines import (  # noqa: F401
    MAX_HISTORY_OBSERVATION_CHARS,
    history_finalizer_messages,
    history_text,
    react_messages,
    summarizer_messages,
)
from omnidecision.agent.ledger_loop import (  # noqa: F401
    MAX_OBSERVATION_CHARS,
    critic_messages,
    decompose_messages,
    finalizer_messages,
    observation_text,
)
from omnidecision.protocol.actions import parse_role_output, role_schema  # noqa: F401
