"""Training curves of an SFT and a GRPO run from what the trainers wrote (`trainer_state.json`'s `log_history`).

Two steps. `extract` reads each run folder's `trainer_state.json` (HF Trainer's `save_state`, written by
`omnidecision sft` and `omnidecision grpo`) and writes one result file with every logged row and the command that
trained the run; `plot` draws the curves of that file into PNGs. The metrics page (docs/guide/metrics.md) shows the
PNGs and names the file; tests/docs/test_metrics_page.py checks both against each other.

    python scripts/analysis/training_curves.py extract --sft RUN/models/sft-run --grpo RUN/models/grpo_judge.r0-run \
        --command "$(cat RUN/commands.sh)" --out docs/results/training-curves.json
    python scripts/analysis/training_curves.py plot docs/results/training-curves.json --out docs/results
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

# what each panel shows: (title, [(log key, label)]); a key the run did not log is left out of its panel
SFT_PANELS = [
    ("loss (train) and eval_loss (dev)", [("loss", "loss"), ("eval_loss", "eval_loss")]),
    ("mean_token_accuracy (train, dev)", [("mean_token_accuracy", "train"), ("eval_mean_token_accuracy", "dev")]),
    ("learning_rate", [("learning_rate", "learning_rate")]),
    ("grad_norm", [("grad_norm", "grad_norm")]),
]
GRPO_PANELS = [
    ("reward (weighted sum) and its spread", [("reward", "reward"), ("reward_std", "reward_std")]),
    ("each reward function's mean", "rewards/"),
    ("closure components (closure/<name>)", "closure/"),
    ("completion length (tokens)", [("completions/mean_length", "mean"), ("completions/max_length", "max"),
                                    ("completions/clipped_ratio", "clipped ratio")]),
    ("entropy and clip ratios", [("entropy", "entropy"), ("clip_ratio/region_mean", "clip ratio (region)"),
                                 ("frac_reward_zero_std", "groups with zero reward spread")]),
    ("judge", [("judge/failures", "failures"), ("judge/cache_hits", "cache hits")]),
]


def log_history(run: Path) -> list[dict[str, Any]]:
    """The `log_history` of a run folder's trainer_state.json (the newest checkpoint's when the folder has none)."""
    state = run / "trainer_state.json"
    if not state.is_file():
        checkpoints = sorted(run.glob("checkpoint-*/trainer_state.json"),
                             key=lambda p: int(p.parent.name.split("-")[1]))
        if not checkpoints:
            raise SystemExit(f"{run}: no trainer_state.json (is it a finished `omnidecision sft|grpo` output_dir?)")
        state = checkpoints[-1]
    return json.loads(state.read_text("utf-8"))["log_history"]


def run_record(run: Path) -> dict[str, Any]:
    """A run's log history, the checkpoint policy's choice (checkpoint_selection.json) and, for GRPO, the held-out
    closure reward of the start and of the result (closure_eval.json, its summary)."""
    record: dict[str, Any] = {"run": run.as_posix(), "log_history": log_history(run)}
    if (run / "checkpoint_selection.json").is_file():
        record["checkpoint_selection"] = json.loads((run / "checkpoint_selection.json").read_text("utf-8"))
    if (run / "closure_eval.json").is_file():
        report = json.loads((run / "closure_eval.json").read_text("utf-8"))
        record["closure_eval"] = {k: {"closure": v["closure"], "components": v.get("components")}
                                  for k, v in report.items() if isinstance(v, dict) and "closure" in v}
    return record


def extract(sft: Path, grpo: Path, command: str) -> dict[str, Any]:
    return {"kind": "training-curves", "command": command, "runs": {"sft": run_record(sft), "grpo": run_record(grpo)}}


def series(history: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of `key` over the rows that logged it as a finite number."""
    rows = [(r["step"], r[key]) for r in history if isinstance(r.get(key), int | float) and math.isfinite(r[key])]
    return [s for s, _ in rows], [v for _, v in rows]


def panel_keys(history: list[dict[str, Any]], spec: list[tuple[str, str]] | str) -> list[tuple[str, str]]:
    if isinstance(spec, str):  # a prefix: every key of the run that starts with it (means only)
        keys = sorted({k for r in history for k in r if k.startswith(spec) and not k.endswith("/std")})
        return [(k, k.removeprefix(spec).removesuffix("/mean")) for k in keys]
    return [(k, label) for k, label in spec if series(history, k)[0]]


def plot(result: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for name, panels in (("sft", SFT_PANELS), ("grpo", GRPO_PANELS)):
        history = result["runs"][name]["log_history"]
        shown = [(title, keys) for title, spec in panels if (keys := panel_keys(history, spec))]
        cols = 2
        rows = math.ceil(len(shown) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(11, 3.2 * rows), squeeze=False)
        for ax, (title, keys) in zip(axes.flat, shown, strict=False):
            for key, label in keys:
                steps, values = series(history, key)
                ax.plot(steps, values, marker="." if len(steps) < 40 else None, label=label)
            if title.startswith("loss"):  # from 7 down to 0.07: a log scale shows the tail
                ax.set_yscale("log")
            ax.set_title(title, fontsize=10)
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
            if len(keys) > 1:
                ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(shown):]:
            ax.axis("off")
        fig.suptitle(f"{name.upper()}: {result['runs'][name]['run']}", fontsize=10)
        fig.tight_layout()
        path = out / f"training-curves-{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    ex = sub.add_parser("extract", help="write the result file from two run folders")
    ex.add_argument("--sft", type=Path, required=True, help="the SFT run's output_dir")
    ex.add_argument("--grpo", type=Path, required=True, help="the GRPO run's output_dir")
    ex.add_argument("--command", required=True, help="the commands that trained both runs (kept in the file)")
    ex.add_argument("--out", type=Path, required=True, help="the result file to write")
    pl = sub.add_parser("plot", help="draw the result file's curves")
    pl.add_argument("result", type=Path, help="a file `extract` wrote")
    pl.add_argument("--out", type=Path, required=True, help="the folder for training-curves-{sft,grpo}.png")
    args = ap.parse_args(argv)
    if args.step == "extract":
        args.out.write_text(json.dumps(extract(args.sft, args.grpo, args.command), indent=1) + "\n", "utf-8")
        print(f"wrote {args.out}")
    else:
        for path in plot(json.loads(args.result.read_text("utf-8")), args.out):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
