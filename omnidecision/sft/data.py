"""Load a harvested state-SFT folder as `datasets` splits ready for TRL's `SFTTrainer`.

The folder (`dataset_name: runs/x/sft`) holds train/validation splits as parquet or JSONL files that
`datasets.load_dataset(DIR)` reads (file names give the splits), or a `save_to_disk` DatasetDict. Rows have
`messages` = [system, user digest, assistant action] plus metadata columns, which are dropped here.

    python -m omnidecision.sft.data runs/x/sft     # prints the split sizes and action stats
"""

from __future__ import annotations

import json
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from omnidecision.inputs import local_looking
from omnidecision.protocol.actions import parse_planner_output

logger = logging.getLogger(__name__)

KEEP_COLUMNS = ("messages", "chat_template_kwargs")


def load_sft_splits(path: str | Path, config: str | None = None):
    """A `DatasetDict` from a local folder (save_to_disk or data files) or, failing that, a hub-style name."""
    from datasets import DatasetDict, load_dataset, load_from_disk

    p = Path(path)
    if p.is_dir() and (p / "dataset_dict.json").exists():
        ds = load_from_disk(str(p))
    elif p.exists():
        ds = load_dataset(str(p), name=config)
    elif local_looking(str(path)) is not None:  # the one rule of what is a path (inputs.py)
        raise FileNotFoundError(f"dataset folder {p} does not exist")
    else:  # an `org/name` hub dataset (needs network)
        ds = load_dataset(str(path), name=config)
    if not isinstance(ds, DatasetDict):
        ds = DatasetDict({"train": ds})
    for split, d in ds.items():
        if "messages" not in d.column_names:
            raise ValueError(f"{path} split {split!r}: no `messages` column (columns: {d.column_names})")
    return ds


def messages_problem(msgs: Any) -> str | None:
    """What is wrong with one row's `messages` (None: a prompt ending with one assistant turn, every content a
    string): the one rule `validate_rows` (the run) and the dry run's row-by-row check (sft/dryrun.py) apply.

    >>> messages_problem("hello")
    'must be a list of {role, content} messages, got a str'
    >>> messages_problem([{"role": "user", "content": "q"}])
    "the last message must be the assistant action, got 'user'"
    """
    if msgs is None:
        return "missing"
    if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
        return f"must be a list of {{role, content}} messages, got a {type(msgs).__name__}"
    if not msgs or msgs[-1].get("role") != "assistant":
        return f"the last message must be the assistant action, got {(msgs[-1].get('role') if msgs else None)!r}"
    for j, m in enumerate(msgs):
        if not isinstance(m.get("content"), str):
            return f"message {j}: `content` must be a string"
    return None


def sft_row_check(row: dict[str, Any]) -> tuple[str, str] | None:
    """A `inputs.RowCheck`: the row's `messages` (`messages_problem`)."""
    problem = messages_problem(row.get("messages"))
    return None if problem is None else ("messages", problem)


def validate_rows(dataset, where: str) -> None:
    """Each row's messages end with one assistant turn after its prompt; raises naming the split and row."""
    for i, msgs in enumerate(dataset["messages"]):
        if (problem := messages_problem(msgs)) is not None:
            raise ValueError(f"{where} row {i}: {problem}")


def prepare(dataset, *, where: str, limit: int | None, enable_thinking: bool | None, seed: int, shuffle: bool):
    """Validate, shuffle (seeded), cut to `limit`, add `chat_template_kwargs`, keep only the columns TRL needs."""
    validate_rows(dataset, where)
    if shuffle:
        dataset = dataset.shuffle(seed=seed)
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    if enable_thinking is not None:
        dataset = dataset.map(lambda _: {"chat_template_kwargs": {"enable_thinking": enable_thinking}})
    return dataset.remove_columns([c for c in dataset.column_names if c not in KEEP_COLUMNS])


def data_stats(splits: dict[str, Any]) -> dict[str, Any]:
    """Row counts and the action mix per split (for logs and the provenance card)."""
    out: dict[str, Any] = {}
    for name, d in splits.items():
        kinds: Counter[str] = Counter()
        for msgs in d["messages"]:
            action, err = parse_planner_output(msgs[-1]["content"]) if msgs else (None, "empty")
            kinds["invalid" if action is None else action.action] += 1
        # rows whose prompt has a system turn: a served planner must get the same form (rollout/parity.py)
        system = sum(any(m.get("role") == "system" for m in msgs) for msgs in d["messages"])
        out[name] = {"rows": len(d), "actions": dict(kinds), "system_prompt_rows": system}
    return out


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    print(json.dumps(data_stats(load_sft_splits(sys.argv[1])), indent=2))
