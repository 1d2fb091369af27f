"""The copy-rule baseline planner: the first actionable need with its preferred source's tool, else finish.

It reads the ledger the way a planner that only copies the digest would, had it never seen a call come back:
`actionable_need_indices[0]` and the first of its listed sources (`sources=` before any was tried). It ignores
roles, the tool budget, tried sources, alternative sources and readiness (it finishes only when no need is
actionable). On the original synthetic chains this rule is the teacher; on the planning
families (`omnidecision.tasks.synth.PLANNING_FAMILIES`) it is not, which is what they are for. Every other role
(decompose, critic, finalizer, judge) is the noise-free scripted teacher's, so only the planning differs.

    omnidecision eval --config configs/eval/synth-baselines.yaml   # teacher vs this baseline per family

    >>> from omnidecision.ledger import Ledger, Need
    >>> s = Ledger(needs=[Need(index=0, description="d", role="supplementary", preferred_source="frame"),
    ...                   Need(index=1, description="e")], initialized=True)
    >>> FirstActionableBackend().decide(s)
    '{"action":"call","need":0,"tool":"frame_confirmation"}'
"""

from __future__ import annotations

from typing import Any

from omnidecision.backends.factory import register_backend
from omnidecision.backends.teacher import TeacherBackend
from omnidecision.ledger import SOURCE_TOOL, Ledger, actionable_need_indices
from omnidecision.protocol.actions import CallAction, FinishAction, render_action
from omnidecision.protocol.chat import BackendSpec
from omnidecision.tasks.schema import Task


class FirstActionableBackend(TeacherBackend):
    """The teacher's roles with the copy-rule planner (ledger mode only)."""

    def __init__(self, seed: int = 0, model: str = "first-actionable") -> None:
        super().__init__(noise=0.0, seed=seed, model=model)

    @staticmethod
    def decide(state: Ledger) -> str:
        actionable = actionable_need_indices(state)
        if not actionable:
            return render_action(FinishAction())
        i = actionable[0]
        return render_action(CallAction(need=i, tool=SOURCE_TOOL[state.needs[i].preferred_source]))

    def _planner(self, task: Task, ctx: dict[str, Any]) -> str:
        ledger = self._ledger(ctx)
        if ledger is None:
            return self._history_planner(task, ctx)
        return self.decide(ledger)


@register_backend("first-actionable")
def build_first_actionable(spec: BackendSpec) -> FirstActionableBackend:
    return FirstActionableBackend(**spec.options)
