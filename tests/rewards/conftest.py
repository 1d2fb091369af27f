"""Ledgers shared by the reward tests."""

from __future__ import annotations

import pytest

from omnidecision.ledger import FailedCall, Ledger, Need, Slot


def three_need_ledger() -> Ledger:
    """Need 0 filled (audio), need 1 actionable (web, anchored on 0), need 2 blocked on 1, need 3 supplementary."""
    return Ledger(
        question="In which year was the narrator of the documentary clip born, and what is that year squared?",
        needs=[
            Need(index=0, description="narrator name", query_focus="narrator name", preferred_source="audio",
                 status="filled", value="Ada Lovelace", filled_by="audio_scouting", attempts=1),
            Need(index=1, description="birth year", query_focus="birth year of {#0}", preferred_source="web",
                 depends_on=[0]),
            Need(index=2, description="year squared", query_focus="{#1} ** 2", preferred_source="code",
                 depends_on=[1]),
            Need(index=3, description="clip location", role="supplementary", query_focus="where is the clip filmed",
                 preferred_source="frame"),
        ],
        slots=[Slot(name="answer", kind="computation", needs=[2])],
        tool_call_counts={"audio_scouting": 1},
        initialized=True,
        step=1,
    )


def ready_ledger() -> Ledger:
    s = three_need_ledger()
    for i, v in ((1, "1815"), (2, "3294225")):
        s.needs[i].status, s.needs[i].value = "filled", v
    s.slots[0].value, s.slots[0].verified = "3294225", True
    return s


def stuck_ledger() -> Ledger:
    """Not ready, but nothing can advance: need 1 spent its attempts."""
    s = three_need_ledger()
    s.needs[1].attempts = s.max_attempts
    s.needs[3].status = "unfillable"
    return s


def failed_ledger() -> Ledger:
    s = three_need_ledger()
    s.needs[1].attempts = 1
    s.failed_calls.append(FailedCall(need=1, tool="web_search", query="birth year of Ada Lovelace", error="no hits"))
    s.tool_call_counts["web_search"] = 1
    return s


@pytest.fixture
def ledger() -> Ledger:
    return three_need_ledger()


LEDGERS = {"open": three_need_ledger, "ready": ready_ledger, "stuck": stuck_ledger, "failed": failed_ledger}


@pytest.fixture
def ledgers() -> dict[str, Ledger]:
    return {name: make() for name, make in LEDGERS.items()}
