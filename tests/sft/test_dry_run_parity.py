"""`omnidecision sft` with `checkpoint_policy: dev_closure` checks its dev states in its dry run as in its run: no
rl/ folder beside the data, a `checkpoint_dev_data` without the dev split, or dev states without a ledger used to stop
the run after the model and the trainer were built (`dev_data()`, `load_rl_splits`); now the dry run reports it and
the run refuses it with the same line before anything loads (both call sft/dryrun.py:sft_checks).

    .venv/bin/pytest -q -p no:cacheprovider tests/sft/test_dry_run_parity.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.rl.data import rl_rows

ROOT = Path(__file__).resolve().parents[2]
CONTINUE = ROOT / "configs" / "sft" / "tiny-cpu-continue.yaml"


def _errors(args: list[str]) -> tuple[int, list[str]]:
    """(exit code, the `error:` lines on stderr) of one CLI call."""
    res = CliRunner().invoke(app, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, [line for line in res.stderr.splitlines() if line.startswith("error:")]


def _rl(folder: Path, splits: dict[str, int], *, drop: str | None = None) -> Path:
    folder.mkdir(parents=True)
    for split, n in splits.items():
        rows = [{k: v for k, v in r.items() if k != drop} for r in rl_rows(n, seed=1)]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return folder


@pytest.mark.parametrize("plant", ["no rl beside", "no dev split", "no ledger"])
def test_sft_dev_closure_dev_states_are_checked_before_the_model(plant, tiny_model, sft_data, tmp_path):
    out = tmp_path / "out"
    args = ["sft", "--config", str(CONTINUE), "--model_name_or_path", str(tiny_model), "--dataset_name",
            str(sft_data), "--output_dir", str(out), "--max_steps", "2"]
    if plant == "no rl beside":  # the session's data folder holds sft/ alone: dev_data() finds no dev states
        assert not (Path(sft_data).parent / "rl").exists()
        what, names = "checkpoint_dev_data", "no rl/ beside it"
    elif plant == "no dev split":
        args += ["--checkpoint_dev_data", str(_rl(tmp_path / "h" / "rl", {"train": 4}).parent)]
        what, names = "checkpoint_dev_split", "no `validation` split"
    else:
        args += ["--checkpoint_dev_data", str(_rl(tmp_path / "h" / "rl", {"validation": 4}, drop="ledger"))]
        what, names = "checkpoint_dev_data", "no `ledger` column"
    dry_code, dry = _errors([*args, "--dry-run"])
    real_code, real = _errors(args)
    assert dry_code == real_code == 2, (dry, real)
    assert dry == real and len(real) == 1, (dry, real)
    assert real[0].startswith(f"error: {what}: ") and names in real[0], real
    assert not out.exists()  # refused before the trainer: no checkpoint folder, nothing loaded


def test_sft_dry_run_names_the_dev_states_it_will_score(tiny_model, sft_data, tmp_path):
    from omnidecision.sft.dryrun import dry_run

    rl = _rl(tmp_path / "h" / "rl", {"validation": 4})
    report = dry_run(["--config", str(CONTINUE), "--model_name_or_path", str(tiny_model), "--dataset_name",
                      str(sft_data), "--output_dir", str(tmp_path / "out"), "--checkpoint_dev_data", str(rl)])
    check = next(c for c in report.checks if c.what == "checkpoint_dev_data")
    assert check.status == "ok" and str(rl) in check.detail and "'validation'" in check.detail
    assert not report.errors, report.errors
