"""The data card of a harvest: DIR/data_card.json and DIR/DATA_CARD.md, written by `omnidecision harvest` next to
the datasets it describes (DIR/sft, DIR/rl, DIR/stats.json, DIR/task_ids.json).

    omnidecision harvest runs/collect --out data/harvest --tokenizer Qwen/Qwen3-8B   # + data/harvest/DATA_CARD.md

What a card holds:

- `runs`: runs read (duplicates by run_id dropped), `correct_runs` (judged correct) and `pass_rate`, outcomes;
- `rows`: SFT and RL rows per split, and per task (`tasks` with at least one row, `mean` and `max` rows per such
  task); row lengths (`length`: mean, p95, max and total) in `length_unit`: `tokens` counted with the harvest's
  `--tokenizer`, else with the tokenizer of the planner the collection served (its manifest's `serve.model`, when
  that is a local folder with a tokenizer), else `chars` (the characters of every message); `tokenizer` and
  `tokenizer_from` say which;
- `models`: the collecting models per role: `requested` (each collection manifest's `backends`: kind and model),
  `reported` (the names the endpoints reported: a manifest's `endpoint_models`, else read from the records);
- `tasks`: the task files the collections drew from (each manifest's `recipe.tasks`: path, format, ids_file,
  filters), the task ids (their count per split; the ids themselves are in `task_ids.json`, which SFT, export and
  `eval` read for the train/test separation).

`build_card(CardInputs(...))` returns the card's dict; `render_card(card)` its markdown.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnidecision.protocol.records import RunRecord, endpoint_models

logger = logging.getLogger(__name__)

DATA_CARD_JSON = "data_card.json"
DATA_CARD_MD = "DATA_CARD.md"
TASK_FILTERS = ("ids_file", "ids", "levels", "categories", "offset", "limit")


def read_manifests(files: Iterable[str]) -> dict[str, dict[str, Any]]:
    """folder → its manifest.json (the collection's recipe, backends, ...), for the folder of each trajectory file;
    a folder without a readable manifest is left out."""
    out: dict[str, dict[str, Any]] = {}
    for folder in dict.fromkeys(str(Path(f).parent) for f in files):
        try:
            manifest = json.loads((Path(folder) / "manifest.json").read_text("utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(manifest, dict):
            out[folder] = manifest
    return out


def recipe_tokenizer(manifests: dict[str, dict[str, Any]]) -> str | None:
    """The tokenizer of the planner a collection served (`recipe.serve.model`), when it is a local folder that holds
    one; None otherwise (an API planner has no tokenizer at hand)."""
    for manifest in manifests.values():
        model = ((manifest.get("recipe") or {}).get("serve") or {}).get("model")
        if model and (Path(model) / "tokenizer_config.json").is_file():
            return str(model)
    return None


def _requested(manifests: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    seen: dict[str, set[str]] = {}
    for manifest in manifests.values():
        for role, spec in (manifest.get("backends") or {}).items():
            if isinstance(spec, dict):
                seen.setdefault(role, set()).add(f"{spec.get('kind', '?')}:{spec.get('model') or '-'}")
        judge = ((manifest.get("recipe") or {}).get("judge") or {}).get("llm")
        if isinstance(judge, dict):
            seen.setdefault("judge", set()).add(f"{judge.get('kind', '?')}:{judge.get('model') or '-'}")
    return {role: sorted(v) for role, v in sorted(seen.items())}


def _reported(manifests: dict[str, dict[str, Any]], records: list[RunRecord]) -> dict[str, list[str]]:
    seen: dict[str, set[str]] = {}
    for source in [m["endpoint_models"] for m in manifests.values() if m.get("endpoint_models")] or \
            [endpoint_models(records)]:
        for role, models in source.items():
            seen.setdefault(role, set()).update(models)
    return {role: sorted(v) for role, v in sorted(seen.items())}


def _task_sources(manifests: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for folder, manifest in manifests.items():
        tasks = (manifest.get("recipe") or {}).get("tasks") or {}
        if tasks:
            entry = {"collection": folder, "path": tasks.get("path"), "format": tasks.get("format")}
            entry.update({k: tasks[k] for k in TASK_FILTERS if tasks.get(k) not in (None, 0, [])})
            out.append(entry)
    return out


def per_task(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows per task over the tasks with at least one row: how many tasks, the mean and the max."""
    counts = Counter(r["task_id"] for r in rows)
    return {"tasks": len(counts), "mean": round(sum(counts.values()) / len(counts), 2) if counts else 0.0,
            "max": max(counts.values(), default=0)}


def _length(values: list[int], stats: dict[str, float]) -> dict[str, Any]:
    return {**stats, "total": sum(values)}


@dataclass(frozen=True)
class CardInputs:
    """What `run_harvest` built and the card describes: its stats, the kept runs and their manifests, both datasets'
    rows, their lengths, the tokenizer that measured them, the task split."""

    stats: dict[str, Any]
    records: list[RunRecord]
    manifests: dict[str, dict[str, Any]]
    sft: list[dict[str, Any]]
    rl: list[dict[str, Any]]
    lengths: dict[str, list[int]]
    length_stats: dict[str, dict[str, float]]
    tokenizer: str | None
    tokenizer_from: str | None
    split: dict[str, str]
    task_ids_file: str


def build_card(inputs: CardInputs) -> dict[str, Any]:
    """The card's dict (module docstring) from what `run_harvest` built."""
    stats, records, manifests, sft, rl = inputs.stats, inputs.records, inputs.manifests, inputs.sft, inputs.rl
    lengths, length_stats, split, task_ids_file = inputs.lengths, inputs.length_stats, inputs.split, \
        inputs.task_ids_file
    tokenizer, tokenizer_from = inputs.tokenizer, inputs.tokenizer_from
    runs = stats["runs"]
    return {
        "sources": stats["sources"],
        "runs": runs, "duplicate_runs": stats["duplicate_runs"], "correct_runs": stats["correct_runs"],
        "pass_rate": round(stats["correct_runs"] / runs, 4) if runs else None, "outcomes": stats["outcomes"],
        "label": stats["options"].get("label"),
        # where the tokenizer came from: None when none was used (chars), whatever the caller looked for
        "length_unit": "tokens" if tokenizer else "chars", "tokenizer": tokenizer,
        "tokenizer_from": tokenizer_from if tokenizer else None,
        "rows": {
            kind: {"train": stats[kind]["train"], "validation": stats[kind]["validation"], "total": len(rows),
                   "per_task": per_task(rows), "length": _length(lengths[kind], length_stats[kind])}
            for kind, rows in (("sft", sft), ("rl", rl))
        },
        "models": {"requested": _requested(manifests), "reported": _reported(manifests, records)},
        "tasks": {"n": stats["tasks"], "splits": {s: sum(v == s for v in split.values()) for s in
                                                  ("train", "validation")},
                  "ids_file": task_ids_file, "task_files": _task_sources(manifests)},
        "collections": [{"folder": folder, "config_digest": m.get("config_digest"),
                         "git_revision": m.get("git_revision")} for folder, m in manifests.items()],
    }


def render_card(card: dict[str, Any]) -> str:
    """DATA_CARD.md: what the datasets hold and where they come from."""
    unit = card["length_unit"]
    how = (f"tokens, counted with the tokenizer `{card['tokenizer']}` ({card['tokenizer_from']})" if unit == "tokens"
           else "characters of the messages (no tokenizer at hand: `--tokenizer DIR` counts tokens)")
    pass_rate = "–" if card["pass_rate"] is None else f"{100 * card['pass_rate']:.1f}%"
    lines = ["# Data card", "",
             f"Harvested from {', '.join(f'`{s}`' for s in card['sources'])}: **{card['runs']} runs**, "
             f"{card['correct_runs']} judged correct (pass rate {pass_rate}); SFT labels: {card['label']}.",
             "", "Outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(card["outcomes"].items())), "",
             "## Rows", "", f"Lengths in {how}.", "",
             "| dataset | train | validation | tasks with rows | rows per task (mean / max) | "
             f"{unit} per row (mean / p95 / max) | {unit} in all |", "|---|---|---|---|---|---|---|"]
    for kind, r in card["rows"].items():
        pt, ln = r["per_task"], r["length"]
        lines.append(f"| {kind} | {r['train']} | {r['validation']} | {pt['tasks']} | {pt['mean']} / {pt['max']} | "
                     f"{ln['mean']} / {ln['p95']:g} / {ln['max']:g} | {ln['total']} |")
    lines += ["", "## Collecting models", "", "| role | requested (recipe) | reported by the endpoint |",
              "|---|---|---|"]
    models = card["models"]
    for role in sorted(set(models["requested"]) | set(models["reported"])):
        lines.append(f"| {role} | {', '.join(models['requested'].get(role, [])) or '–'} | "
                     f"{', '.join(models['reported'].get(role, [])) or '–'} |")
    tasks = card["tasks"]
    lines += ["", "## Tasks", "",
              f"{tasks['n']} task ids ({tasks['splits']['train']} train, {tasks['splits']['validation']} validation), "
              f"listed in `{tasks['ids_file']}` (a planner trained on these rows is not evaluated on them).", ""]
    for t in tasks["task_files"]:
        filters = ", ".join(f"{k}={t[k]}" for k in TASK_FILTERS if k in t)
        lines.append(f"- `{t['path']}` ({t['format']}{'; ' + filters if filters else ''}), collected into "
                     f"`{t['collection']}`")
    if not tasks["task_files"]:
        lines.append("- no collection manifest found next to the trajectories: the task files are not known")
    return "\n".join(lines) + "\n"


def write_card(folder: Path, card: dict[str, Any]) -> None:
    """DIR/data_card.json and DIR/DATA_CARD.md."""
    (folder / DATA_CARD_JSON).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / DATA_CARD_MD).write_text(render_card(card), encoding="utf-8")
