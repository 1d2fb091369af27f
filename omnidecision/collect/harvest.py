"""Harvest trajectories into a state-SFT dataset and an RL state dataset (parquet, train/validation splits).

- SFT (judge-correct runs only): one row per valid planner decision, `messages` = the exact planner messages the
  agent sent at that step + the assistant action as emitted (`raw_output`); columns task_id, step, run_id,
  sample, level, category, source. Options: `advancing_only` (the step's events changed a need's status or
  value, verified a slot, resolved a conflict, or passed the finalizer check), `dedup` (same user message),
  `max_rows_per_task`. Invalid-action steps are skipped. With `label="rule"` (`--label rule`) instead: every
  state of every run (correct or not) with the rule planner's decision as the assistant turn; `switch_copies`
  (`--switch-copies K`) repeats each train row whose rule decision calls a need already called with a listed tool
  not tried on it yet (`is_switch`), K times (a teacher's runs hold few: 123 of 1,743 rows at one start; stats.json
  counts them as `sft.switch_rows`). Measured: it did not make the rule-labelled planner's switch reliable
  (docs/research/source-switch.md, "Too few switches?"), so the pipeline keeps K = 1. With `label="none"` (`--label
  none`, the own-states harvest) no SFT rows at all: the RL rows of a served planner's own runs are the
  product (GRPO trains on the states it visited, failed runs and correct ones alike; no label is needed, the
  candidates are scored by the closure checks and the judge).
- RL (all runs, ledger mode): one row per ledger state the planner saw, REBUILT by replaying the events (and
  checked byte for byte against the recorded snapshot): `prompt` (the planner messages), `ledger` (JSON),
  `question`, `actionable`, `blocked`, `finish_available`, `tool_call_counts` (JSON), `failed_calls` (JSON),
  task_id, run_id, step, level, category, outcome, correct, and what the collected planner did there: `decision`
  (its raw output; empty for an invalid one) and `advanced` (the step's events moved the ledger: see `advanced`),
  which the learned reward judge trains on. A (state, decision) pair is kept once.
- Splits by task id (stable hash; a task is on one side only, the same side in both datasets), written as
  DIR/sft/{train,validation}-00000.parquet and DIR/rl/… (so `datasets.load_dataset(DIR/"sft")` and
  `trl sft --dataset_name DIR/sft` load them as is) plus DIR/stats.json. Everything is written into a temp
  folder that is renamed to DIR at the end. A split with no rows gets no file (an empty parquet file makes
  `load_dataset` fail), so `val_fraction=0` gives a train split only. DIR/task_ids.json lists every task id the
  runs came from (and its split): SFT copies it into its run card, export into provenance.json, and `eval` refuses
  to evaluate the planner on those tasks (train/test separation). DIR/data_card.json and DIR/DATA_CARD.md describe
  the datasets: runs and pass rate, rows per task, row lengths, the collecting models and the task files
  (`collect.datacard`).

    omnidecision harvest runs/synth-teacher --out data/harvest/synth-teacher --advancing-only --dedup
"""

from __future__ import annotations

import json
import logging
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnidecision.collect.datacard import CardInputs, build_card, read_manifests, recipe_tokenizer, write_card
from omnidecision.ledger import (
    DigestBudget,
    EventRejected,
    FinalizerChecked,
    Ledger,
    reduce,
)
from omnidecision.outputs import check_output, staged_output
from omnidecision.protocol import rows
from omnidecision.protocol.actions import CallAction
from omnidecision.protocol.prompts import render_planner_messages
from omnidecision.protocol.records import RunRecord, StepRecord
from omnidecision.protocol.rule import rule_action, rule_decision_text
from omnidecision.rollout.parity import conversation_ids, planner_prompt_ids
from omnidecision.rollout.store import TrajectoryFileError, read_records, stable_hash, trajectory_files

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation")
TASK_IDS = "task_ids.json"  # DIR/task_ids.json: every task id the harvest drew from, and its split
SWITCH = "_switch"  # an SFT row's private flag (is_switch), dropped before writing
LABELS = ("emitted", "rule", "none")  # HarvestOptions.label: where SFT labels come from (none: no SFT rows)


class HarvestError(ValueError):
    """Trajectories that cannot be harvested (malformed line, replay mismatch); names file:line and the field."""


@dataclass
class HarvestOptions:
    advancing_only: bool = False
    dedup: bool = False
    max_rows_per_task: int | None = None
    val_fraction: float = 0.1
    # a tokenizer (folder or hub id): stats count tokens (else the collection's served planner's, else characters)
    tokenizer: str | None = None
    skip_bad: bool = False
    check_replay: bool = True
    digest_max_chars: int | None = None  # None: from the collection's manifest.json, else the AgentConfig default
    # SFT labels: "emitted" = the decisions the collected planner made, in judge-correct runs only; "rule" = every
    # state any run visited, labelled with the rule planner's decision (exact for the synthetic suite): a noisy
    # teacher's detours (rejected calls, wrong tools, empty sources) become states with their recovery as label;
    # "none" = no SFT rows: only the RL states of every run (the own-states harvest of a served planner's runs)
    label: str = "emitted"
    # runs read from these paths (files or folders) make the validation split, every other run the train split
    # (instead of the task-id hash): a dev suite collected apart is the dev rows, with no task on both sides
    validation_from: list[str] = field(default_factory=list)
    # rule labels only: each train row whose decision switches a need to an untried listed source appears this
    # many times (validation rows once, so the dev loss stays the loss on the states as visited)
    switch_copies: int = 1

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise ValueError(f"label must be one of {', '.join(LABELS)}, got {self.label!r}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.max_rows_per_task is not None and self.max_rows_per_task < 1:
            raise ValueError("max_rows_per_task must be >= 1")
        if self.switch_copies < 1:
            raise ValueError(f"switch_copies must be >= 1, got {self.switch_copies}")
        if self.switch_copies > 1 and self.label != "rule":
            raise ValueError(f"switch_copies needs label='rule' (the rule decides what a switch is), got "
                             f"label={self.label!r}")


@dataclass
class _Counts:
    runs: int = 0
    duplicate_runs: int = 0
    correct_runs: int = 0
    outcomes: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)


# -- reading ----------------------------------------------------------------------------------------------
def load_runs(paths: list[str], skip_bad: bool = False) -> tuple[list[tuple[str, int, RunRecord]], list[str]]:
    """(file, line, record) of every run in the given files/folders (first copy of each run_id), and the lines
    skipped: malformed ones (with `skip_bad`) and a torn last line (always skipped; counted in skipped_bad_lines)."""
    bad: list[str] = []
    runs: list[tuple[str, int, RunRecord]] = []
    try:
        for f in trajectory_files(paths):
            for lineno, rec in read_records(f, skip_bad=skip_bad, bad=bad):
                runs.append((str(f), lineno, rec))
    except TrajectoryFileError as exc:
        raise HarvestError(str(exc)) from exc
    return runs, bad


def _manifest_digest_chars(path: str) -> int | None:
    manifest = Path(path).parent / "manifest.json"
    try:
        return int(json.loads(manifest.read_text("utf-8"))["recipe"]["agent"]["digest_max_chars"])
    except (OSError, KeyError, TypeError, ValueError):
        return None


# -- per step ---------------------------------------------------------------------------------------------
def _apply(state: Ledger, step: StepRecord) -> Ledger:
    for event in step.events:
        state = reduce(state, event)
    return state


def advanced(before: Ledger, after: Ledger, step: StepRecord) -> bool:
    """Did this step move the ledger toward an answer? A need's status or value changed, a slot became verified,
    a conflict got resolved, or the finalizer check passed (the accepted finish)."""
    if any(isinstance(e, FinalizerChecked) and e.passed for e in step.events):
        return True
    for a, b in zip(before.needs, after.needs, strict=False):
        if (a.status, a.value) != (b.status, b.value):
            return True
    if sum(s.verified for s in after.slots) > sum(s.verified for s in before.slots):
        return True
    return sum(c.resolved for c in after.conflicts) > sum(c.resolved for c in before.conflicts)


def _user(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")


def sft_row(rec: RunRecord, step: StepRecord) -> dict[str, Any]:
    return rows.sft_row(step.planner_messages, step.raw_output, task_id=rec.task_id, run_id=rec.run_id,
                        step=step.step, sample=rec.sample, level=rec.level, category=rec.category, source=rec.source)


def rl_row(rec: RunRecord, step: StepRecord, state: Ledger, prompt: list[dict[str, str]]) -> dict[str, Any]:
    correct = rec.judge.correct if rec.judge is not None else None
    return rows.rl_row(state, prompt=prompt, task_id=rec.task_id, run_id=rec.run_id, step=step.step,
                       level=rec.level, category=rec.category, outcome=rec.outcome, correct=correct)


def is_switch(state: Ledger, action: Any) -> bool:
    """Whether `action` calls a need that was called before with a listed tool it has not tried: a switch after an
    empty return, or a conflict's second source. Both kinds count: repeating only the empty-return rows made the
    rule-labelled planner's switch worse, repeating both made it better (docs/research/source-switch.md, "Too few
    switches?")."""
    if not isinstance(action, CallAction) or action.need is None or not 0 <= action.need < len(state.needs):
        return False
    tried = state.needs[action.need].tried
    return bool(tried) and action.tool not in tried


def harvest_run(where: str, rec: RunRecord, opts: HarvestOptions, budget: DigestBudget, counts: _Counts
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(SFT rows, RL rows) of one run. Replays the events; a snapshot that does not replay is a HarvestError."""
    correct = rec.judge is not None and rec.judge.correct is True
    sft: list[dict[str, Any]] = []
    rl: list[dict[str, Any]] = []
    state: Ledger | None = None
    if rec.mode == "ledger":
        state = Ledger()
        try:
            for event in rec.initial_events:
                state = reduce(state, event)
        except EventRejected as exc:
            raise HarvestError(f"{where}: run {rec.run_id}: initial_events do not replay: {exc.reason}") from exc
    for step in rec.steps:
        before = state
        if state is not None and step.ledger is not None:
            if opts.check_replay and state.model_dump_json() != step.ledger.model_dump_json():
                raise HarvestError(f"{where}: run {rec.run_id} step {step.step}: field steps.ledger: the rebuilt "
                                   "ledger differs from the recorded snapshot")
            # rebuilt in the form the collection sent (with or without the system turn: AgentConfig)
            system = any(m.get("role") == "system" for m in step.planner_messages)
            prompt = render_planner_messages(state, budget, system_prompt=system)
            if prompt != step.planner_messages:  # recorded with another digest budget: keep what was sent
                counts.skipped["rl_prompt_rerender_differs"] += 1
                prompt = [{"role": str(m["role"]), "content": str(m["content"])} for m in step.planner_messages]
            rl.append(rl_row(rec, step, state, prompt))
            if step.action is not None and step.invalid is None:
                rl[-1]["decision"] = step.raw_output
            if opts.label == "rule":
                action = rule_action(state)
                label = rule_decision_text(state)
                rl[-1]["label"] = label
                sft.append(rows.sft_row(prompt, label, task_id=rec.task_id, run_id=rec.run_id, step=step.step,
                                        sample=rec.sample, level=rec.level, category=rec.category, source="rule"))
                sft[-1][SWITCH] = is_switch(state, action)
            try:
                state = _apply(state, step)
            except EventRejected as exc:
                raise HarvestError(f"{where}: run {rec.run_id} step {step.step}: field steps.events does not "
                                   f"replay: {exc.reason}") from exc
            rl[-1]["advanced"] = advanced(before, state, step)  # type: ignore[arg-type]
        if not correct or opts.label != "emitted":
            continue
        if step.invalid is not None or step.action is None or not step.raw_output.strip():
            counts.skipped["sft_invalid_step"] += 1
            continue
        if opts.advancing_only and (before is None or state is None or not advanced(before, state, step)):
            counts.skipped["sft_not_advancing"] += 1
            continue
        sft.append(sft_row(rec, step))
    return sft, rl


# -- splits and writing -----------------------------------------------------------------------------------
def split_of(task_ids: list[str], val_fraction: float) -> dict[str, str]:
    """task id → "train" | "validation" by a stable hash; at least one validation task when val_fraction > 0
    and there are two tasks or more."""
    unit = {t: stable_hash("split|" + t) / 2**64 for t in task_ids}
    out = {t: "validation" if u < val_fraction else "train" for t, u in unit.items()}
    if val_fraction > 0 and len(unit) >= 2 and "validation" not in out.values():
        out[min(unit, key=unit.__getitem__)] = "validation"
    if len(unit) >= 2 and "train" not in out.values():
        out[max(unit, key=unit.__getitem__)] = "train"
    return out


def _schema(kind: str):
    """The parquet schema of each dataset, column for column the row models of `protocol.rows`."""
    import pyarrow as pa

    msg = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    types = {"messages": msg, "prompt": msg, "task_id": pa.string(), "run_id": pa.string(), "step": pa.int64(),
             "level": pa.string(), "category": pa.string(), "sample": pa.int64(), "source": pa.string(),
             "ledger": pa.string(), "question": pa.string(), "actionable": pa.list_(pa.int64()),
             "blocked": pa.list_(pa.int64()), "finish_available": pa.bool_(), "tool_call_counts": pa.string(),
             "failed_calls": pa.string(), "outcome": pa.string(), "correct": pa.bool_(), "label": pa.string(),
             "decision": pa.string(), "advanced": pa.bool_()}
    columns = rows.SFT_COLUMNS if kind == "sft" else rows.RL_COLUMNS
    return pa.schema([(c, types[c]) for c in columns])


def write_splits(rows: list[dict[str, Any]], kind: str, folder: Path, split: dict[str, str]) -> dict[str, int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name in SPLITS:
        part = [r for r in rows if split[r["task_id"]] == name]
        sizes[name] = len(part)
        if not part:  # an empty parquet file makes `load_dataset` fail ("BatchSize must be greater than 0")
            logger.warning("%s: no %s rows; the split is left out", folder, name)
            continue
        pq.write_table(pa.Table.from_pylist(part, schema=_schema(kind)), folder / f"{name}-00000.parquet")
    return sizes


def _length_stats(values: list[int]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "p95": 0.0, "max": 0.0}
    ordered = sorted(values)
    return {"mean": round(statistics.fmean(values), 1), "p95": float(ordered[int(0.95 * (len(ordered) - 1))]),
            "max": float(ordered[-1])}


def _lengths(rows: list[dict[str, Any]], key: str, tokenizer: Any) -> list[int]:
    if tokenizer is None:
        return [sum(len(m["content"]) for m in r[key]) for r in rows]

    fn = conversation_ids if key == "messages" else planner_prompt_ids
    return [len(fn(tokenizer, r[key])) for r in rows]


@dataclass
class _Harvested:
    """The rows of every kept run, before the split: what `harvest_runs` hands to the writing phases."""

    counts: _Counts = field(default_factory=_Counts)
    sft: list[dict[str, Any]] = field(default_factory=list)
    rl: list[dict[str, Any]] = field(default_factory=list)
    kept: list[RunRecord] = field(default_factory=list)  # the first copy of each run
    all_tasks: set[str] = field(default_factory=set)
    val_tasks: set[str] = field(default_factory=set)  # tasks with a run under `validation_from`
    train_tasks: set[str] = field(default_factory=set)  # ... and elsewhere
    split: dict[str, str] = field(default_factory=dict)  # task id -> split (`assign_splits`)
    switches: Counter = field(default_factory=Counter)  # switch rows per split, before their copies


@dataclass(frozen=True)
class _Sources:
    """What the harvest read: the files given, their runs in a fixed order, the lines it could not read."""

    paths: list[str]
    runs: list[tuple[str, int, RunRecord]]
    bad: list[str]


def run_harvest(paths: list[str], out: str | Path, opts: HarvestOptions | None = None, *,
                replace: bool = False) -> dict[str, Any]:
    """Read trajectories, build both datasets, write them under `out` (atomically); returns the stats. `out` is
    checked before anything is read (`outputs.check_output`): never one of `paths` (or a folder holding or inside
    one), never a non-empty folder the project did not write unless `replace`."""
    opts = opts or HarvestOptions()
    out = Path(out)
    inputs = [*paths, *opts.validation_from, opts.tokenizer]
    check_output(out, inputs, replace=replace)
    # read, in a fixed order
    runs, bad = ordered_runs(paths, opts.skip_bad)
    # harvest run by run
    got = harvest_runs(runs, opts)
    if not runs:
        raise HarvestError(f"no runs found in {', '.join(paths)}")
    # split by task, then the switch copies of the train split
    got.split = split = assign_splits(got, opts)
    got.switches = Counter(split[r["task_id"]] for r in got.sft if r.get(SWITCH))
    got.sft = with_switch_copies(got.sft, split, opts.switch_copies)
    # write into a temp folder, then rename
    with staged_output(out, inputs, command="harvest", replace=replace) as tmp:
        stats = write_dataset(tmp, _Sources(paths, runs, bad), got, opts)
    logger.info("harvest → %s: sft %s, rl %s", out, _sizes(stats["sft"]), _sizes(stats["rl"]))
    return stats


def ordered_runs(paths: list[str], skip_bad: bool) -> tuple[list[tuple[str, int, RunRecord]], list[str]]:
    """`load_runs`, sorted by the order the files were given, then by run id."""
    runs, bad = load_runs(paths, skip_bad)
    # in a fixed order, not the order concurrent runs finished in: the datasets (and the seeded shuffles of the
    # trainers that read them) are then the same on a rerun (tests/demo/test_determinism.py)
    files = {f: i for i, f in reversed(list(enumerate(r[0] for r in runs)))}  # files in the order given
    return sorted(runs, key=lambda r: (files[r[0]], r[2].run_id)), bad


def harvest_runs(runs: list[tuple[str, int, RunRecord]], opts: HarvestOptions) -> _Harvested:
    """Every run's SFT and RL rows (`harvest_run`), each run once, with the dataset-wide dedup and task cap."""
    got = _Harvested()
    counts = got.counts
    seen_runs: set[str] = set()
    rl_seen: set[str] = set()
    sft_seen: set[str] = set()
    per_task: Counter = Counter()
    chars_cache: dict[str, int] = {}
    val_roots = [Path(p).resolve() for p in opts.validation_from]
    for path, lineno, rec in runs:
        if rec.run_id in seen_runs:
            counts.duplicate_runs += 1
            continue
        seen_runs.add(rec.run_id)
        got.kept.append(rec)
        got.all_tasks.add(rec.task_id)
        if any(Path(path).resolve().is_relative_to(root) for root in val_roots):
            got.val_tasks.add(rec.task_id)
        else:
            got.train_tasks.add(rec.task_id)
        counts.runs += 1
        counts.outcomes[rec.outcome] += 1
        counts.correct_runs += int(rec.judge is not None and rec.judge.correct is True)
        if path not in chars_cache:
            chars_cache[path] = opts.digest_max_chars or _manifest_digest_chars(path) or 3000
        budget = DigestBudget(max_chars=chars_cache[path])
        run_sft, run_rl = harvest_run(f"{path}:{lineno}", rec, opts, budget, counts)
        for row in run_rl:
            # a state is kept once per decision made in it: the learned judge trains on (state, decision, what
            # followed), and GRPO's states repeat only where the collected planner decided differently
            key = row["ledger"] + "\x00" + row.get("decision", "")
            if key in rl_seen:
                counts.skipped["rl_duplicate_state"] += 1
                continue
            rl_seen.add(key)
            got.rl.append(row)
        for row in run_sft:
            key = _user(row["messages"])
            if opts.dedup and key in sft_seen:
                counts.skipped["sft_duplicate_state"] += 1
                continue
            if opts.max_rows_per_task is not None and per_task[row["task_id"]] >= opts.max_rows_per_task:
                counts.skipped["sft_task_cap"] += 1
                continue
            sft_seen.add(key)
            per_task[row["task_id"]] += 1
            got.sft.append(row)
    return got


def assign_splits(got: _Harvested, opts: HarvestOptions) -> dict[str, str]:
    """task id → split: by where the runs were read (`validation_from`; a task on both sides is an error), else
    by the task-id hash (`split_of`)."""
    if opts.validation_from:
        both = sorted(got.val_tasks & got.train_tasks)
        if both:
            raise HarvestError(f"--validation-from: {len(both)} task id(s) have runs on both sides, e.g. {both[:3]}: "
                               "the dev suite must be collected on tasks the training runs do not hold")
        return {t: "validation" if t in got.val_tasks else "train" for t in got.all_tasks}
    return split_of(sorted(got.all_tasks), opts.val_fraction)


def with_switch_copies(sft: list[dict[str, Any]], split: dict[str, str], copies: int) -> list[dict[str, Any]]:
    """The SFT rows without their private switch flag, each train row that switches sources `copies` times."""
    return [{k: v for k, v in row.items() if k != SWITCH}
            for row in sft
            for _ in range(copies if row.get(SWITCH) and split[row["task_id"]] == "train" else 1)]


def tokenizer_source(opts: HarvestOptions, manifests: dict[str, dict[str, Any]]) -> tuple[str | None, str]:
    """(the tokenizer's name or None, where the name came from): `--tokenizer`, else the collection's served
    planner (`datacard.recipe_tokenizer`: a local folder that holds one), else none (stats count characters)."""
    if opts.tokenizer:
        return opts.tokenizer, "--tokenizer"
    return recipe_tokenizer(manifests), "the planner the collection served"


def load_tokenizer(opts: HarvestOptions, manifests: dict[str, dict[str, Any]], *, fetch: bool = True
                   ) -> tuple[Any, str | None, str]:
    """(tokenizer or None, its name, where the name came from: `tokenizer_source`). One that does not load raises
    `HarvestError` naming the name and where it came from. `fetch=False` (a dry run): a hub id is read from the local
    cache only, never downloaded; a local folder loads the same either way (the run's words)."""
    tok_name, tok_from = tokenizer_source(opts, manifests)
    if not tok_name:
        return None, tok_name, tok_from
    from transformers import AutoTokenizer  # transformers takes seconds to import: only when a tokenizer is named

    offline = not fetch and not Path(tok_name).exists()
    try:
        tokenizer = AutoTokenizer.from_pretrained(tok_name, local_files_only=offline)
    except Exception as exc:  # OSError, ValueError, KeyError...: transformers' error depends on the missing file
        raise HarvestError(f"{tok_from} {tok_name}: its tokenizer does not load ({type(exc).__name__}: "
                           f"{str(exc).strip().splitlines()[0] if str(exc).strip() else 'no message'})") from exc
    return tokenizer, tok_name, tok_from


def write_dataset(tmp: Path, sources: _Sources, got: _Harvested, opts: HarvestOptions) -> dict[str, Any]:
    """Write both datasets' splits, stats.json, task_ids.json and the data card into `tmp`; returns the stats."""
    paths, runs, bad = sources.paths, sources.runs, sources.bad
    sft, rl, counts, split, switches = got.sft, got.rl, got.counts, got.split, got.switches
    sft_sizes = write_splits(sft, "sft", tmp / "sft", split)
    rl_sizes = write_splits(rl, "rl", tmp / "rl", split)
    manifests = read_manifests(path for path, _, _ in runs)
    tokenizer, tok_name, tok_from = load_tokenizer(opts, manifests)
    unit = "tokens" if tokenizer is not None else "chars"
    lengths = {"sft": _lengths(sft, "messages", tokenizer), "rl": _lengths(rl, "prompt", tokenizer)}
    length_stats = {kind: _length_stats(v) for kind, v in lengths.items()}
    stats = {
        "sources": [str(p) for p in paths], "runs": counts.runs, "duplicate_runs": counts.duplicate_runs,
        "correct_runs": counts.correct_runs, "outcomes": dict(counts.outcomes), "tasks": len(got.all_tasks),
        "skipped_bad_lines": len(bad), "bad_lines": bad[:20], "skipped": dict(counts.skipped),
        "options": {k: v for k, v in vars(opts).items()},
        "sft": {**sft_sizes, "tasks": {s: len({r["task_id"] for r in sft if split[r["task_id"]] == s})
                                       for s in SPLITS},
                f"{unit}_per_row": length_stats["sft"]},
        "rl": {**rl_sizes, "tasks": {s: len({r["task_id"] for r in rl if split[r["task_id"]] == s})
                                     for s in SPLITS},
               f"{unit}_per_row": length_stats["rl"]},
        "split_tasks": {s: sum(v == s for v in split.values()) for s in SPLITS},
    }
    if opts.label == "rule":  # rows counted before the copies (the split sizes above count them)
        stats["sft"]["switch_rows"] = {s: switches[s] for s in SPLITS}
    # the tasks this harvest drew from (every run's, either split): a planner trained on it must not be
    # evaluated on them (`eval` reads them back through the exported checkpoint's provenance.json)
    stats["task_ids_file"] = TASK_IDS
    task_ids = {"sources": [str(p) for p in paths], "ids": sorted(got.all_tasks),
                "splits": {s: sorted(t for t, v in split.items() if v == s) for s in SPLITS}}
    (tmp / TASK_IDS).write_text(json.dumps(task_ids, indent=1) + "\n", encoding="utf-8")
    (tmp / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    write_card(tmp, build_card(CardInputs(stats=stats, records=got.kept, manifests=manifests, sft=sft, rl=rl,
                                          lengths=lengths, length_stats=length_stats,
                                          tokenizer=tok_name if tokenizer is not None else None,
                                          tokenizer_from=tok_from, split=split, task_ids_file=TASK_IDS)))
    return stats


def _sizes(kind_stats: dict[str, Any]) -> dict[str, int]:
    """The split sizes `write_splits` returned, read back from one kind's stats."""
    return {k: v for k, v in kind_stats.items() if k in SPLITS}
