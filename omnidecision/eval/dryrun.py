"""`--dry-run` of `omnidecision eval` and `ablate`: the rollout engine's checks, the checklist the run refuses on
(`eval.checklist`: environment, train/test, prices, on the one prepared eval the run reads), and the vLLM command
the `serve:` block would start with its checks (`eval.serve.serve_report`); start nothing, write nothing.

    omnidecision eval --config configs/eval/qwen3-8b-sft.yaml --serve.model runs/export/qwen3-8b-grpo --dry-run
"""

from __future__ import annotations

from pathlib import Path

from omnidecision.eval.checklist import PreparedEval, prepare_eval
from omnidecision.eval.serve import serve_report
from omnidecision.preflight import Check, DryRunReport
from omnidecision.rollout.checks import rollout_checks
from omnidecision.rollout.deprecated import aliases
from omnidecision.rollout.recipe import EvalRecipe


def dry_run_report(prepared: PreparedEval, config: Path, n_overrides: int, command: str = "eval") -> DryRunReport:
    """The dry-run report of a prepared eval (`checklist.prepare_eval`): the rollout engine's checks (tasks,
    backends, judge, services, out; a live environment's endpoints asked and media files looked for) on the one
    selection the run reads, the run's own checklist, and the server its `serve:` block would start."""
    recipe = prepared.recipe
    report = DryRunReport(command=command, recipe=str(config), resolved=recipe.model_dump(mode="json"))
    report.checks.append(Check(what="recipe", status="ok", detail=f"{config} + {n_overrides} override(s)"))
    # the output checks read the file the run writes (OUT/trajectories.jsonl unsharded), not the engine's shard name
    report.checks.extend(rollout_checks(recipe, prepared.selection, prepared.served_roles, prepared.out_file))
    report.extra["environment"] = prepared.environment
    if prepared.overlap:
        report.extra["train_overlap"] = prepared.overlap
    report.checks.extend(prepared.checks)
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
    report.extra["served_roles"] = {role: s.request_name() for role in s.roles}
    return report


def eval_dry_run(recipe: EvalRecipe, config: Path, n_overrides: int, command: str = "eval") -> DryRunReport:
    """The dry-run report of an already loaded eval recipe."""
    return dry_run_report(prepare_eval(recipe), config, n_overrides, command)


# the server's checks moved to eval.serve (beside the server they check), one release
__getattr__ = aliases(__name__, {"serve_report": "omnidecision.eval.serve.serve_report"},
                      {"omnidecision.eval.serve.serve_report": serve_report})
