"""The GPU-cluster path's checks, on CPU: `--dry-run` of grpo / sft / serve, the launcher, the precision guard, the
recipes (attention implementation installable, no machine paths), the vLLM pin, FSDP's saved state.

    .venv/bin/pytest tests/cluster/test_dry_run.py -q
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from omnidecision.cli import app

pytestmark = pytest.mark.requires("trl")  # skips without it; fails under CI=true (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
CFG = ROOT / "configs"  # anchored: the tests run from any working directory (`cd tests && pytest`)
SERVER_RECIPE = ROOT / "configs" / "grpo" / "qwen3-8b-lora-vllm-server.yaml"
GPU_RECIPES = [ROOT / "configs" / "sft" / "qwen3-8b-lora.yaml", ROOT / "configs" / "sft" / "qwen3-32b-full-zero3.yaml",
               SERVER_RECIPE, ROOT / "configs" / "grpo" / "qwen3-8b-vllm-colocate.yaml"]


def _report(args: list[str]) -> tuple[int, dict]:
    res = CliRunner().invoke(app, args)
    return res.exit_code, json.loads(res.stdout)  # the whole of stdout: scripts parse it (grpo.slurm)


def _check(report: dict, what: str) -> dict:
    return next(c for c in report["checks"] if c["what"] == what)


@pytest.fixture(scope="module")
def rl_states(tmp_path_factory) -> Path:
    from omnidecision.rl.data import write_rl_dataset

    return write_rl_dataset(tmp_path_factory.mktemp("harvest") / "h", n_train=6, n_validation=2) / "rl"


@pytest.fixture(scope="module")
def adapter(tmp_path_factory) -> Path:
    """A LoRA adapter folder over a locally built tiny Qwen3."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    folder = tmp_path_factory.mktemp("models")
    base = build_tiny_planner(folder / "base", texts=list(default_corpus(n=30)), hidden=32, layers=1, heads=2,
                              vocab_size=512)
    lora = get_peft_model(AutoModelForCausalLM.from_pretrained(str(base)),
                          LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    lora.save_pretrained(folder / "adapter")
    return folder / "adapter"


# ---------------------------------------------------------------- grpo


def test_grpo_dry_run_resolves_the_dataset_name(rl_states, adapter):
    code, report = _report(["grpo", "--config", str(SERVER_RECIPE), "--dataset_name", str(rl_states),
                            "--model_name_or_path", str(adapter), "--dry-run"])
    assert code == 0, report
    assert report["resolved"]["script"]["dataset_name"] == str(rl_states)
    assert _check(report, "dataset_name")["status"] == "ok"
    assert "['train', 'validation']" in _check(report, "dataset_name")["detail"]
    assert report["extra"]["dataset"] == str(rl_states)
    # an adapter's generation server loads its base (TRL pushes the merged weights into it)
    assert report["extra"]["generation_model"] == str(adapter.parent / "base")
    # the harvest folder itself works too (its rl/ is read), and the training loader reads the same folder
    from omnidecision.rl.data import load_rl_splits

    code, report = _report(["grpo", "--config", str(SERVER_RECIPE), "--dataset_name", str(rl_states.parent),
                            "--model_name_or_path", str(adapter), "--dry-run"])
    assert code == 0 and _check(report, "dataset_name")["status"] == "ok"
    assert len(load_rl_splits(rl_states.parent)["train"]) == 6


# Installed through PYTHONPATH: the first import of TRL (inside the dry run's checks: the CLI loads it only there)
# prints on stdout from Python and from the file descriptor, as DeepSpeed's import and C extensions do on some nodes.
NOISY_IMPORT = """
import os, sys


class Noisy:
    def find_spec(self, name, path=None, target=None):
        if name == "trl":
            sys.meta_path.remove(self)
            print("[WARNING] a library's line on stdout", flush=True)
            os.write(1, b"[C] a C extension's line on stdout\\n")
        return None


sys.meta_path.insert(0, Noisy())
"""


def test_grpo_dry_run_stdout_is_the_report_alone(rl_states, adapter, tmp_path):
    """What libraries print while the checks run goes to stderr: grpo.slurm reads the plan from stdout with
    json.load (a CI run failed on a line a library printed before the report)."""
    import os
    import subprocess

    (tmp_path / "sitecustomize.py").write_text(NOISY_IMPORT)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "omnidecision.cli", "grpo", "--config", str(SERVER_RECIPE),
                          "--dataset_name", str(rl_states), "--model_name_or_path", str(adapter), "--dry-run"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert "a library's line" in res.stderr and "a C extension's line" in res.stderr, res.stderr[-2000:]
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["extra"]["dataset"] == str(rl_states)


def test_grpo_dry_run_names_a_missing_dataset(tmp_path, adapter):
    code, report = _report(["grpo", "--config", str(SERVER_RECIPE), "--dataset_name", str(tmp_path / "nope"),
                            "--model_name_or_path", str(adapter), "--dry-run"])
    assert code == 2
    assert _check(report, "dataset_name")["status"] == "error" and "nope" in _check(report, "dataset_name")["detail"]


def test_dataset_dir_is_gone():
    """One dataset option with one meaning: the old `dataset_dir` is an unknown option, named in the error."""
    from omnidecision.rl.config import parse_args

    with pytest.raises(ValueError, match="dataset_dir"):
        parse_args(["--config", str(SERVER_RECIPE), "--dataset_dir", "x", "--bf16", "false", "--use_cpu", "true"])


def test_grpo_launcher_runs_the_recipe_under_accelerate(rl_states, adapter):
    code, report = _report(["grpo", "--accelerate-config", str(CFG / "accelerate/zero3.yaml"), "--config",
                            str(CFG / "grpo/qwen3-8b-vllm-colocate.yaml"), "--model_name_or_path", str(adapter),
                            "--dataset_name", str(rl_states), "--dry-run"])
    assert code == 0, report
    cmd = report["would_run"][0]
    assert (f"-m accelerate.commands.launch --config_file {CFG / 'accelerate/zero3.yaml'} -m omnidecision.rl.train"
            in cmd)
    assert cmd.endswith(f"--dataset_name {rl_states}")
    assert "DEEPSPEED, 8 processes" in _check(report, "accelerate config")["detail"]
    # ZeRO-3 shards the weights: the in-run evaluation is announced as skipped, balanced selection refused
    code, report = _report(["grpo", "--accelerate-config", str(CFG / "accelerate/zero3.yaml"), "--config",
                            str(CFG / "grpo/qwen3-8b-vllm-colocate.yaml"), "--model_name_or_path", str(adapter),
                            "--dataset_name", str(rl_states), "--select_states", "balanced", "--dry-run"])
    assert code == 2 and _check(report, "select_states")["status"] == "error"


def test_sharded_training_skips_the_in_run_eval(monkeypatch):
    from omnidecision.rl.config import parse_args
    from omnidecision.rl.train import _place_policy

    script, training, _ = parse_args(["--config", str(CFG / "grpo/tiny-cpu.yaml"), "--select_states", "all",
                                      "--checkpoint_policy", "final"])
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    assert _place_policy(object(), script, training) is False  # no model move, no eval
    script.select_states = "balanced"
    with pytest.raises(ValueError, match="ZeRO-3"):
        _place_policy(object(), script, training)
    script.select_states, script.checkpoint_policy = "all", "dev_closure"  # candidates are decoded whole, too
    with pytest.raises(ValueError, match="checkpoint_policy=dev_closure .* ZeRO-3"):
        _place_policy(object(), script, training)


def test_the_policy_moves_to_the_training_device_before_the_eval():
    import torch

    from omnidecision.rl.config import parse_args
    from omnidecision.rl.train import _place_policy

    script, training, _ = parse_args(["--config", str(CFG / "grpo/tiny-cpu.yaml")])
    model = torch.nn.Linear(2, 2).to(torch.float64)
    moved = []
    model.to = lambda device: moved.append(device)  # records where it was asked to go
    assert _place_policy(model, script, training) is True
    assert moved == [training.device]


def test_grpo_falls_back_to_offline_wandb(monkeypatch, tmp_path, adapter):
    """GRPO, like SFT, logs offline when report_to has wandb and the node has no key (checked before any data)."""
    import os

    from omnidecision.rl.config import parse_args
    from omnidecision.rl.train import main

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))  # no `wandb login` on this machine either
    args = parse_args(["--config", str(CFG / "grpo/tiny-cpu.yaml"), "--report_to", "wandb", "--output_dir",
                       str(tmp_path / "out"), "--dataset_name", str(tmp_path / "missing")])
    from omnidecision.preflight import PreflightError

    with pytest.raises(PreflightError, match="missing"):  # refused by the dry run's checks, after the fallback
        main(*args)
    assert os.environ["WANDB_MODE"] == "offline"


def test_judge_share_and_cache_per_process(tmp_path):
    from omnidecision.rewards.llm_judge import RewardJudge
    from omnidecision.rl.config import parse_args

    script, _, _ = parse_args(["--config", str(SERVER_RECIPE), "--bf16", "false", "--use_cpu", "true",
                               "--judge_cache", str(tmp_path / "judge.jsonl")])
    assert script.reward_funcs == ["closure"] and script.judge_weight == 0.5
    options = script.judge_options(process_index=3, num_processes=16)
    assert options["concurrency"] == 4 and options["cache_rank"] == 3  # 64 for the run, 4 per process
    assert script.judge_options()["concurrency"] == 64 and script.judge_options()["cache_rank"] is None
    assert script.reward_params(3, 16)["closure"]["judge"] == options
    # each rank appends to its own file and reads every rank's at start
    (tmp_path / "judge.rank0.jsonl").write_text(json.dumps({"key": "a", "score": 0.25}) + "\n")
    (tmp_path / "judge.jsonl").write_text(json.dumps({"key": "b", "score": 1.0}) + "\n")
    judge = RewardJudge.from_options(**options)
    assert judge.cache_path == tmp_path / "judge.rank3.jsonl"
    assert {k: v.score for k, v in judge.cache.items()} == {"a": 0.25, "b": 1.0}


def test_judge_recipe_checks():
    from omnidecision.rl.config import parse_args

    base = ["--config", str(CFG / "grpo/tiny-cpu.yaml")]
    with pytest.raises(ValueError, match="judge_base_url"):
        parse_args([*base, "--reward_funcs", "closure", "--reward_weights", "1", "--judge_weight", "0.5"])
    with pytest.raises(ValueError, match="add closure"):
        parse_args([*base, "--reward_funcs", "format", "--reward_weights", "1", "--judge_weight", "0.5",
                    "--judge_base_url", "http://h:1/v1", "--judge_model", "j"])
    with pytest.raises(ValueError, match="judge_weight must be"):
        parse_args([*base, "--reward_funcs", "closure", "--reward_weights", "1", "--judge_weight", "-1",
                    "--judge_base_url", "http://h:1/v1", "--judge_model", "j"])
    script, _, _ = parse_args([*base, "--reward_funcs", "judge", "--reward_weights", "1", "--judge_base_url",
                               "http://h:1/v1", "--judge_model", "j"])  # alone: TRL leaves an all-None row out
    assert script.reward_params()["judge"]["model"] == "j"


# ---------------------------------------------------------------- sft and the precision guard


@pytest.mark.gpu  # the CPU path: a GPU machine skips it
def test_bf16_without_cuda_is_an_error_not_a_cpu_run():
    import torch

    from omnidecision.sft.config import parse_args

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match=r"bf16=true but no CUDA device is visible .*--bf16 false --use_cpu true"):
        parse_args(["--config", str(CFG / "sft/qwen3-8b-lora.yaml")])
    _, training, _ = parse_args(["--config", str(CFG / "sft/qwen3-8b-lora.yaml"), "--bf16", "false",
                                 "--use_cpu", "true"])
    assert training.use_cpu and not training.bf16
    _, training, _ = parse_args(["--config", str(CFG / "sft/qwen3-8b-lora.yaml"), "--cpu_fallback", "true"])
    assert training.use_cpu and not training.bf16  # asked for explicitly: warned, not silent


def test_sft_dry_run_defers_the_device_and_prints_the_launch(tmp_path, hub_unreachable):
    from omnidecision.synthetic.states import write_sft_dataset

    data = write_sft_dataset(tmp_path / "sft", n_train=4, n_validation=2, seed=0)
    code, report = _report(["sft", "--accelerate-config", str(CFG / "accelerate/zero2.yaml"), "--num-processes", "4",
                            "--config", str(CFG / "sft/qwen3-8b-lora.yaml"), "--dataset_name", str(data), "--dry-run"])
    assert code == 0, report
    assert report["resolved"]["training"]["bf16"] is True  # the recipe's request, not the CPU stand-in
    assert _check(report, "model_name_or_path")["status"] == "warning"  # Qwen/Qwen3-8B: a hub id, not checked
    launch = f"--num_processes 4 -m omnidecision.sft.train --config {CFG / 'sft/qwen3-8b-lora.yaml'}"
    assert launch in report["would_run"][0]
    code, report = _report(["sft", "--config", str(CFG / "sft/qwen3-8b-lora.yaml"), "--dataset_name",
                            str(tmp_path / "absent"), "--dry-run"])
    assert code == 2 and _check(report, "dataset_name")["status"] == "error"


def test_cpu_processes_beyond_the_machines_are_refused_by_the_dry_run_and_the_run(tmp_path, adapter):
    """accelerate's MULTI_CPU launch starts one process per machine: `--num-processes 2` with the CPU config would
    train in one. The dry run and the run refuse it in the same words; one process per machine passes."""
    from omnidecision.synthetic.states import write_sft_dataset

    data = write_sft_dataset(tmp_path / "sft", n_train=4, n_validation=2, seed=0)
    args = ["sft", "--config", str(CFG / "sft/tiny-cpu.yaml"), "--model_name_or_path", str(adapter.parent / "base"),
            "--dataset_name", str(data), "--output_dir", str(tmp_path / "out"), "--accelerate-config",
            str(CFG / "accelerate/cpu.yaml")]
    code, report = _report([*args, "--num-processes", "2", "--dry-run"])
    detail = _check(report, "launch")["detail"]
    assert code == 2 and "MULTI_CPU starts one process per machine (1 in the config)" in detail, report
    res = CliRunner().invoke(app, [*args, "--num-processes", "2"])  # the run: refused before anything starts
    said = " ".join(res.output.replace("│", " ").split())  # click's error box wraps the line
    assert res.exit_code == 2 and "MULTI_CPU starts one process per machine (1 in the config)" in said, said
    assert not (tmp_path / "out").exists()
    code, report = _report([*args, "--num-processes", "1", "--dry-run"])
    assert code == 0 and "--num_processes 1 -m omnidecision.sft.train" in report["would_run"][0], report


# ---------------------------------------------------------------- serve


def _on_hub_base(adapter: Path, where: Path) -> Path:
    """A copy of `adapter` that records Qwen/Qwen3-8B as its base (as an adapter trained on it does)."""
    import json
    import shutil

    shutil.copytree(adapter, where)
    config = where / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "base_model_name_or_path": "Qwen/Qwen3-8B"}))
    return where


def test_serve_dry_run_refuses_an_adapter_on_another_base(adapter):
    code, report = _report(["serve", "Qwen/Qwen3-8B", "--lora", f"planner={adapter}", "--dry-run"])
    detail = _check(report, "lora base")["detail"]
    assert code == 2 and "Qwen/Qwen3-8B" in detail and str(adapter.parent / "base") in detail and "--merge" in detail
    code, report = _report(["serve", str(adapter.parent / "base"), "--lora", f"planner={adapter}", "--dry-run"])
    assert code == 0 and _check(report, "lora base")["status"] == "ok"


@pytest.mark.requires("vllm")
def test_serve_dry_run_accepts_a_hub_id_and_prints_a_valid_vllm_command(adapter, tmp_path, hub_unreachable):
    from omnidecision.serving.vllm_server import vllm_arg_error

    base = adapter.parent / "base"
    adapter = _on_hub_base(adapter, tmp_path / "adapter")
    code, report = _report(["serve", "Qwen/Qwen3-8B", "--lora", f"planner={adapter}", "--max-lora-rank", "64",
                            "--dry-run"])
    assert code == 0, report
    cmd = report["extra"]["vllm_command"]
    assert cmd[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    server_args = cmd[3:]
    assert server_args[server_args.index("--model") + 1] == "Qwen/Qwen3-8B"
    assert server_args[server_args.index("--lora-modules") + 1] == f"planner={adapter}"
    assert vllm_arg_error(server_args) is None  # vLLM's own parser accepts it
    assert _check(report, "vllm arguments")["status"] == "ok"
    # a hub model may need the hub: no HF_HUB_OFFLINE; a local folder is served offline
    assert "HF_HUB_OFFLINE" not in report["would_run"][0]
    code, report = _report(["serve", str(base), "--dry-run"])
    assert code == 0 and "HF_HUB_OFFLINE=1" in report["would_run"][0]
    # a wrong option is caught by the same parser
    assert "unrecognized arguments" in vllm_arg_error([*server_args, "--max-lora-rnk", "3"])


def test_serve_dry_run_rejects_what_cannot_be_served(tmp_path, adapter):
    code, report = _report(["serve", "runs/export/no-such-model", "--dry-run"])
    assert code == 2 and "not a hub id" in _check(report, "model")["detail"]
    code, report = _report(["serve", str(adapter), "--dry-run"])  # an adapter is no base model
    assert code == 2 and "serve its base with --lora" in _check(report, "model")["detail"]
    code, report = _report(["serve", "Qwen/Qwen3-8B", "--lora", f"planner={tmp_path}", "--dry-run"])
    assert code == 2 and "no adapter_config.json" in _check(report, "lora planner")["detail"]


def test_server_starts_only_what_it_can_serve(tmp_path):
    from omnidecision.serving.vllm_server import VLLMServer, VLLMServerError

    with pytest.raises(VLLMServerError, match="not a hub id"):
        VLLMServer(tmp_path / "a" / "b").start()
    with pytest.raises(VLLMServerError, match="not a folder"):
        VLLMServer("Qwen/Qwen3-8B", lora_modules={"p": str(tmp_path / "none")}).start()


# ---------------------------------------------------------------- recipes, pins, FSDP


@pytest.mark.parametrize("recipe", GPU_RECIPES, ids=lambda p: p.name)
def test_gpu_recipe_attention_is_installed_by_a_documented_extra(recipe):
    """The attention implementation a GPU recipe asks for comes with torch (the `train` extra) or with a package
    that an extra of pyproject.toml installs."""
    import tomllib

    from omnidecision.preflight import ATTENTION_PACKAGES

    impl = yaml.safe_load(recipe.read_text())["attn_implementation"]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    if impl in ("sdpa", "eager"):
        assert any(req.startswith("torch") for req in extras["train"])
    else:
        module = ATTENTION_PACKAGES[impl][0]
        assert any(module.replace("_", "-") in req for reqs in extras.values() for req in reqs), impl


def test_serve_extra_pins_the_vllm_range_trl_supports():
    import tomllib
    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    ours = Requirement(next(r for r in extras["serve"] if r.startswith("vllm")))
    trl = [Requirement(r) for r in importlib.metadata.requires("trl") or []]
    theirs = next(r for r in trl if r.name == "vllm" and r.marker and r.marker.evaluate({"extra": "vllm"}))
    assert ours.specifier == theirs.specifier, (str(ours.specifier), str(theirs.specifier))


def test_no_machine_path_in_recipes_docs_or_scripts():
    # the roots of home and cluster folders (spelt in parts: this file must not carry one itself)
    roots = "|".join(f"/{r}/" for r in ("home", "work", "Users", "scratch", "fsx"))
    machine = re.compile(rf"(?<![\w.])({roots}|/tmp/[\w-]|\.\./shared\b|[A-Z]:\\\\)")
    files = [*ROOT.glob("configs/**/*.yaml"), *ROOT.glob("docs/**/*.md"), ROOT / "README.md",
             *ROOT.glob("scripts/**/*.sh"), *ROOT.glob("scripts/**/*.slurm")]
    hits = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}" for f in files
            for n, line in enumerate(f.read_text("utf-8").splitlines(), 1) if machine.search(line)]
    assert not hits, "\n".join(hits)


def test_fsdp_config_saves_a_model_export_reads(monkeypatch):
    """accelerate's own launcher turns configs/accelerate/fsdp.yaml into the FSDP plugin of the run; its state-dict
    type must be FULL_STATE_DICT, the only one with which transformers' Trainer.save_model writes the model
    (SHARDED_STATE_DICT writes no model file, and `omnidecision export` has nothing to read)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env
    from transformers import Trainer

    args = launch_command_parser().parse_args(["--config_file", str(ROOT / str(CFG / "accelerate/fsdp.yaml")),
                                               "-m", "omnidecision.sft.train"])
    args, _, _ = _validate_launch_command(args)
    env = prepare_multi_gpu_env(args)
    assert env["ACCELERATE_USE_FSDP"] == "true"
    for key, value in env.items():
        if key.startswith(("FSDP_", "ACCELERATE_")):
            monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()
    assert "FULL_STATE_DICT" in str(plugin.state_dict_type)
    # the condition under which Trainer.save_model saves an FSDP model (a change in transformers fails here)
    assert '"FULL_STATE_DICT" in str(self.accelerator.state.fsdp_plugin.state_dict_type)' in \
        inspect.getsource(Trainer.save_model)
