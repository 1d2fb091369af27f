"""Secrets stay out of everything the project writes or prints.

Every key variable the recipes and the code name (`api_key_env`, `judge_api_key_env`, `*_API_KEY`: found by reading
configs/ and omnidecision/, not listed here) is set to a distinctive fake value; then the real commands run as a user
runs them (subprocesses): collect (and its --dry-run), eval, harvest, the sft and grpo dry runs, a tiny sft with the
wandb tracker (offline). No file under the output folders, no printed line and no log may contain a key. The planner
endpoint (tests/stub_chat.py) records the Authorization headers it received: the key was really in play.

    .venv/bin/pytest tests/reliability/test_secrets.py -q
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from omnidecision.tasks.synth import write_suite
from tests.stub_chat import ChatStubHandler, chat_completion
from tests.tools.local_pages import serving

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from omnidecision.cli import app; app()"]
KEY_NAME = re.compile(r"api_key_env:\s*([A-Z][A-Z0-9_]+)")  # a recipe's own key variable, whatever its name
EXPECTED = {"OPENAI_API_KEY", "PERCEPTION_API_KEY", "VLLM_API_KEY", "TAVILY_API_KEY", "BRAVE_API_KEY",
            "SERPER_API_KEY", "WANDB_API_KEY"}


def key_variables() -> set[str]:
    """The key variables the recipes and code name: `api_key_env: X`, `"X_API_KEY"` strings, env lookups."""
    found: set[str] = set()
    for path in [*ROOT.glob("configs/**/*.yaml"), *ROOT.glob("omnidecision/**/*.py"), *ROOT.glob("scripts/**/*")]:
        if path.is_file():
            text = path.read_text("utf-8", errors="replace")
            found |= set(KEY_NAME.findall(text))
            found |= set(re.findall(r"\b([A-Z][A-Z0-9]*_API_KEY)\b", text))
    return found


class Planner(ChatStubHandler):
    authorizations: set[str] = set()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Planner.authorizations.add(self.headers.get("Authorization", ""))
        self._send(200, chat_completion('{"action": "finish"}'))

    def do_GET(self) -> None:
        Planner.authorizations.add(self.headers.get("Authorization", ""))
        self._send(200, b'{"object": "list", "data": [{"id": "planner", "object": "model"}]}')


@pytest.fixture(scope="module")
def endpoint():
    with serving(Planner) as port:
        yield f"http://127.0.0.1:{port}/v1"


def test_the_key_variables_are_found_where_the_recipes_name_them():
    found = key_variables()
    assert EXPECTED <= found, EXPECTED - found


def test_collect_eval_harvest_write_and_print_no_key(tmp_path: Path, endpoint: str) -> None:
    no_leak(tmp_path, endpoint, training=False)


@pytest.mark.slow
def test_no_command_writes_or_prints_a_key(tmp_path: Path, endpoint: str) -> None:
    """The whole path, training included (≈ 100 s on 2 busy cores: `make slow-test`)."""
    no_leak(tmp_path, endpoint, training=True)


def no_leak(tmp_path: Path, endpoint: str, training: bool) -> None:
    names = sorted(key_variables())
    fakes = {n: f"sk-{n.lower().replace('_', '')}-CANARY{secrets.token_hex(6)}" for n in names}
    env = {**os.environ, **fakes, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path / "wandb"),
           "WANDB_SILENT": "true", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(ROOT)}
    (tmp_path / "wandb").mkdir()
    printed: list[tuple[str, str]] = []

    def run(*args: str, ok: bool = True) -> str:
        proc = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        printed.append((" ".join(args[:2]), proc.stdout + proc.stderr))
        if ok:
            assert proc.returncode == 0, f"{args}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        return proc.stdout + proc.stderr

    # a recipe that uses the endpoint with the key (planner) and names every other key variable the code knows
    write_suite(8, 3, tmp_path / "synth")
    recipe = {"tasks": {"path": str(tmp_path / "synth"), "format": "synthetic"},
              "backends": {"default": {"kind": "teacher"},
                           "planner": {"kind": "openai", "base_url": endpoint, "model": "planner",
                                       "api_key_env": "OPENAI_API_KEY", "max_retries": 0}},
              "samples": 1, "concurrency": 4, "progress": False}
    (tmp_path / "collect.yaml").write_text(yaml.safe_dump({**recipe, "out": str(tmp_path / "collect")}), "utf-8")
    (tmp_path / "eval.yaml").write_text(yaml.safe_dump({**recipe, "out": str(tmp_path / "eval"), "plots": False}),
                                        "utf-8")
    # collect, eval, harvest
    run("collect", "--config", "collect.yaml", "--dry-run", ok=False)  # prints the resolved recipe and checks
    run("collect", "--config", "collect.yaml", "--verbose")
    run("eval", "--config", "eval.yaml")
    run("harvest", str(tmp_path / "collect"), "--out", str(tmp_path / "harvest"), "--label", "rule",
        "--val-fraction", "0.25")
    assert f"Bearer {fakes['OPENAI_API_KEY']}" in Planner.authorizations  # the key was really sent
    if training:
        train(run, tmp_path, endpoint)
    scan(tmp_path, fakes, printed, training)


def train(run: Callable[..., str], tmp_path: Path, endpoint: str) -> None:
    # the training side: a tiny planner, the sft / grpo dry runs (grpo with an LLM judge named), a tiny sft with wandb
    run("tiny-planner", "--out", str(tmp_path / "model"), "--data", str(tmp_path / "harvest" / "sft"),
        "--hidden", "32", "--layers", "1")
    sft = ["sft", "--config", str(ROOT / "configs/sft/tiny-cpu.yaml"), "--model_name_or_path",
           str(tmp_path / "model"), "--dataset_name", str(tmp_path / "harvest" / "sft"), "--output_dir",
           str(tmp_path / "sft"), "--max_steps", "2", "--per_device_train_batch_size", "2", "--eval_strategy", "no",
           "--save_strategy", "no", "--load_best_model_at_end", "false", "--disable_tqdm", "true"]
    run(*sft, "--dry-run", ok=False)
    run("grpo", "--config", str(ROOT / "configs/grpo/tiny-cpu.yaml"), "--model_name_or_path",
        str(tmp_path / "model"), "--dataset_name", str(tmp_path / "harvest" / "rl"), "--output_dir",
        str(tmp_path / "grpo"), "--judge_base_url", endpoint, "--judge_model", "judge", "--judge_weight", "0.5",
        "--dry-run", ok=False)
    run(*sft, "--report_to", "wandb", "--logging_steps", "1")


def scan(tmp_path: Path, fakes: dict[str, str], printed: list[tuple[str, str]], training: bool) -> None:
    """Nothing written under the work folder (every output folder, wandb's offline run, logs) or printed holds a
    key."""
    leaks = []
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 20, "the commands wrote less than expected"
    assert not training or any((tmp_path / "wandb").rglob("*.wandb")), "no offline wandb run was written"
    for path in files:
        data = path.read_bytes()
        leaks += [f"{path.relative_to(tmp_path)}: {n}" for n, v in fakes.items() if v.encode() in data]
    for command, text in printed:
        leaks += [f"output of `{command}`: {n}" for n, v in fakes.items() if v in text]
    assert not leaks, "secrets leaked:\n" + "\n".join(leaks)
