"""The post-hoc held-out evaluation (`python -m omnidecision.rl.evaluate`, after a ZeRO-3/FSDP GRPO run) runs on
the available accelerator: `--device auto` is CUDA when torch sees one, the dry run names the device, a CUDA
request on a machine without CUDA is refused, and `modeling.load_planner(device=...)` places the weights.

    .venv/bin/pytest tests/rl/test_evaluate_device.py
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from omnidecision.rl import evaluate  # noqa: E402


def _dry(capsys, *argv: str) -> tuple[int, dict]:
    code = evaluate.main([*argv, "--dry-run"])
    out = capsys.readouterr().out
    return code, json.loads(out[out.index("{"):])


def _check(report: dict, what: str) -> dict:
    return next(c for c in report["checks"] if c["what"] == what)


def test_dry_run_names_the_device(tiny_planner, rl_dir, capsys):
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    code, report = _dry(capsys, str(tiny_planner), str(rl_dir))
    assert code == 0, report
    assert report["extra"]["device"] == expected
    assert _check(report, "device")["detail"].startswith(f"{expected} (auto: ")
    assert _check(report, "dataset_name")["status"] == "ok"
    code, report = _dry(capsys, str(tiny_planner), str(rl_dir), "--device", "cpu", "--split", "nope")
    assert code == 2 and report["extra"]["device"] == "cpu"
    assert "no `nope`" in _check(report, "dataset_name")["detail"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_without_cuda_is_refused(tiny_planner, rl_dir, capsys):
    code, report = _dry(capsys, str(tiny_planner), str(rl_dir), "--device", "cuda")
    assert code == 2 and "no CUDA device is visible" in _check(report, "device")["detail"]
    with pytest.raises(ValueError, match="no CUDA device"):
        evaluate.resolve_device("cuda:0")


def test_evaluation_loads_on_the_resolved_device(tiny_planner, rl_dir, capsys):
    from omnidecision.modeling import load_planner

    device, _ = evaluate.resolve_device("auto")
    model, _ = load_planner(tiny_planner, device=device)
    assert model.device.type == device
    assert evaluate.main([str(tiny_planner), str(rl_dir), "--n", "2", "--device", "auto"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["device"] == device and result["n_states"] == 2 and 0.0 <= result["closure"]["mean"] <= 1.0
