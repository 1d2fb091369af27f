"""Greedy decisions of a trained planner on held-out random ledger states, scored by the closure rules.

Per state: is the output a schema-valid action; is it sound (`finish` only when `finish_available`, a call only
on an actionable need with a tool that fits it or none: `rewards.checks.tool_check`); does it equal the rule
teacher's action (need and tool; and the whole action, query included).

    python -m omnidecision.sft.heldout runs/sft/tiny-cpu --n 200 --seed 777 [--no-system-prompt]

`--rows DIR` scores the first `--n` rows of a harvested SFT split instead (their prompts as stored, their
assistant turn the reference): e.g. the dev rows of `make demo`,

    python -m omnidecision.sft.heldout runs/demo/models/sft --rows runs/demo/data/sft --split validation --n 200

`--states DIR` scores the RL rows of a harvest (`harvest --label rule` writes DIR/rl with each state's ledger and rule
label) split by what the state asks of the planner (`state_kind`): above all `switch`, where the need's preferred tool
came back without the value and an untried listed alternative is left (docs/research/source-switch.md, "Why oracle_sft
failed source_switch"), against `copy`, where the listed tool is the answer:

    omnidecision harvest runs/held --validation-from runs/held --label rule --dedup --out runs/held-data
    python -m omnidecision.sft.heldout runs/demo/models/oracle_sft --states runs/held-data/rl --n 5000
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from pathlib import Path
from typing import Any

from omnidecision.ledger import Ledger, finish_available
from omnidecision.modeling import generate_decisions, load_planner
from omnidecision.protocol.actions import CallAction, effective_tool, parse_planner_output, render_action, short_form
from omnidecision.protocol.prompts import render_planner_messages
from omnidecision.protocol.rule import candidate_tools, rule_action, rule_decision_text, rule_need
from omnidecision.rewards.checks import Decision, tool_check
from omnidecision.sft.data import load_sft_splits
from omnidecision.synthetic.states import random_ledger

logger = logging.getLogger(__name__)


def same_decision(state: Ledger, action: CallAction | Any) -> bool:
    """Whether `action` is the rule decision in `state`, text for text once a tool the state defaults to is left
    out (an action naming the default tool and one naming none run the same call)."""
    return render_action(short_form(state, action)) == rule_decision_text(state)


def score_output(text: str, state: Ledger) -> dict[str, bool]:
    """Closure checks of one raw planner output against the state it was made for."""
    action, err = parse_planner_output(text)
    teacher = rule_action(state)
    out = {"valid": err is None, "sound": False, "need_tool_right": False,
           "exact": False, "is_call": isinstance(action, CallAction)}
    if action is None:
        return out
    if isinstance(action, CallAction):
        # the closure checks' rule, the loop's rule too: an actionable need, with a tool that fits it
        out["sound"] = tool_check(Decision(text=text, action=action, error=None), state) == 1.0
        out["need_tool_right"] = (isinstance(teacher, CallAction) and action.need == teacher.need
                                  and effective_tool(state, action) == teacher.tool)
    else:
        out["sound"] = finish_available(state)
        out["need_tool_right"] = teacher.action == "finish"
    out["exact"] = same_decision(state, action)
    return out


def generate(model_dir: str | Path, prompts: list[list[dict]], batch_size: int = 32,
             max_new_tokens: int = 96) -> list[str]:
    """Greedy completions for chat prompts with a local checkpoint."""
    model, tok = load_planner(model_dir)
    return [group[0] for group in generate_decisions(model, tok, prompts, batch_size=batch_size,
                                                     max_new_tokens=max_new_tokens)]


def evaluate(model_dir: str | Path, n: int = 200, seed: int = 777, batch_size: int = 32,
             system_prompt: bool = True) -> dict[str, Any]:
    """Shares over `n` held-out states (a seed disjoint from the training data's); `system_prompt`: the prompt
    form the planner was trained on (`protocol.prompts`)."""
    rng = random.Random(seed)
    states = [random_ledger(rng) for _ in range(n)]
    t0 = time.perf_counter()
    outputs = generate(model_dir, [render_planner_messages(s, system_prompt=system_prompt) for s in states],
                       batch_size=batch_size)
    scores = [score_output(o, s) for o, s in zip(outputs, states, strict=True)]
    calls = [sc for sc, s in zip(scores, states, strict=True) if isinstance(rule_action(s), CallAction)]
    share = lambda rows, k: round(sum(r[k] for r in rows) / max(len(rows), 1), 4)  # noqa: E731
    return {
        "n": n,
        "valid": share(scores, "valid"),
        "sound": share(scores, "sound"),
        "need_tool_right": share(scores, "need_tool_right"),
        "exact": share(scores, "exact"),
        "n_teacher_calls": len(calls),
        "sound_on_call_states": share(calls, "sound"),
        "need_tool_right_on_call_states": share(calls, "need_tool_right"),
        "exact_on_call_states": share(calls, "exact"),
        "generate_seconds": round(time.perf_counter() - t0, 1),
        "examples": [{"output": o} for o in outputs[:5]],
    }


def _target(action: Any) -> tuple[str, int | None, str | None]:
    """What a decision aims at: finish, a need or a slot."""
    return action.action, getattr(action, "need", None), getattr(action, "slot", None)


def evaluate_rows(model_dir: str | Path, rows_dir: str | Path, split: str = "validation", n: int = 200,
                  batch_size: int = 32) -> dict[str, Any]:
    """Greedy decisions on the first `n` rows of a harvested SFT split against each row's assistant turn: valid
    JSON, the same target (need / slot / finish), the same action (`render_action` of both)."""
    rows = list(load_sft_splits(str(rows_dir))[split])[:n]
    if not rows:
        raise ValueError(f"{rows_dir}: split {split!r} has no rows")
    t0 = time.perf_counter()
    outputs = generate(model_dir, [r["messages"][:-1] for r in rows], batch_size=batch_size)
    valid = target = exact = 0
    for row, text in zip(rows, outputs, strict=True):
        ref, _ = parse_planner_output(row["messages"][-1]["content"])
        got, err = parse_planner_output(text)
        if got is None or ref is None:
            continue
        valid += 1
        target += _target(got) == _target(ref)
        exact += render_action(got) == render_action(ref)
    k = len(rows)
    return {"n": k, "split": split, "valid": round(valid / k, 4), "target_right": round(target / k, 4),
            "exact": round(exact / k, 4), "distinct_outputs": len(set(outputs)),
            "generate_seconds": round(time.perf_counter() - t0, 1)}


STATE_KINDS = ("finish", "slot", "copy", "first_of_several", "switch", "retry")


def state_kind(state: Ledger) -> str:
    """What the rule decision at `state` asks of a planner that reads the need's digest line: `finish`; `slot` (a
    code call on a slot); `copy` (the need's only listed source); `first_of_several` (the listed tool,
    alternatives listed and none tried yet); `switch` (an alternative: the listed tool was tried); `retry` (the
    listed tool again: every listed source was tried)."""
    action = rule_action(state)
    if not isinstance(action, CallAction):
        return "finish"
    if action.need is None:
        return "slot"
    need = state.needs[action.need]
    tools = candidate_tools(need)
    if action.tool != tools[0]:
        return "switch"
    if tools[0] in need.tried:
        return "retry"
    return "first_of_several" if len(tools) > 1 else "copy"


def evaluate_states(model_dir: str | Path, rl_dir: str | Path, split: str = "validation", n: int = 5000,
                    batch_size: int = 32) -> dict[str, Any]:
    """Greedy decisions on the RL rows of a harvest against their rule labels (`harvest --label rule`), as shares
    of exact actions per state kind (`state_kind`) and per task family; `switch_repeats`: the share of `switch`
    states where the planner called the listed (already tried) tool again."""
    import pyarrow.parquet as pq

    files = sorted(Path(rl_dir).glob(f"{split}-*.parquet"))
    rows = [r for f in files for r in pq.read_table(f).to_pylist()][:n]
    if not rows:
        raise ValueError(f"{rl_dir}: no rows in {split}-*.parquet (a harvest's rl/ folder)")
    states = [Ledger.model_validate_json(r["ledger"]) for r in rows]
    t0 = time.perf_counter()
    outputs = generate(model_dir, [r["prompt"] for r in rows], batch_size=batch_size)
    tally: dict[str, list[int]] = {}
    repeats = 0
    for row, state, text in zip(rows, states, outputs, strict=True):
        got, _ = parse_planner_output(text)
        ok = got is not None and same_decision(state, got)
        kind = state_kind(state)
        if kind == "switch" and isinstance(got, CallAction) and got.need == rule_need(state):
            repeats += got.tool == candidate_tools(state.needs[got.need])[0]
        family = row.get("category") or "-"
        for key in ("all", f"kind {kind}", f"family {family}", f"kind {kind} in {family}"):
            tally.setdefault(key, [0, 0])
            tally[key][0] += ok
            tally[key][1] += 1
    n_switch = tally.get("kind switch", [0, 0])[1]
    return {"n": len(rows), "split": split,
            "exact": {k: {"share": round(a / m, 4), "n": m} for k, (a, m) in sorted(tally.items())},
            "switch_repeats": round(repeats / n_switch, 4) if n_switch else None,
            "generate_seconds": round(time.perf_counter() - t0, 1)}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_dir")
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--seed", type=int, default=777)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--no-system-prompt", action="store_true", help="random states rendered without the system turn")
    p.add_argument("--rows", help="score a harvested SFT folder's rows instead of random states")
    p.add_argument("--states", help="score a harvest's RL rows (rule labels) per state kind and family instead")
    p.add_argument("--split", default="validation")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO)
    if a.states:
        result = evaluate_states(a.model_dir, a.states, a.split, a.n, a.batch_size)
    elif a.rows:
        result = evaluate_rows(a.model_dir, a.rows, a.split, a.n, a.batch_size)
    else:
        result = evaluate(a.model_dir, a.n, a.seed, a.batch_size, system_prompt=not a.no_system_prompt)
    print(json.dumps(result, indent=1))
