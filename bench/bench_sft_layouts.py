"""SFT batch layouts at EQUAL TOKENS SEEN: plain padded batches vs padded batches grouped by length (the CPU
recipe's choice) vs packing, on harvested data, with the held-out loss each reaches.

Data: the synthetic suite from `omnidecision tasks synth` → noisy scripted-teacher collection → harvest (the
validation rows come from held-out tasks). From one tiny planner, each layout trains with the shipped SFT recipe
(configs/sft/tiny-cpu.yaml; only the layout fields and the batch size differ) until it has seen `--tokens`
non-padding tokens (transformers' `num_input_tokens_seen`, checked after each step), then every result is scored
by the SAME function on the same validation rows: the mean cross-entropy over the assistant tokens. Per repeat (a
seed) the three layouts run in a rotating order. `ratio` = tokens/s grouped-by-length over plain padded.

    python -m bench.bench_sft_layouts --tokens 40000 --seeds 0 1 2
    python -m bench.bench_sft_layouts --smoke     # smoke size: runs, measures nothing (bench/common.py)
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.common import ROOT, Run, parse_args, sft_smoke_args
from bench.pipeline import synth_suite, teacher_harvest
from bench.schema import Arm, measure

logger = logging.getLogger(__name__)
LAYOUTS: dict[str, tuple[str, list[str]]] = {
    "padded": ("padded batches, random order", ["--packing", "false", "--train_sampling_strategy", "random"]),
    "grouped": ("padded batches grouped by length (the CPU recipe)",
                ["--packing", "false", "--train_sampling_strategy", "group_by_length"]),
    # 6 packed sequences of max_length 1024 hold about the tokens of 16 padded rows: equal tokens per step
    "packed": ("packing (bfd), 6 sequences per batch", ["--packing", "true", "--train_sampling_strategy", "random",
                                                         "--per_device_train_batch_size", "6"]),
}


def token_budget_callback(tokens: int) -> Any:
    from transformers import TrainerCallback

    class TokenBudget(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.num_input_tokens_seen >= tokens:
                control.should_training_stop = True
            return control

    return TokenBudget()


def train(model: Path, data: Path, out: Path, layout: str, tokens: int, seed: int, logging_steps: int = 5,
          extra: list[str] | None = None) -> dict[str, Any]:
    from omnidecision.sft.config import parse_args as sft_args
    from omnidecision.sft.train import main as sft_main

    args = sft_args(["--config", str(ROOT / "configs/sft/tiny-cpu.yaml"), "--model_name_or_path", str(model),
                       "--dataset_name", str(data / "sft"), "--output_dir", str(out), "--max_steps", "100000",
                       "--per_device_train_batch_size", "16", "--eval_strategy", "no", "--save_strategy", "no",
                       "--lr_scheduler_type", "constant", "--logging_steps", str(logging_steps), "--seed", str(seed),
                       *LAYOUTS[layout][1], *(extra or [])])
    args[1].include_num_input_tokens_seen = "non_padding"  # the CLI parser takes this field as a bool only
    run = sft_main(*args, callbacks=[token_budget_callback(tokens)])
    history = json.loads((out / "log_history.json").read_text())
    final = next(h for h in reversed(history) if "train_runtime" in h)
    seen = max(h.get("num_input_tokens_seen", 0) for h in history)
    return {"steps": run["global_step"], "train_runtime_s": final["train_runtime"], "tokens_seen": seen,
            "tokens_per_s": seen / final["train_runtime"]}


def heldout_loss(model_dir: Path, rows: list[dict]) -> float:
    """Mean cross-entropy over every assistant token of `rows` (token-weighted), one row at a time: the same
    scoring for every layout."""
    import torch

    from omnidecision.modeling import load_planner

    model, tok = load_planner(model_dir)
    total, count = 0.0, 0
    for row in rows:
        enc = tok.apply_chat_template(row["messages"], return_dict=True, return_assistant_tokens_mask=True,
                                      enable_thinking=False)
        ids = torch.tensor([enc["input_ids"]])
        mask = torch.tensor(enc["assistant_masks"][1:], dtype=torch.bool)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1]
        nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none")
        total += float(nll[mask].sum())
        count += int(mask.sum())
    return total / max(count, 1)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=40_000, help="non-padding tokens each layout trains on")
    p.add_argument("--tasks", type=int, default=60)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one repeat per seed (>= 3)")
    p.add_argument("--heldout-rows", type=int, default=64)
    p.add_argument("--logging-steps", type=int, default=5, help="the token count is read from these logs")
    a = parse_args(p, argv, smoke={"tokens": 500, "tasks": 6, "heldout_rows": 2, "logging_steps": 1})
    logging.basicConfig(level=logging.WARNING)
    run = Run("sft_layouts", a.smoke)
    import datasets

    from omnidecision.synthetic.tiny import build_tiny_planner, harvest_texts

    figs: dict[str, dict[str, list[float]]] = {k: {"tps": [], "loss": [], "tokens": [], "steps": []} for k in LAYOUTS}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = teacher_harvest(synth_suite(a.tasks, 5, work / "synth"), work / "harvest", val_fraction=0.15)
        val = datasets.load_dataset(str(data / "sft"), split="validation")
        rows = [val[i] for i in range(min(a.heldout_rows, len(val)))]
        model = build_tiny_planner(work / "tiny", texts=harvest_texts(data / "sft"), heads=2)
        names = list(LAYOUTS)
        for r, seed in enumerate(a.seeds):
            for layout in names[r % 3:] + names[:r % 3]:  # rotate which layout goes first
                out = work / f"{layout}-{seed}"
                res = train(model, data, out, layout, a.tokens, seed, a.logging_steps, sft_smoke_args(a.smoke))
                loss = heldout_loss(out, rows)
                for key, v in (("tps", res["tokens_per_s"]), ("loss", loss), ("tokens", res["tokens_seen"]),
                               ("steps", res["steps"])):
                    figs[layout][key].append(v)
                print(f"seed {seed} {layout:>7}: {res['tokens_seen']} tokens in {res['steps']} steps, "
                      f"{res['tokens_per_s']:.0f} tokens/s, held-out loss {loss:.4f}", flush=True)
                shutil.rmtree(out, ignore_errors=True)
    arms = {k: Arm(label=LAYOUTS[k][0], figures={
        "tokens_per_s": measure(figs[k]["tps"], "non-padding tokens/s"),
        "heldout_loss_at_equal_tokens": measure(figs[k]["loss"], "nats/assistant token"),
        "tokens_seen": measure(figs[k]["tokens"], "tokens"),
        "optimizer_steps": measure(figs[k]["steps"], "steps")}) for k in LAYOUTS}
    result = run.result(
        title=f"SFT layouts at equal tokens seen ({a.tokens:,}): padded vs grouped by length vs packing",
        arms=arms, candidate="grouped", baseline="padded", metric="tokens_per_s", repeats=len(a.seeds),
        better="higher: batches grouped by length train on that many times the tokens per second of plain padded "
               "batches; compare heldout_loss_at_equal_tokens (lower is better) for what the tokens bought",
        notes=["each layout stops at the first step past the token budget (tokens_seen)",
               "held-out loss: one scoring function for every layout, on the same validation rows"],
        details={"tokens": a.tokens, "tasks": a.tasks, "heldout_rows": len(rows),
                 "batch_size": "16 rows (padded, grouped); 6 packed sequences of up to 1024 tokens (packed)",
                 "recipe": "configs/sft/tiny-cpu.yaml, constant lr"})
    path = run.write(result)
    print(f"grouped / padded tokens/s: {result.ratio} (per repeat {result.ratio_repeats}) → {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
