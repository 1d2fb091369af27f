"""`--dry-run` of `omnidecision serve`, `eval` and `ablate`: the vLLM command a real run would start (checked by the
installed vLLM's own argument parser when vLLM is importable here), its environment, the model and adapters, and
for eval the checks its run makes (`eval.runner`: environment, train/test, on the one `TaskSelection` the run
reads); start nothing, write nothing.

    omnidecision serve Qwen/Qwen3-8B --lora planner=runs/export/grpo-adapter --max-lora-rank 64 --dry-run
    omnidecision eval --config configs/eval/qwen3-8b-sft.yaml --serve.model runs/export/qwen3-8b-grpo --dry-run
"""

from __future__ import annotations

import shlex
from pathlib import Path

from omnidecision.eval.runner import environment_checks, environment_label, overlap_checks
from omnidecision.preflight import DryRunReport, check_adapter, check_model
from omnidecision.rollout.checks import live_checks, recipe_checks
from omnidecision.rollout.recipe import RecipeError
from omnidecision.rollout.runner import TaskSelection
from omnidecision.serving.vllm_server import API_SERVER_MODULE as API_SERVER


def serve_report(report: DryRunReport, server) -> None:
    """Add the checks of a `VLLMServer` (not started) and the command it would run to `report`."""
    from omnidecision.serving.vllm_server import vllm_arg_error

    model_check = check_model(server.model, "model")
    if model_check.status == "ok" and (Path(server.model) / "adapter_config.json").exists():
        # vLLM loads a full model; an adapter rides on its base
        model_check.status, model_check.detail = "error", (
            f"{server.model} is a LoRA adapter: serve its base with --lora NAME={server.model} (or export --merge)")
    report.checks.append(model_check)
    for name, path in server.lora_modules.items():
        report.checks.append(check_adapter(name, path))
    if server.lora_modules:
        why = server.lora_rank_problem()
        ranks = ", ".join(f"{n} r={r}" for n, r in server.adapter_ranks().items()) if why is None else ""
        how = "given" if server.max_lora_rank is not None else "from adapter_config.json"
        detail = why or f"--max-lora-rank {server.lora_rank()} ({how}; {ranks})"
        report.add("lora rank", "error" if why else "ok", detail)
        if (clash := server.name_problem()) is not None:
            report.add("lora names", "error", clash)
        base_problem = server.lora_base_problem()
        report.add("lora base", "error" if base_problem else "ok",
                   base_problem or f"every adapter's recorded base is the served model {server.model}")
    cmd = server.command()
    shown = server.display_command()  # `--api-key X` shows as `--api-key ***`
    env = server.environment_overrides(Path("<private-temp-dir>"))
    report.would_run.append(" ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(shown)]))
    report.extra.update({"vllm_command": shown, "served_names": [server.served_name, *server.lora_modules],
                         "base_url": server.base_url})
    server_args = cmd[cmd.index(API_SERVER) + 1:]
    try:
        error = vllm_arg_error(server_args)
    except ImportError:
        report.add("vllm arguments", "deferred", "vLLM is not installed here: its parser checks them on the server")
    else:
        report.add("vllm arguments", "error" if error else "ok", error or "accepted by the installed vLLM's parser")


def environment_report(report: DryRunReport, recipe, selection: TaskSelection) -> None:
    """The run's environment checks (`eval.runner.environment_checks`), and a live environment's endpoints asked and
    media files looked for on the run's tasks, as collect's dry run does (the roles a `serve:` block points at its
    own server are checked once it runs)."""
    report.checks.extend(environment_checks(recipe))
    report.extra["environment"] = environment_label(recipe)
    served = set(recipe.serve.roles) if recipe.serve is not None else set()
    checked = {role: spec for role, spec in recipe.backends.items() if role not in served}
    live_checks(report, recipe.model_copy(update={"backends": checked}), selection)


def overlap_report(report: DryRunReport, recipe, selection: TaskSelection) -> None:
    """The run's train/test checks (`eval.runner.overlap_checks`) on the run's tasks; an unreadable task file or
    provenance is the check's error."""
    try:
        checks, info = overlap_checks(recipe, selection)
    except (RecipeError, ValueError, OSError) as exc:
        report.add("train/test", "error", str(exc))
        return
    report.extra["train_overlap"] = info
    report.checks.extend(checks)


def prices_check(report: DryRunReport, recipe) -> None:
    """The recipe's price table parses (the report's cost per call kind), or the error names the file and field."""
    from omnidecision.eval.prices import PriceTableError, load_prices

    if not recipe.prices:
        report.add("prices", "ok", "no price table: the report lists every call kind as unpriced")
        return
    try:
        table = load_prices(recipe.prices)
    except PriceTableError as exc:
        report.add("prices", "error", str(exc))
        return
    report.add("prices", "ok", f"{recipe.prices}: {len(table.models)} model(s), kinds {', '.join(table.kinds)}")


def eval_dry_run(recipe, config: Path, n_overrides: int, command: str = "eval") -> DryRunReport:
    """The dry-run report of an already loaded eval recipe."""
    from omnidecision.serving.vllm_server import VLLMServer

    report = DryRunReport(command=command, recipe=str(config), resolved=recipe.model_dump(mode="json"))
    report.add("recipe", "ok", f"{config} + {n_overrides} override(s)")
    selection = TaskSelection(recipe)  # the tasks, selected once, as the run selects them
    recipe_checks(report, recipe, selection)
    environment_report(report, recipe, selection)
    overlap_report(report, recipe, selection)
    prices_check(report, recipe)
    s = recipe.serve
    if s is None:
        report.add("serve", "ok", "none: the planner is the recipe's endpoint")
        return report
    extra = list(s.extra_args) + (["--tensor-parallel-size", str(s.tensor_parallel_size)]
                                  if s.tensor_parallel_size else [])
    server = VLLMServer(s.model, port=s.port or 8000, lora_modules=s.loras, extra_args=extra,
                        served_name=s.served_name, max_model_len=s.max_model_len, max_lora_rank=s.max_lora_rank,
                        fresh_cache=s.fresh_cache)
    serve_report(report, server)
    report.extra["served_roles"] = {role: s.request_name() for role in s.roles}
    return report
