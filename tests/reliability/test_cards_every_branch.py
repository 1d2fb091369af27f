"""Every field a provenance or data card carries, checked on every branch that writes it (issue 65, item 7: a field
written only on the less-used branch of a provenance writer went unnoticed by the whole suite).

The provenance fields are read from the pydantic models (`Provenance`, `Lineage`, `TrainingTasks`, `ExportInfo`):
each has a rule here, and a field added to a model without one fails `test_every_model_field_has_a_rule`. A rule
says what the field must hold on a branch (the stage, the start model, the adapter's base, the task ids the data
had, the export's mode...), so an absent, empty or stale field fails.

- fast: the writers' own branches on the session's tiny planner, no trainer: `record_training` of full weights from
  a start without provenance and of a LoRA adapter from a start with one; `export` full, adapter, merged, an
  adapter with `--base-model` naming another copy of its base, and a run from before provenance.json (its
  sft_run.json only). The harvest's data card (a plain dict, no model: its
  keys are the union over the branches, each with a rule) with and without a tokenizer, with and without the
  collection's manifest.
- long: the same checks on the cards real tiny runs write: sft (full, LoRA), grpo (full, LoRA), judge train, an SFT
  on rft-select's rows, and exports of the LoRA runs (adapter, merged) and of a full run.

    .venv/bin/pytest tests/reliability/test_cards_every_branch.py -q            # fast part
    .venv/bin/pytest tests/reliability/test_cards_every_branch.py -q -m long    # real stages
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.collect.datacard import DATA_CARD_JSON
from omnidecision.collect.harvest import HarvestOptions, run_harvest
from omnidecision.export import export
from omnidecision.protocol.chat import BackendSpec
from omnidecision.provenance import (
    PROVENANCE_FILE,
    ExportInfo,
    Lineage,
    Provenance,
    TrainingTasks,
    record_training,
    training_tasks,
    write_task_ids,
)
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.runner import run_tasks
from omnidecision.synthetic.tiny import build_tiny_planner, harvest_texts
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.synth import write_suite
from tests.eval.test_provenance_stages import _grpo as grpo_run
from tests.eval.test_provenance_stages import _sft

ROOT = Path(__file__).resolve().parents[2]

Rule = Callable[[Any], bool]

# the keys `omnidecision export` adds to the training stage's provenance (export.py `_write_export`: the flat keys of
# earlier cards, kept for their readers), each with a rule below
EXPORT_FLAT = ("exported_at", "source_checkpoint", "mode", "training_git_revision", "final_metrics", "dataset")


def _abs(path: str | Path | None) -> str | None:
    return None if path is None else str(Path(path).resolve())


def _is_time(value: Any) -> bool:
    try:
        return dt.datetime.fromisoformat(value).tzinfo is not None
    except (TypeError, ValueError):
        return False


def _filled(value: Any) -> bool:
    return value not in (None, "", [], {})


@dataclass
class Branch:
    """What a card must say on one branch: the training run's facts, and the export's when it is one."""

    name: str
    stage: str
    run_dir: Path  # the training run's output_dir
    start_model: Path
    dataset: Path
    task_ids: set[str]
    adapter_base: str | None = None  # the base of the trained adapter (None: full weights)
    upstream: list[str] = field(default_factory=list)  # the start model's stages, nearest first
    global_step: int = 1
    export_mode: str | None = None  # None: the training run's own card
    export_base: str | None = None  # the base an adapter export was given (default: adapter_base)

    @property
    def base(self) -> str | None:
        return self.export_base or self.adapter_base

    def lineage_adapter(self) -> bool:
        return self.export_mode == "adapter" if self.export_mode else self.adapter_base is not None


def provenance_rules(b: Branch) -> dict[str, Rule]:
    """A rule per `Provenance` field on branch `b`."""
    exported = b.export_mode is not None
    return {
        "stage": lambda v: v == b.stage,
        "output_dir": lambda v: v == _abs(b.run_dir),
        "written_at": _is_time,
        "git_revision": _filled,  # on an export: the export's revision (training_git_revision: the training's)
        "training_tasks": lambda v: isinstance(v, dict) and _check(v, tasks_rules(b), "training_tasks"),
        # an export keeps the stats and names the dataset at the top (`dataset`); the run's card names it in `data`
        "data": lambda v: _filled(v) and (("dataset" not in v) if exported else v.get("dataset") == str(b.dataset)),
        "recipe": _filled,
        "base_model": lambda v: v == (b.base if exported and b.base else str(b.start_model)),
        "lineage": lambda v: isinstance(v, dict) and _check(v, lineage_rules(b), "lineage"),
        "metrics": lambda v: _filled(v) and "train_runtime" in v,
        "global_step": lambda v: v == b.global_step,
        "export": (lambda v: isinstance(v, dict) and _check(v, export_rules(b), "export")) if exported else
                  (lambda v: v is None),
    }


def tasks_rules(b: Branch) -> dict[str, Rule]:
    return {"ids": lambda v: set(v) == b.task_ids and v == sorted(v), "n": lambda v: v == len(b.task_ids),
            "sources": lambda v: _filled(v) and all(_filled(s) for s in v)}


def lineage_rules(b: Branch) -> dict[str, Rule]:
    base = b.base if b.export_mode else b.adapter_base
    return {
        "start_model": lambda v: v == str(b.start_model),
        "start_model_resolved": lambda v: v == _abs(b.start_model),
        "adapter": lambda v: v is b.lineage_adapter(),
        "adapter_base": lambda v: v == base,
        "adapter_base_resolved": lambda v: v == _abs(base),
        "upstream": lambda v: [u.get("stage") for u in v] == b.upstream and all(_filled(u.get("output_dir"))
                                                                                 for u in v),
    }


def export_rules(b: Branch) -> dict[str, Rule]:
    return {"exported_at": _is_time, "source_checkpoint": lambda v: v == _abs(b.run_dir),
            "mode": lambda v: v == b.export_mode, "git_revision": _filled}


def export_flat_rules(b: Branch) -> dict[str, Rule]:
    return {"exported_at": _is_time, "source_checkpoint": lambda v: v == _abs(b.run_dir),
            "mode": lambda v: v == b.export_mode, "training_git_revision": _filled,
            "final_metrics": lambda v: _filled(v) and "train_runtime" in v, "dataset": lambda v: v == str(b.dataset)}


def _check(card: dict[str, Any], rules: dict[str, Rule], where: str) -> bool:
    """Every rule holds (a field absent from the card fails, naming it)."""
    bad = [f"{where}.{k}={card.get(k, '<absent>')!r}" for k, rule in rules.items() if k not in card or
           not rule(card[k])]
    assert not bad, f"fields wrong or missing: {bad}"
    return True


def check_provenance(folder: Path, b: Branch) -> dict[str, Any]:
    """Read `folder/provenance.json` and check every field of the card models on branch `b`."""
    card = json.loads((folder / PROVENANCE_FILE).read_text("utf-8"))
    rules = provenance_rules(b)
    if b.export_mode:
        rules.update({k: r for k, r in export_flat_rules(b).items() if k not in rules})
        assert set(card) == set(rules), (f"{b.name}: keys without a rule {sorted(set(card) - set(rules))}, "
                                         f"keys missing {sorted(set(rules) - set(card))}")
    try:
        _check(card, rules, b.name)
    except AssertionError as exc:
        raise AssertionError(f"{b.name} ({folder}): {exc}") from None
    Provenance.model_validate(card)  # and it reads back as the model
    if b.export_mode:
        md = (folder / "PROVENANCE.md").read_text("utf-8")
        assert f"({b.export_mode})" in md and f"{len(b.task_ids)} task ids" in md, md
    return card


def test_every_model_field_has_a_rule(tmp_path):
    b = Branch("any", "sft", tmp_path, tmp_path, tmp_path, {"t"}, export_mode="adapter")
    for model, rules in ((Provenance, provenance_rules(b)), (Lineage, lineage_rules(b)),
                         (TrainingTasks, tasks_rules(b)), (ExportInfo, export_rules(b))):
        fields = set(model.model_fields)
        assert set(rules) == fields, (f"{model.__name__}: fields without a rule {sorted(fields - set(rules))}, "
                                      f"rules without a field {sorted(set(rules) - fields)}")


# ---------------------------------------------------------------- fast: the writers' branches, no trainer


RECIPE = {"training": {"max_steps": 1, "learning_rate": 1e-4}, "model": {"use_peft": False}}
METRICS = {"train_runtime": 0.5, "train_loss": 1.25}


@pytest.fixture(scope="module")
def written(tiny_model_dir, tmp_path_factory) -> dict[str, Any]:
    """A full-weights run from the tiny planner (no provenance upstream) and a LoRA run on top of it (upstream: that
    run), their cards written by `record_training` as the stages call it; the dataset names its tasks."""
    from peft import LoraConfig, get_peft_model  # peft: heavy, deferred
    from transformers import AutoModelForCausalLM, AutoTokenizer  # as above

    root = tmp_path_factory.mktemp("cards")
    data = root / "data" / "sft"
    ids = TrainingTasks(ids=["task-a", "task-b", "task-c"], n=3, sources=["test"])
    write_task_ids(data.parent, ids)
    full = root / "full"
    shutil.copytree(tiny_model_dir, full)
    record_training(full, stage="sft", start_model=str(tiny_model_dir), dataset=str(data), recipe=RECIPE,
                    data={"train": {"rows": 8}}, metrics=METRICS, global_step=1)
    lora = root / "lora"
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(full)),
                           LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    model.save_pretrained(str(lora))
    AutoTokenizer.from_pretrained(str(full)).save_pretrained(str(lora))
    record_training(lora, stage="grpo", start_model=str(full), dataset=str(data), recipe=RECIPE,
                    data={"train_states": 8}, metrics=METRICS, global_step=1)
    return {"root": root, "data": data, "ids": set(ids.ids), "full": full, "lora": lora, "start": tiny_model_dir}


def test_record_training_full_and_adapter_branches(written):
    w = written
    check_provenance(w["full"], Branch("sft full", "sft", w["full"], w["start"], w["data"], w["ids"]))
    check_provenance(w["lora"], Branch("grpo adapter", "grpo", w["lora"], w["full"], w["data"], w["ids"],
                                       adapter_base=str(w["full"]), upstream=["sft"]))


def test_export_full_adapter_merged_and_another_base(written):
    w = written
    full_b = Branch("export full", "sft", w["full"], w["start"], w["data"], w["ids"], export_mode="full")
    check_provenance(export(w["full"], w["root"] / "x-full"), full_b)
    lora_b = dict(stage="grpo", run_dir=w["lora"], start_model=w["full"], dataset=w["data"], task_ids=w["ids"],
                  adapter_base=str(w["full"]), upstream=["sft"])
    check_provenance(export(w["lora"], w["root"] / "x-adapter"), Branch("export adapter", export_mode="adapter",
                                                                        **lora_b))
    check_provenance(export(w["lora"], w["root"] / "x-merged", merge=True),
                     Branch("export merged", export_mode="merged", **lora_b))
    # the adapter exported onto another copy of its base (`--base-model`): every field names that base
    other = w["root"] / "base-copy"
    shutil.copytree(w["full"], other)
    check_provenance(export(w["lora"], w["root"] / "x-other", base_model=str(other)),
                     Branch("export adapter --base-model", export_mode="adapter", export_base=str(other), **lora_b))


def test_export_of_a_run_from_before_provenance_json(written):
    """An SFT run from before provenance.json (its sft_run.json, in the keys sft/train.py writes, is all there is):
    the export's card carries every field, as for a run with provenance.json."""
    w = written
    legacy = w["root"] / "legacy"
    shutil.copytree(w["full"], legacy)
    prov = json.loads((legacy / PROVENANCE_FILE).read_text("utf-8"))
    (legacy / PROVENANCE_FILE).unlink()
    run = {"output_dir": str(legacy), "global_step": 1, "metrics": METRICS,
           "data": {"train": {"rows": 8}, "training_tasks": prov["training_tasks"]}, "base_model": str(w["start"]),
           "use_peft": False, "git_revision": prov["git_revision"],
           "recipe": {**RECIPE, "script": {"dataset_name": str(w["data"])}}}
    (legacy / "sft_run.json").write_text(json.dumps(run), "utf-8")
    check_provenance(export(legacy, w["root"] / "x-legacy"),
                     Branch("export of a run card", "sft", legacy, w["start"], w["data"], w["ids"],
                            export_mode="full"))


# ---------------------------------------------------------------- the harvest's data card


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> Path:
    """A teacher collection of 6 synthetic tasks with its manifest, as `collect` leaves it."""
    root = tmp_path_factory.mktemp("card-runs")
    write_suite(6, 3, root / "tasks")
    tasks = load_tasks(root / "tasks", "synthetic")
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": 0.1, "seed": 0})})
    asyncio.run(run_tasks(tasks, AgentConfig(), backends, RolloutOptions(
        out_file=shard_path(root / "runs", 0, 1), samples=1, concurrency=6, progress=False)))
    manifest = {"recipe": {"tasks": {"path": str(root / "tasks"), "format": "synthetic", "limit": 6},
                           "backends": {"default": {"kind": "teacher", "model": ""}}},
                "backends": {"default": {"kind": "teacher", "model": ""}}, "config_digest": "abc123",
                "git_revision": "rev0"}
    (root / "runs" / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    return root / "runs"


def card_rules(tokenizer: str | None, runs: Path, manifest: bool, tokenizer_from: str | None = None,
               tasks_dir: Path | None = None) -> dict[str, Rule]:
    """A rule per key of data_card.json on a harvest branch (tokens, from --tokenizer or the collection's served
    planner, or chars; with or without the manifest)."""
    unit = "tokens" if tokenizer else "chars"
    tasks_dir = tasks_dir or runs.parent / "tasks"

    def rows(v: dict) -> bool:
        return set(v) == {"sft", "rl"} and all(
            r["train"] > 0 and r["validation"] >= 0 and r["total"] == r["train"] + r["validation"]
            and r["per_task"]["tasks"] > 0 and r["length"]["total"] > 0 and r["length"]["max"] >= r["length"]["mean"]
            > 0 for r in v.values())

    return {
        "sources": lambda v: v == [str(runs)],
        "runs": lambda v: v == 6, "duplicate_runs": lambda v: v == 0, "correct_runs": lambda v: 0 <= v <= 6,
        "pass_rate": lambda v: 0.0 <= v <= 1.0, "outcomes": lambda v: sum(v.values()) == 6,
        "label": _filled, "length_unit": lambda v: v == unit, "tokenizer": lambda v: v == tokenizer,
        "tokenizer_from": lambda v: v == (tokenizer_from if tokenizer else None),
        "rows": rows,
        "models": lambda v: set(v) == {"requested", "reported"} and _filled(v["reported"]) and (
            v["requested"] == {"default": ["teacher:-"]} if manifest else v["requested"] == {}),
        "tasks": lambda v: v["n"] == 6 and sum(v["splits"].values()) == 6 and v["ids_file"] == "task_ids.json" and (
            [t["path"] for t in v["task_files"]] == [str(tasks_dir)] if manifest else
            v["task_files"] == []),
        "collections": lambda v: (v == [{"folder": str(runs), "config_digest": "abc123", "git_revision": "rev0"}]
                                  if manifest else v == []),
    }


def test_data_card_every_field_on_every_harvest_branch(collection, tiny_model_dir, tmp_path):
    bare = tmp_path / "bare"  # the same runs without their manifest
    served = tmp_path / "served"  # with a manifest whose collection served a local planner (its tokenizer counts)
    for folder in (bare, served):
        folder.mkdir()
        for f in collection.glob("trajectories*.jsonl"):
            shutil.copy2(f, folder / f.name)
    manifest = json.loads((collection / "manifest.json").read_text("utf-8"))
    manifest["recipe"]["serve"] = {"model": str(tiny_model_dir)}
    manifest["config_digest"] = "abc123"
    (served / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    keys: set[str] = set()
    for name, runs, tokenizer, source in (
            ("chars + manifest", collection, None, None),
            ("tokens from --tokenizer", collection, str(tiny_model_dir), "--tokenizer"),
            ("tokens from the served planner", served, None, "the planner the collection served"),
            ("chars, no manifest", bare, None, None)):
        out = tmp_path / name.replace(" ", "-").replace(",", "").replace("+", "")
        run_harvest([str(runs)], out, HarvestOptions(val_fraction=0.3, tokenizer=tokenizer))
        card = json.loads((out / DATA_CARD_JSON).read_text("utf-8"))
        used = tokenizer or (str(tiny_model_dir) if runs == served else None)
        rules = card_rules(used, runs, manifest=runs != bare, tokenizer_from=source,
                           tasks_dir=collection.parent / "tasks")
        assert set(card) == set(rules), (f"{name}: keys without a rule {sorted(set(card) - set(rules))}, "
                                         f"keys missing {sorted(set(rules) - set(card))}")
        bad = [f"{k}={card[k]!r}" for k, rule in rules.items() if not rule(card[k])]
        assert not bad, f"{name}: data card fields wrong: {bad}"
        keys |= set(card)
        md = (out / "DATA_CARD.md").read_text("utf-8")
        assert ("counted with the tokenizer" in md) == bool(used), md
    assert keys == set(card_rules(None, collection, True))


# ---------------------------------------------------------------- long: the cards real tiny runs write


def _grpo(model: Path, data: Path, out: Path, *extra: str) -> Path:
    """One GRPO step keeping its final weights (the card's fields do not depend on which are kept)."""
    return grpo_run(model, data, out, "--checkpoint_policy", "final", *extra)


def _judge(model: Path, data: Path, out: Path) -> Path:
    from omnidecision.rl.judge_config import parse_args  # imports trl: deferred to the long test
    from omnidecision.rl.judge_train import main  # as above

    main(*parse_args(["--config", str(ROOT / "configs" / "judge" / "tiny-cpu.yaml"), "--dataset_name", str(data),
                      "--model_name_or_path", str(model), "--output_dir", str(out), "--max_steps", "1",
                      "--per_device_train_batch_size", "2"]))
    return out


LORA = ("--use_peft", "true", "--lora_r", "4", "--lora_alpha", "8", "--lora_target_modules", "q_proj", "v_proj")


@pytest.mark.long  # eight tiny training runs and five exports (~60 s): `make long-test` (CI runs it)
@pytest.mark.requires("trl")
def test_cards_of_real_stage_runs(collection, tmp_path):
    h = tmp_path / "h"
    run_harvest([str(collection)], h, HarvestOptions(val_fraction=0.3))
    ids = set(json.loads((h / "task_ids.json").read_text("utf-8"))["ids"])
    planner = build_tiny_planner(tmp_path / "tiny", list(harvest_texts(h / "sft")), hidden=32, layers=1, heads=2,
                                 vocab_size=600, seed=0)

    def check(folder: Path, name: str, stage: str, start: Path, data: Path, **facts: Any) -> None:
        check_provenance(folder, Branch(name, stage, facts.pop("run_dir", folder), start, data, ids, **facts))

    sft = _sft(planner, h / "sft", tmp_path / "sft")
    check(sft, "sft", "sft", planner, h / "sft")
    sft_lora = _sft(planner, h / "sft", tmp_path / "sft-lora", *LORA)
    lora_facts = dict(run_dir=sft_lora, adapter_base=str(planner))
    check(sft_lora, "sft lora", "sft", planner, h / "sft", **lora_facts)
    check(export(sft_lora, tmp_path / "x-sft-adapter"), "sft lora export adapter", "sft", planner, h / "sft",
          export_mode="adapter", **lora_facts)
    check(export(sft_lora, tmp_path / "x-sft-merged", merge=True), "sft lora export merged", "sft", planner,
          h / "sft", export_mode="merged", **lora_facts)
    start = export(sft, tmp_path / "x-sft")
    check(start, "sft export full", "sft", planner, h / "sft", run_dir=sft, export_mode="full")

    grpo = _grpo(start, h / "rl", tmp_path / "grpo")
    check(grpo, "grpo", "grpo", start, h / "rl", upstream=["sft"])
    grpo_lora = _grpo(start, h / "rl", tmp_path / "grpo-lora", *LORA)
    lora_facts = dict(run_dir=grpo_lora, adapter_base=str(start), upstream=["sft"])
    check(grpo_lora, "grpo lora", "grpo", start, h / "rl", **lora_facts)
    check(export(grpo_lora, tmp_path / "x-grpo-adapter"), "grpo lora export adapter", "grpo", start, h / "rl",
          export_mode="adapter", **lora_facts)
    check(export(grpo_lora, tmp_path / "x-grpo-merged", merge=True), "grpo lora export merged", "grpo", start,
          h / "rl", export_mode="merged", **lora_facts)

    check(_judge(planner, h / "rl", tmp_path / "judge"), "judge", "judge", planner, h / "rl")
    rows = tmp_path / "rows-rft"  # what rft-select writes: SFT rows and their task ids, the stage named
    shutil.copytree(h / "sft", rows)
    write_task_ids(rows, training_tasks(h / "rl"), stage="rft")
    check(_sft(start, rows, tmp_path / "rft"), "sft on rft rows", "rft", start, rows, upstream=["sft"])
