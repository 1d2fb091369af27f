"""Held-out closure evaluation of a planner on RL states, without executing any decision.

For each validation state the planner generates a decision (greedy: one deterministic decision; sampled: several
at a temperature) and the closure rubric scores it. Reported: the mean closure reward with its spread (std over
states and a normal-approximation 95% CI of the mean; in sampled mode the per-state mean is the unit), the mean
of every component, the share of schema-valid decisions, and the per-state scores, so that two planners on the same
states can be compared pair-wise (`paired_comparison`: mean per-state difference with a bootstrap 95% CI, wins /
losses / ties and an exact sign test; far tighter than comparing two independent means). Used by GRPO (start vs
trained, same run) and the demo. Standalone (the post-hoc evaluation of a ZeRO-3/FSDP run) it decodes on the
available accelerator (`--device auto`: CUDA when visible, in the checkpoint's dtype; else the CPU, float32), and
`--dry-run` names that device, the model and the states without loading anything; it makes the checks the run makes
before it loads anything (`evaluate_checks`: the split, a prompt and a ledger on every row, at least one row).

    python -m omnidecision.rl.evaluate MODEL_DIR DATASET_NAME [--n 64 --mode greedy --device auto] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from omnidecision.modeling import generate_decisions, load_planner
from omnidecision.outputs import dry_run_stdout
from omnidecision.preflight import Check, DryRunReport, PreflightError, check_model, cuda_available, emit, require
from omnidecision.rewards.checks import load_ledger
from omnidecision.rewards.closure import ClosureRubric
from omnidecision.rl.data import STATE_COLUMNS, load_rl_splits, rl_folder, rl_split_files, rows_check
from omnidecision.stats import bootstrap_mean_ci, exact_sign_p

logger = logging.getLogger(__name__)


def spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, std (sample) and a 95% normal-approximation CI of the mean.

    >>> spread([1.0, 0.0, 1.0, 0.0])["mean"]
    0.5
    """
    n = len(values)
    if n == 0:
        return {"mean": float("nan"), "std": float("nan"), "ci95_low": float("nan"), "ci95_high": float("nan"), "n": 0}
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    half = 1.96 * std / math.sqrt(n)
    return {"mean": round(mean, 4), "std": round(std, 4), "ci95_low": round(mean - half, 4),
            "ci95_high": round(mean + half, 4), "n": n}


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test p-value (ties dropped); see `omnidecision.stats.exact_sign_p`.

    >>> round(sign_test(9, 1), 4)
    0.0215
    """
    return exact_sign_p(wins, losses)


def paired_comparison(before: Sequence[float], after: Sequence[float], *, n_boot: int = 2000,
                      seed: int = 0) -> dict[str, Any]:
    """Per-state change from `before` to `after` (the same states in the same order): mean difference with a
    percentile-bootstrap 95% CI over states, wins / losses / ties, and the sign test's p-value.

    >>> r = paired_comparison([0.5, 0.5, 1.0, 0.2], [1.0, 0.5, 1.0, 0.7])
    >>> r["delta_mean"], r["wins"], r["losses"], r["ties"]
    (0.25, 2, 0, 2)
    """
    import numpy as np

    if len(before) != len(after):
        raise ValueError(f"paired_comparison: {len(before)} scores before, {len(after)} after (not the same states)")
    if not before:
        raise ValueError("paired_comparison: no states")
    diff = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    low, high = bootstrap_mean_ci(diff, n_boot, seed)
    eps = 1e-9  # scores are sums of rounded components: a difference this small is a tie
    wins, losses = int((diff > eps).sum()), int((diff < -eps).sum())
    return {"delta_mean": round(float(diff.mean()), 4), "ci95_low": round(low, 4),
            "ci95_high": round(high, 4), "wins": wins, "losses": losses,
            "ties": len(diff) - wins - losses, "sign_test_p": float(f"{sign_test(wins, losses):.3g}"), "n": len(diff)}


def resolve_device(device: str | None = "auto") -> tuple[str, str]:
    """(device, why) for `device`: "auto"/None → "cuda" when torch sees a CUDA device, else "cpu"; an explicit
    device is kept, and a CUDA one on a machine without CUDA is a ValueError (not a silent hours-long CPU run)."""
    has_cuda = cuda_available()
    if device in (None, "", "auto"):
        return ("cuda", "auto: a CUDA device is visible") if has_cuda else ("cpu", "auto: no CUDA device visible")
    if str(device).startswith("cuda") and not has_cuda:
        raise ValueError(f"device {device!r}: no CUDA device is visible here (use --device auto or cpu)")
    return str(device), "given"


def _load(model_or_dir: Any, tokenizer: Any | None, device: str | None = None) -> tuple[Any, Any]:
    if not isinstance(model_or_dir, (str, Path)):
        if tokenizer is None:
            raise ValueError("pass `tokenizer` together with a loaded model")
        return model_or_dir, tokenizer
    # on a GPU the checkpoint's own dtype (bf16 for Qwen3: half the memory and time of float32); on the CPU float32
    dtype = "auto" if device is not None and device.startswith("cuda") else None
    model, loaded_tokenizer = load_planner(model_or_dir, device=device, dtype=dtype)
    return model, tokenizer or loaded_tokenizer


@dataclass(frozen=True)
class ClosureDecoding:
    """How a closure evaluation decodes and scores: the same record for the start and the trained planner of a run
    and for the balanced selection of its states (so "right" means the same thing in all three)."""

    mode: Literal["greedy", "sampled"] = "greedy"
    samples: int = 4  # decisions per state when sampled
    temperature: float = 1.0
    max_new_tokens: int = 64
    batch_size: int = 16  # prompts per generate() call
    weights: dict[str, float] | None = None  # the closure checks' weights (None: the rubric's defaults)
    gate_on_tool: bool = True
    chat_template_kwargs: dict[str, Any] | None = None
    seed: int = 0


def heldout_closure_reward(model_dir: Any, dataset: Any, n: int | None = 64, *, tokenizer: Any | None = None,
                           decoding: ClosureDecoding | None = None, device: str | None = None,
                           **options: Any) -> dict[str, Any]:
    """Mean closure reward of a planner (a folder, or a loaded model with `tokenizer`) on the first `n` rows of
    `dataset` (rows with `prompt` and `ledger`; a datasets.Dataset or a list of dicts); `n` None or < 0: all.
    `decoding`: how it decodes and scores (default `ClosureDecoding()`), with `options` (its fields by name) replacing
    some of them. `device`: where a folder's model is loaded (None: the CPU); a loaded model stays where it is."""
    import torch

    d = replace(decoding or ClosureDecoding(), **options)
    model, tokenizer = _load(model_dir, tokenizer, device)
    rows = [dataset[i] for i in range(len(dataset) if n is None or n < 0 else min(n, len(dataset)))]
    if not rows:
        raise ValueError("heldout_closure_reward: the dataset has no rows")
    torch.manual_seed(d.seed)
    sampled = d.mode == "sampled"
    k = d.samples if sampled else 1
    completions = generate_decisions(model, tokenizer, [r["prompt"] for r in rows], do_sample=sampled,
                                     num_return_sequences=k, temperature=d.temperature,
                                     max_new_tokens=d.max_new_tokens, batch_size=d.batch_size,
                                     chat_template_kwargs=d.chat_template_kwargs)
    rubric = ClosureRubric(d.weights, gate_on_tool=d.gate_on_tool)
    flat = [c for group in completions for c in group]
    ledgers = [load_ledger(r["ledger"]) for r in rows for _ in range(k)]
    comps = rubric.components(flat, ledgers)
    scores = rubric.combine(comps)
    per_state = [statistics.fmean(scores[i * k:(i + 1) * k]) for i in range(len(rows))]
    result = {
        "mode": d.mode, "samples_per_state": k, "n_states": len(rows), "n_decisions": len(flat),
        "closure": spread(per_state),
        "components": {name: round(statistics.fmean([v for v in vals if v is not None]), 4)
                       for name, vals in comps.items()},
        "valid_rate": round(sum((v or 0) > 0 for v in comps.get("format", [])) / len(flat), 4) if "format" in comps
        else None,
        "examples": flat[:3],
        "per_state": [round(v, 4) for v in per_state],
    }
    logger.info("held-out closure reward (%s, %d states): %.4f ± %.4f", d.mode, len(rows),
                result["closure"]["mean"], result["closure"]["std"])
    return result


def states_check(dataset_name: str, split: str) -> Check:
    """The states the evaluation reads: `split` of the RL folder, with the `prompt` and `ledger` columns the closure
    rubric reads on every row and at least one row (`rl/data.py:rows_check`; `load_rl_splits` refuses a missing
    column, `heldout_closure_reward` a split with no rows)."""
    try:
        files = rl_split_files(dataset_name)
    except (FileNotFoundError, ValueError) as exc:
        return Check(what="dataset_name", status="error", detail=str(exc).removeprefix("dataset_name: "))
    if split not in files:
        return Check(what="dataset_name", status="error", detail=f"{dataset_name}: splits {sorted(files)}, "
                                                                 f"no `{split}`")
    return rows_check(files, "dataset_name", str(rl_folder(dataset_name)), STATE_COLUMNS, [split])


def evaluate_checks(model_dir: str, dataset_name: str, split: str, device: str, n: int = -1) -> list[Check]:
    """The checks `python -m omnidecision.rl.evaluate` makes before it loads anything, in its dry run and its run:
    the model, the states (`states_check`), `--n` (0 evaluates no state) and the device (`resolve_device`)."""
    checks = [check_model(model_dir, "model_dir"), states_check(dataset_name, split)]
    if n == 0:
        checks.append(Check(what="--n", status="error", detail="0 evaluates no state (-1: every row)"))
    try:
        resolved, why = resolve_device(device)
    except ValueError as exc:
        checks.append(Check(what="device", status="error", detail=str(exc)))
    else:
        checks.append(Check(what="device", status="ok", detail=f"{resolved} ({why})"))
    return checks


def dry_run(model_dir: str, dataset_name: str, split: str, device: str, n: int = -1) -> Any:
    """The report of `--dry-run`: the checks the run makes (`evaluate_checks`) and the device it would use."""
    report = DryRunReport(command="rl.evaluate", resolved={"model_dir": model_dir, "dataset_name": dataset_name,
                                                           "split": split, "device": device, "n": n})
    report.extend(evaluate_checks(model_dir, dataset_name, split, device, n))
    if not any(c.what == "device" and c.status == "error" for c in report.checks):
        report.extra["device"] = resolve_device(device)[0]
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_dir")
    p.add_argument("dataset_name", help="harvest folder holding rl/, or the rl/ folder itself")
    p.add_argument("--split", default="validation")
    p.add_argument("--n", type=int, default=-1, help="validation rows (-1: all)")
    p.add_argument("--mode", choices=["greedy", "sampled"], default="greedy")
    p.add_argument("--device", default="auto", help="auto (CUDA when visible, else CPU), cuda, cuda:N or cpu")
    p.add_argument("--batch-size", type=int, default=16, help="prompts per generate() call")
    p.add_argument("--dry-run", action="store_true", help="print the model, states and device it would use; "
                                                          "load nothing")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    if a.dry_run:
        with dry_run_stdout():  # the report alone on stdout, as `omnidecision ... --dry-run` (cli.py)
            return emit(dry_run(a.model_dir, a.dataset_name, a.split, a.device, a.n))
    try:  # what the dry run checks, before the model or the states load: refused in its words, exit 2
        require(evaluate_checks(a.model_dir, a.dataset_name, a.split, a.device, a.n))
    except PreflightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    device, why = resolve_device(a.device)
    logger.info("evaluating on %s (%s)", device, why)
    ds = load_rl_splits(a.dataset_name, (a.split,))[a.split]
    result = heldout_closure_reward(a.model_dir, ds, a.n, mode=a.mode, batch_size=a.batch_size, device=device)
    print(json.dumps({**result, "device": device}, indent=2))
    return 0



def dev_closure_scorer(policy: Any, dev_data: str, tokenizer: Any,
                       chat_template_kwargs: dict[str, Any] | None) -> Callable[[Any], float]:
    """`score(model)`: the greedy mean closure reward on the dev states, the same for every arm. The global RNG is
    left as it was (the scoring must not change what training samples next). `policy`: the recipe's
    `checkpoints.CheckpointPolicyArguments`. It lives here, not in `checkpoints` (a bottom module), because it
    decodes and scores with rl's evaluator; sft's checkpoint selection calls it too."""
    import torch

    splits = load_rl_splits(dev_data, (policy.checkpoint_dev_split,))
    dev = splits[policy.checkpoint_dev_split]

    def score(model: Any) -> float:
        with torch.random.fork_rng(devices=[]):
            result = heldout_closure_reward(model, dev, n=policy.checkpoint_dev_n, tokenizer=tokenizer,
                                            mode="greedy", max_new_tokens=policy.checkpoint_dev_max_new_tokens,
                                            batch_size=32, chat_template_kwargs=chat_template_kwargs)
        return float(result["closure"]["mean"])

    return score

if __name__ == "__main__":
    raise SystemExit(main())
