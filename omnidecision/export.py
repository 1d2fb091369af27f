"""Export a trained planner as a plain Hugging Face checkpoint with a provenance card.

- LoRA run + `merge=True`: the adapter merged into its base (`merge_and_unload`), a full checkpoint.
- LoRA run + `merge=False`: the adapter kept as is, for `vllm ... --enable-lora --lora-modules planner=OUT`.
- Full fine-tuning run: the weights re-saved.
Always: `use_cache=True` restored (a model saved out of a trainer has it off), tokenizer and chat template
saved, and `PROVENANCE.md` + `provenance.json`: the training stage's own provenance.json
(`omnidecision.provenance`: the training task ids through every upstream stage, recipe, data, base model and adapter
lineage, git revision) with the export's block (mode, source, time, git revision).

    omnidecision export runs/sft/tiny-cpu --out runs/export/tiny --merge
    omnidecision export runs/sft/tiny-cpu --out runs/export/tiny --merge --dry-run   # check; write nothing
    python -m omnidecision.export CKPT OUT [--merge]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from omnidecision.modeling import is_adapter, load_planner
from omnidecision.outputs import output_problems, staged_output
from omnidecision.preflight import Check, DryRunReport, PreflightError, check_folder, check_model, require
from omnidecision.provenance import (
    PROVENANCE_FILE,
    ExportInfo,
    Lineage,
    Provenance,
    TrainingTasks,
    git_revision,
    read_provenance,
    resolved_path,
)

logger = logging.getLogger(__name__)

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json",
                   "vocab.json", "merges.txt", "tokenizer.model")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON: {exc}") from exc


def run_info(ckpt: Path) -> tuple[dict, list[dict]]:
    """The SFT run card and log history: in `ckpt`, else in its parent (for a `checkpoint-N` folder)."""
    run: dict = {}
    history: list[dict] = []
    for folder in (ckpt, ckpt.parent):
        run = run or _read_json(folder / "sft_run.json") or {}
        history = history or _read_json(folder / "log_history.json") or (
            (_read_json(folder / "trainer_state.json") or {}).get("log_history", []))
    return run, history


def final_metrics(history: list[dict]) -> dict[str, float]:
    """The last logged value of each metric (loss, eval_loss, train_loss, ...) plus the last step."""
    out: dict[str, float] = {}
    for entry in history:
        for k, v in entry.items():
            if isinstance(v, (int, float)) and k not in ("epoch",):
                out[k] = v
    return out


def export_checks(ckpt: str | Path, out: str | Path, merge: bool = False, base_model: str | None = None,
                  replace: bool = False) -> tuple[list[Any], str]:
    """(the checks `export` makes before it writes anything, the export mode): the checkpoint is a model or adapter
    folder, `--out` stays clear of it and of the base (`outputs.output_problems`: not the same folder, not holding
    or inside one; not a non-empty folder the project did not write unless `replace`), an adapter's base, the
    provenance, where the tokenizer comes from. One function for the dry run and the real run (`export` refuses
    through `preflight.require`)."""
    src, dst = Path(ckpt), Path(out)
    check = check_model(str(src), "checkpoint", local_only=True)
    if check.status != "ok":
        return [check], "full"
    checks = [check]
    problems = output_problems(dst, [src, base_model], replace=replace)
    checks.extend(Check(what="out", status="error", detail=p) for p in problems)
    if not problems:
        checks.append(check_folder(str(dst), "out", must_exist=False))
    mode, base = "full", None
    if is_adapter(src):
        base = base_model or (_read_json(src / "adapter_config.json") or {}).get("base_model_name_or_path")
        checks.append(check_model(base, "base_model") if base else
                      Check(what="base_model", status="error", detail=f"{src / 'adapter_config.json'}: no "
                                                                      "base_model_name_or_path; pass --base-model"))
        mode = "merged" if merge else "adapter"
    try:
        trained = read_provenance(src)
    except ValueError as exc:
        checks.append(Check(what="provenance", status="error", detail=str(exc)))
    else:
        tasks = trained.training_tasks if trained else None
        if tasks is None and (run_info(src)[0].get("data") or {}).get("training_tasks"):
            checks.append(Check(what="provenance", status="ok",
                                detail=f"from {src}'s sft_run.json (a run from before provenance.json)"))
        elif tasks is None:
            checks.append(Check(what="provenance", status="warning",
                                detail=f"{src}: no {PROVENANCE_FILE} with training task ids: eval will not be able "
                                       "to check train/test separation for this planner"))
        else:
            checks.append(Check(what="provenance", status="ok", detail=f"{tasks.n} training task ids ({trained.stage}"
                                + "".join(f" ← {u.get('stage')}" for u in trained.lineage.upstream) + ")"))
    if any((src / f).exists() for f in TOKENIZER_FILES):
        checks.append(Check(what="tokenizer", status="ok", detail=f"from {src}"))
    elif base:
        checks.append(Check(what="tokenizer", status="ok", detail=f"from the base model {base}"))
    else:
        checks.append(Check(what="tokenizer", status="error", detail=f"{src}: no tokenizer files "
                                                                     f"({', '.join(TOKENIZER_FILES[:2])}) and no base "
                                                                     "model to take them from"))
    return checks, mode


def export_dry_run(ckpt: str | Path, out: str | Path, merge: bool = False, base_model: str | None = None,
                   replace: bool = False) -> Any:
    """The `--dry-run` report of `export`: what the checkpoint is, the base a merge loads, what would be written."""
    src, dst = Path(ckpt), Path(out)
    report = DryRunReport(command="export", resolved={"checkpoint": str(src), "out": str(dst), "merge": merge,
                                                      "base_model": base_model})
    checks, mode = export_checks(src, dst, merge=merge, base_model=base_model, replace=replace)
    report.extend(checks)
    report.would_run = [f"export {mode} checkpoint {src} -> {dst} (+ tokenizer, PROVENANCE.md, provenance.json)"]
    report.extra = {"mode": mode}
    return report


def export(ckpt: str | Path, out: str | Path, merge: bool = False, base_model: str | None = None,
           replace: bool = False) -> Path:
    """Export `ckpt` (an SFT/GRPO output folder or one of its checkpoints) to `out`; returns `out`. Refuses
    (`preflight.PreflightError`, the dry run's words) before writing anything when `export_checks` fails; the files
    are written into a temp sibling renamed to `out` at the end (`outputs.staged_output`): a failure leaves `out`
    as it was."""
    src, dst = Path(ckpt), Path(out)
    require(export_checks(src, dst, merge=merge, base_model=base_model, replace=replace)[0])
    with staged_output(dst, [src, base_model], command="export", replace=replace) as tmp:
        mode = _write_export(src, tmp, merge=merge, base_model=base_model)
    logger.info("exported %s (%s) to %s", src, mode, dst)
    return dst


def _write_export(src: Path, dst: Path, merge: bool, base_model: str | None) -> str:
    """Write the export of `src` into the (temp) folder `dst`; returns the mode (merged, adapter, full)."""
    import torch
    from transformers import AutoTokenizer

    dst.mkdir(parents=True, exist_ok=True)
    adapter = is_adapter(src)
    base = base_model
    if adapter:
        cfg = _read_json(src / "adapter_config.json")
        base = base or cfg.get("base_model_name_or_path")

    # Weights
    if adapter and merge:
        model, _ = load_planner(src, merge=True, base_model=base, dtype="auto")
        mode = "merged"
    elif adapter:
        for name in ADAPTER_FILES:
            if (src / name).exists():
                shutil.copy2(src / name, dst / name)
        model, mode = None, "adapter"
    else:
        if merge:
            logger.info("%s is a full checkpoint; nothing to merge", src)
        model, _ = load_planner(src, dtype="auto")
        mode = "full"
    if model is not None:
        model.config.use_cache = True
        if model.generation_config is not None:
            model.generation_config.use_cache = True
        with torch.no_grad():
            model.save_pretrained(dst)

    # Tokenizer + chat template (from the run; else from the base)
    tok_src = src if any((src / f).exists() for f in TOKENIZER_FILES) else base
    if tok_src is None:
        raise ValueError(f"{src}: no tokenizer files and no base model to take them from")
    AutoTokenizer.from_pretrained(tok_src).save_pretrained(dst)

    # Provenance card: the training stage's provenance.json (every trained stage writes one; an old SFT run: its
    # sft_run.json), with the export's own block; the flat keys of earlier cards kept for their readers
    run, history = run_info(src)
    trained = read_provenance(src) or _from_run_card(run, run_card_time(src))
    exported = ExportInfo(exported_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                          source_checkpoint=str(src.resolve()), mode=mode, git_revision=git_revision())
    if adapter:  # the base this export rides on (or was merged into): --base-model when given, both spellings
        lineage = trained.lineage.model_copy(update={"adapter": mode == "adapter", "adapter_base": base,
                                                     "adapter_base_resolved": resolved_path(base)})
        trained = trained.model_copy(update={"lineage": lineage})
    card = trained.model_copy(update={"export": exported, "base_model": base or trained.base_model})
    data = {k: v for k, v in (card.data or {}).items() if k not in ("training_tasks", "dataset")}
    prov = {
        **card.model_dump(mode="json"),
        "exported_at": exported.exported_at,
        "source_checkpoint": exported.source_checkpoint,
        "mode": mode,
        "git_revision": exported.git_revision,
        "training_git_revision": trained.git_revision,
        "global_step": trained.global_step or run.get("global_step") or final_metrics(history).get("step"),
        "data": data or None,
        "final_metrics": trained.metrics or final_metrics(history),
    }
    if card.data and card.data.get("dataset"):
        prov["dataset"] = card.data["dataset"]
    (dst / PROVENANCE_FILE).write_text(json.dumps(prov, indent=1, default=str), encoding="utf-8")
    (dst / "PROVENANCE.md").write_text(render_card(prov), encoding="utf-8")
    return mode


def run_card_time(ckpt: Path) -> str | None:
    """When the run card `run_info` reads was written (its file's modification time, UTC), or None."""
    for folder in (ckpt, ckpt.parent):
        if (folder / "sft_run.json").is_file():
            stamp = (folder / "sft_run.json").stat().st_mtime
            return _dt.datetime.fromtimestamp(stamp, _dt.timezone.utc).isoformat(timespec="seconds")
    return None


def _from_run_card(run: dict, written_at: str | None = None) -> Provenance:
    """The provenance an SFT run written before provenance.json existed implies (its sft_run.json), or an empty
    record (`training_tasks` None: eval reports the planner as having no provenance). Every field the run card
    holds is carried as a written provenance.json carries it: the dataset (from the recipe) in `data`, the start
    model's absolute path, the card's time."""
    data = dict(run.get("data") or {})
    tasks = data.pop("training_tasks", None)
    dataset = ((run.get("recipe") or {}).get("script") or {}).get("dataset_name")
    if data and dataset:
        data = {"dataset": str(dataset), **data}
    start = run.get("base_model")
    return Provenance(stage="sft" if run else "unknown", output_dir=run.get("output_dir"), written_at=written_at,
                      git_revision=run.get("git_revision"),
                      training_tasks=TrainingTasks.model_validate(tasks) if tasks else None, data=data or None,
                      recipe=run.get("recipe"), base_model=start,
                      lineage=Lineage(start_model=start, start_model_resolved=resolved_path(start)),
                      metrics=run.get("metrics"), global_step=run.get("global_step"))


def render_card(prov: dict) -> str:
    """A short human-readable provenance card."""
    lines = [
        "# Planner checkpoint provenance",
        "",
        f"- exported: {prov['exported_at']} ({prov['mode']})",
        f"- source checkpoint: `{prov['source_checkpoint']}`",
        f"- base model: `{prov.get('base_model')}`",
        f"- git revision (export / training): `{prov.get('git_revision')}` / `{prov.get('training_git_revision')}`",
        f"- global step: {prov.get('global_step')}",
        f"- trained by: {prov.get('stage')}"
        + "".join(f" ← {u.get('stage')} (`{u.get('output_dir')}`)" for u in (prov.get('lineage') or {}).get(
            'upstream', [])),
    ]
    if prov.get("mode") == "adapter":
        base = prov.get("base_model")
        lines.append(f"- serve: `--enable-lora --lora-modules planner=<this folder>` on base `{base}`")
    if prov.get("data"):
        lines += ["", "## Data", "", "```json", json.dumps(prov["data"], indent=1), "```"]
    if prov.get("training_tasks"):
        tt = prov["training_tasks"]
        lines += ["", f"Trained on {tt.get('n')} task ids (listed in provenance.json `training_tasks`; from "
                      f"{', '.join(tt.get('sources') or [])}): evaluate it on other tasks."]
    else:
        lines += ["", "No training task ids are known for this planner: eval cannot check train/test separation."]
    if prov.get("final_metrics"):
        lines += ["", "## Final metrics", ""] + [f"- {k}: {v}" for k, v in sorted(prov["final_metrics"].items())]
    recipe = prov.get("recipe") or {}
    training = recipe.get("training") or {}
    keys = ("learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps",
            "num_train_epochs", "max_length", "assistant_only_loss", "packing", "lr_scheduler_type", "seed")
    if training:
        lines += ["", "## Recipe (main fields; full recipe in provenance.json)", ""]
        lines += [f"- {k}: {training.get(k)}" for k in keys if k in training]
        model = recipe.get("model") or {}
        if model.get("use_peft"):
            lines.append(f"- LoRA: r={model.get('lora_r')} alpha={model.get('lora_alpha')} "
                         f"targets={model.get('lora_target_modules')}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ckpt")
    p.add_argument("out")
    p.add_argument("--merge", action="store_true", help="merge a LoRA adapter into its base")
    p.add_argument("--base-model", default=None, help="base model for an adapter (default: from adapter_config)")
    p.add_argument("--replace", action="store_true", help="replace a non-empty out folder the project did not write")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    try:
        export(a.ckpt, a.out, merge=a.merge, base_model=a.base_model, replace=a.replace)
    except PreflightError as exc:
        p.exit(2, f"error: {exc}\n")


if __name__ == "__main__":
    main()
