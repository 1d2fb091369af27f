"""`--dry-run` of `omnidecision eval` and `ablate`: the checklist the run refuses on (`eval.checklist`: the rollout
engine's checks, then environment, train/test, teacher, prices and the server, all made on the one prepared eval the
run reads), and the vLLM command the `serve:` block would start; start nothing, write nothing.

    omnidecision eval --config configs/eval/qwen3-8b-sft.yaml --serve.model runs/export/qwen3-8b-grpo --dry-run
"""

from __future__ import annotations

from pathlib import Path

from omnidecision.eval.checklist import PreparedEval, prepare_eval
from omnidecision.eval.serve import serve_report
from omnidecision.preflight import Check, DryRunReport
from omnidecision.rollout.deprecated import aliases
from omnidecision.rollout.recipe import EvalRecipe


def dry_run_report(prepared: PreparedEval, config: Path, n_overrides: int, command: str = "eval") -> DryRunReport:
    """The dry-run report of a prepared eval (`checklist.prepare_eval`): its checklist, the very checks the run
    refuses on (the rollout engine's on the one selection and output file the run reads, then eval's), and the
    server its `serve:` block would start."""
    recipe = prepared.recipe
    report = DryRunReport(command=command, recipe=str(config), resolved=recipe.model_dump(mode="json"))
    report.checks.append(Check(what="recipe", status="ok", detail=f"{config} + {n_overrides} override(s)"))
    report.extra["environment"] = prepared.environment
    if prepared.overlap:
        report.extra["train_overlap"] = prepared.overlap
    report.checks.extend(prepared.checks)  # the run's own list: what it refuses on is what this prints
    s = recipe.serve
    if prepared.server is None or s is None:  # the checklist built a server exactly when there is a `serve:` block
        report.checks.append(Check(what="serve", status="ok", detail="none: the planner is the recipe's endpoint"))
        return report
    # the very server the run starts, on its port; its checks are the checklist's (above)
    report.would_run.append(prepared.server.would_run)
    report.extra.update(prepared.server.extra)
    if s.port is None:
        report.extra["port"] = (f"{prepared.server.server.port}: free when checked; a run chooses its own free port "
                                "(serve.port fixes one)")
    report.extra["served_roles"] = {role: s.requested_model for role in s.roles}
    return report


def eval_dry_run(recipe: EvalRecipe, config: Path, n_overrides: int, command: str = "eval") -> DryRunReport:
    """The dry-run report of an already loaded eval recipe."""
    return dry_run_report(prepare_eval(recipe), config, n_overrides, command)


# the server's checks moved to eval.serve (beside the server they check), one release
__getattr__ = aliases(__name__, {"serve_report": "omnidecision.eval.serve.serve_report"},
                      {"omnidecision.eval.serve.serve_report": serve_report})
