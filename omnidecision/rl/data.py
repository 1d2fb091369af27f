"""RL state rows (one reconstructed ledger state per row) and loading them for GRPO.

Columns: `omnidecision.protocol.rows.RL_COLUMNS` (the one row model, shared with the harvest).
`write_rl_dataset` makes a rule-generated folder for tests and the CPU
recipe (random reachable ledgers from omnidecision.synthetic.states):

    python -m omnidecision.rl.data OUT_DIR --train 2000 --validation 200   # writes OUT_DIR/rl/{train,validation}.jsonl
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

from omnidecision.inputs import has_columns, split_problem
from omnidecision.launch import rl_states_folder
from omnidecision.preflight import Check, check_split_columns, split_files
from omnidecision.protocol.rows import rl_row
from omnidecision.synthetic.states import random_ledger, splits_main, write_splits

logger = logging.getLogger(__name__)

# the columns GRPO's loader (`load_rl_splits`) and the held-out evaluation (rl/evaluate.py) read of every state (of
# the row model's `protocol.rows.RL_COLUMNS`): the dry runs check them on every row the run reads (`rows_check`)
STATE_COLUMNS = ("prompt", "ledger")


def rl_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` rows from independent random reachable ledgers (same seed, same rows)."""
    rng = random.Random(seed)
    return [rl_row(random_ledger(rng), task_id=f"syn-{seed}-{k}", run_id="rule", level="1", category="synthetic")
            for k in range(n)]


def write_rl_dataset(out_dir: str | Path, n_train: int = 2000, n_validation: int = 200, seed: int = 0) -> Path:
    """Write `out_dir/rl/train.jsonl` and `validation.jsonl` (disjoint seeds); returns `out_dir`."""
    rl = Path(out_dir) / "rl"
    write_splits(rl, rl_rows, n_train, n_validation, seed)  # the SFT writer's splits and seeds, RL rows in them
    logger.info("wrote %d train and %d validation RL rows to %s", n_train, n_validation, rl)
    return Path(out_dir)


def rl_folder(path: str | Path) -> Path:
    """The folder holding the RL splits: `path/rl` when it exists, else `path` (`dataset_name` may name either)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"dataset_name: {p} does not exist (a harvest folder holding rl/, or rl/ itself)")
    return rl_states_folder(p)  # the rule SFT's dev_closure check reads the same folder by


def rl_split_files(path: str | Path) -> dict[str, list[str]]:
    """Split name -> data files of an RL folder (`dataset_name`), without loading it (what a dry run checks)."""
    return split_files(rl_folder(path))


def rows_check(files: dict[str, list[str]], where: str, folder: str, columns: tuple[str, ...],
               splits: list[str], on_every_row: tuple[str, ...] | None = None) -> Check:
    """`columns` in every split (`check_split_columns`), then `on_every_row` (default: `columns`) on every row of
    `splits`: the first row without one, a row that cannot be read, or a split with no rows names its file and
    line. Read file by file, without loading the data (the check of rl/dryrun.py and rl/evaluate.py)."""
    check = check_split_columns(files, where, folder, columns, splits)
    if check.status != "ok":
        return check
    for split in splits:
        needed = has_columns(*(columns if on_every_row is None else on_every_row))
        if (problem := split_problem(files[split], needed)) is not None:
            return Check(what=where, status="error", detail=f"split {split!r}: {problem}")
    return check


def load_rl_splits(path: str | Path, splits: tuple[str, ...] = ("train", "validation"),
                   carve: float | None = None, seed: int = 0) -> dict[str, Any]:
    """The RL splits of a harvest folder as `datasets.Dataset`s; checks the columns the rewards need.

    With `carve` (a fraction), a missing second split is carved out of the first one (seeded) with a warning:
    a small harvest can have no validation task at all (the harvest writes no file for an empty split).
    """
    import datasets

    folder = rl_folder(path)
    if (folder / "dataset_dict.json").exists():
        loaded = datasets.load_from_disk(str(folder))
    else:
        loaded = datasets.load_dataset(str(folder))
    if carve and len(splits) == 2 and splits[0] in loaded and splits[1] not in loaded:
        logger.warning("%s: no `%s` split; holding out %.0f%% of `%s` (seed %d)", folder, splits[1], 100 * carve,
                       splits[0], seed)
        parts = loaded[splits[0]].train_test_split(test_size=carve, seed=seed)
        loaded = {splits[0]: parts["train"], splits[1]: parts["test"]}
    out = {}
    for split in splits:
        if split not in loaded:
            raise KeyError(f"{folder}: no `{split}` split (found {sorted(loaded)})")
        missing = [c for c in STATE_COLUMNS if c not in loaded[split].column_names]
        if missing:
            have = loaded[split].column_names
            raise KeyError(f"{folder} split `{split}`: missing RL columns {missing} (have {have})")
        out[split] = loaded[split]
    return out


if __name__ == "__main__":
    splits_main(write_rl_dataset, __doc__)
