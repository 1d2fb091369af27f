"""A rerun reproduces (issue 36 item 1): the quick protocol run twice, once with steps side by side (`--jobs 2`) and
once one after another (`--jobs 1`), writes identical trained weights (sha256 of every exported planner's
safetensors) and identical per-replicate accuracies. Slow (two quick demos, ≈ 15 vLLM starts): `make slow-test`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from omnidecision.pipeline.rerun import weights

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


def accuracies(out: Path) -> dict[str, dict[str, float]]:
    summary = json.loads((out / "summary.json").read_text())
    return {n: p["replicates"] for n, p in summary["planners"].items()}


@pytest.mark.timeout(3600)
def test_the_quick_protocol_run_twice_gives_the_same_weights_and_accuracies(tmp_path):
    outs = []
    for jobs in (2, 1):
        out = tmp_path / f"jobs{jobs}"
        proc = subprocess.run([sys.executable, "-m", "omnidecision.cli", "demo", "--quick", "--out", str(out),
                               "--jobs", str(jobs)], capture_output=True, text=True, timeout=1700)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        outs.append(out)
    a, b = (weights(o / "models") for o in outs)
    assert {"sft", "grpo_judge.r0", "sft_plus.r0", "rft.r0", "judge"} <= set(a)
    assert a == b, {k: (a[k][:12], b.get(k, "")[:12]) for k in a if a[k] != b.get(k)}
    assert accuracies(outs[0]) == accuracies(outs[1])
