"""Checks made before a job starts anything, and the `--dry-run` report of `sft`, `grpo`, `serve`, `collect`, `eval`.

A dry run resolves the recipe and its overrides exactly as the real command does, checks what it can check from
here (local folders, files, URL syntax, installed packages, the accelerate config), prints a JSON report, and
starts nothing: no model is loaded, no server started, no file written. Checks that only the GPU node can make
(a CUDA device for bf16) are reported as deferred when this machine has no GPU.

    omnidecision grpo --config configs/grpo/qwen3-8b-lora-vllm-server.yaml --dataset_name data/harvest/rl --dry-run
    omnidecision serve Qwen/Qwen3-8B --lora planner=runs/export/grpo-adapter --dry-run
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, Field

from omnidecision.checkpoints import resolve_resume
from omnidecision.inputs import Ref, local_looking, resolve
from omnidecision.outputs import report_out

logger = logging.getLogger(__name__)

# The attention implementations that need a package beyond torch (sdpa and eager come with torch).
ATTENTION_PACKAGES: dict[str, tuple[str, str]] = {
    "flash_attention_2": ("flash_attn", "pip install flash-attn --no-build-isolation (CUDA nodes only)"),
    "flash_attention_3": ("flash_attn_interface", "build FlashAttention-3 from its hopper/ folder (H100/H200)"),
}

_DEFER_DEVICE_CHECKS: contextvars.ContextVar[bool] = contextvars.ContextVar("defer_device_checks", default=False)


class Check(BaseModel):
    """One pre-flight check: what was checked, the outcome and why."""

    what: str
    status: Literal["ok", "error", "warning", "deferred"]
    detail: str = ""


class DryRunReport(BaseModel):
    """What a `--dry-run` prints: the resolved configuration, the checks, and what would run."""

    command: str
    recipe: str | None = None
    resolved: dict[str, Any] = Field(default_factory=dict)
    checks: list[Check] = Field(default_factory=list)
    would_run: list[str] = Field(default_factory=list, description="the command line(s) a real run starts")
    extra: dict[str, Any] = Field(default_factory=dict)

    def add(self, what: str, status: Literal["ok", "error", "warning", "deferred"], detail: str = "") -> None:
        self.checks.append(Check(what=what, status=status, detail=detail))

    def extend(self, checks: list[Check]) -> None:
        self.checks.extend(checks)

    @property
    def errors(self) -> list[Check]:
        return [c for c in self.checks if c.status == "error"]

    def render(self) -> str:
        return json.dumps(self.model_dump(exclude_defaults=False), indent=2, default=str)


class PreflightError(ValueError):
    """A check a stage makes before it starts failed: the message is the dry run's error line without `error: `
    (`what: detail`), so a dry run and a real run refuse the same input in the same words."""


def require(checks: list[Check]) -> list[Check]:
    """Raise `PreflightError` naming every failed check (`what: detail`, joined by `; `); else return `checks`.

    A stage's entry calls its checks function through this before it loads anything; its dry run reports the same
    checks (`DryRunReport.extend`).

    >>> require([Check(what="dataset_name", status="error", detail="d: no such folder")])
    Traceback (most recent call last):
    ...
    omnidecision.preflight.PreflightError: dataset_name: d: no such folder
    """
    errors = [c for c in checks if c.status == "error"]
    if errors:
        raise PreflightError("; ".join(f"{c.what}: {c.detail}" for c in errors))
    return checks


def run_refusing(main: Any, *args: Any, **kwargs: Any) -> Any:
    """`main(*args, **kwargs)`; a `PreflightError` (the stage's checks refused its input) exits 2 with the one error
    line, as the CLI does, instead of a traceback (the `python -m` entries `accelerate launch` runs)."""
    try:
        return main(*args, **kwargs)
    except PreflightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


# ---------------------------------------------------------------- devices and precision


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@contextlib.contextmanager
def deferred_device_checks() -> Iterator[None]:
    """While active, the planner configs accept a GPU recipe (bf16) on a machine without CUDA: the dry run of a
    cluster command on a login node. The device itself is then checked on the training node."""
    token = _DEFER_DEVICE_CHECKS.set(True)
    try:
        yield
    finally:
        _DEFER_DEVICE_CHECKS.reset(token)


def check_precision(args: Any, where: str) -> None:
    """Refuse bf16/fp16 on a machine where no CUDA device is visible, instead of training on the CPU unnoticed.

    Called from the `__post_init__` of the planner's TRL configs (before TRL's own, vaguer check). Under
    `deferred_device_checks` the requested precision is kept in `args.requested_precision` and the config is
    resolved as a CPU one, so that a dry run on a CPU-only login node still shows the recipe.
    """
    if getattr(args, "use_cpu", False) or cuda_available():
        return
    wants = [name for name in ("bf16", "fp16") if getattr(args, name, False)]
    if not wants:
        if getattr(args, "bf16", False) is None:
            # a recipe that sets no precision (TRL would default to bf16, a GPU setting): a CPU run, said out loud
            logger.warning("%s: no CUDA device is visible and the recipe sets no precision: training on the CPU in "
                           "float32", where)
            args.bf16, args.use_cpu = False, True
        return
    if _DEFER_DEVICE_CHECKS.get():
        args.requested_precision = {"bf16": bool(args.bf16), "fp16": bool(args.fp16), "use_cpu": bool(args.use_cpu)}
        args.bf16, args.fp16, args.use_cpu = False, False, True
        return
    if getattr(args, "cpu_fallback", False):
        logger.warning("%s: %s requested but no CUDA device is visible: training on the CPU in float32 "
                       "(cpu_fallback=true)", where, "/".join(wants))
        args.bf16, args.fp16, args.use_cpu = False, False, True
        return
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    raise ValueError(
        f"{where}: {'/'.join(wants)}=true but no CUDA device is visible (torch.cuda.is_available() is False; "
        f"CUDA_VISIBLE_DEVICES={visible!r}). A GPU recipe on a node without a usable GPU stops here rather than "
        f"training on the CPU. On a CPU machine on purpose: --bf16 false --use_cpu true")


def sharded_parameters(training_args: Any = None) -> str | None:
    """"ZeRO-3" or "FSDP" when the launch shards the parameters across processes (no rank holds the whole model),
    else None. Reads the training arguments and what `accelerate launch` exports for its config file."""
    ds = getattr(training_args, "hf_deepspeed_config", None)
    if (ds is not None and ds.is_zero3()) or os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3":
        return "ZeRO-3"
    if bool(getattr(training_args, "fsdp", None)) or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "FSDP"
    return None


def check_attention(attn_implementation: str | None) -> Check:
    """Is the recipe's attention implementation installed here? sdpa/eager always are (torch)."""
    impl = attn_implementation or "sdpa"
    if impl in ATTENTION_PACKAGES:
        module, how = ATTENTION_PACKAGES[impl]
        if importlib.util.find_spec(module) is None:
            return Check(what=f"attn_implementation={impl}", status="error",
                         detail=f"needs the `{module}` package, which is not installed ({how}); or use sdpa, the "
                                f"recipes' default")
        return Check(what=f"attn_implementation={impl}", status="ok", detail=f"{module} installed")
    if impl.startswith("kernels-community/") or "/" in impl:
        if importlib.util.find_spec("kernels") is None:
            return Check(what=f"attn_implementation={impl}", status="error",
                         detail="a hub kernel needs the `kernels` package (pip install kernels) and hub access")
        return Check(what=f"attn_implementation={impl}", status="warning",
                     detail="a hub kernel: downloaded at model load (needs hub access on the node)")
    return Check(what=f"attn_implementation={impl}", status="ok", detail="comes with torch")


def require_attention(attn_implementation: str | None, where: str) -> None:
    """Fail before the model load (minutes into a job) when the attention implementation is not installed."""
    check = check_attention(attn_implementation)
    if check.status == "error":
        raise ValueError(f"{where}: {check.what}: {check.detail}")


# ---------------------------------------------------------------- the hub token


def _redaction() -> ModuleType:
    """protocol/redaction.py, the one redactor: above preflight's row, a listed exception (docs/architecture.md) that
    loads only when a secret is hidden or a report printed."""
    from omnidecision.protocol import redaction  # above preflight's row: the one redactor (a listed exception)

    return redaction


def hide_hub_token(args: Any) -> None:
    """Move a `hub_token` (`--hub_token hf_...`) out of the trainer's arguments before TRL sees them: into HF_TOKEN
    (where huggingface_hub reads it for `push_to_hub`), hidden by value in everything printed or logged, and blanked
    in this process's argv (which wandb records in its run files, synced as they are). Called from the trainer
    configs' `__post_init__`, so `training_args.bin`, which the Trainer pickles into every checkpoint, never holds
    it, whichever way the run started (the CLI, `accelerate launch -m`, a recipe field). tests/reliability/
    test_planted_keys.py plants one and greps every file the run writes."""
    redaction = _redaction()

    token = getattr(args, "hub_token", None)
    if not token:
        return
    redaction.register([token])
    os.environ["HF_TOKEN"] = token
    args.hub_token = None
    sys.argv[:] = [redaction.REDACTED if a == token else a.replace(token, redaction.REDACTED) for a in sys.argv]


def hide_argv_secrets(args: list[str]) -> list[str]:
    """A stage's arguments with the hub token taken out (`--hub_token X` / `--hub_token=X`: moved into HF_TOKEN,
    which the launched process inherits, so it reaches neither the child's argv nor `ps`); every key on the command
    line (a provider-shaped value, the value of a credential flag other than an `*_env` variable name) hidden by
    value from what this process prints next (the `launching:` line, the dry run's report) and blanked in its argv.
    Called by `launch.launch_stage` before anything else (tests/reliability/test_planted_keys.py)."""
    redaction = _redaction()

    out: list[str] = []
    values: list[str] = [m.group(0) for a in args for m in redaction.SHAPED.finditer(a)]
    i = 0
    while i < len(args):
        flag, eq, value = args[i].partition("=")
        takes_next = not eq and i + 1 < len(args) and not args[i + 1].startswith("-")
        if not eq and takes_next:
            value = args[i + 1]
        named_key = flag.startswith("-") and redaction.CREDENTIAL_PARAM.search(flag.lstrip("-")) is not None
        if named_key and not flag.endswith(("_env", "-env")) and (eq or takes_next):
            values.append(value)
        if flag in ("--hub_token", "--hub-token") and (eq or takes_next):
            os.environ["HF_TOKEN"] = value  # huggingface_hub's own variable: push_to_hub reads it
            i += 1 if eq else 2
            continue
        out.append(args[i])
        i += 1
    redaction.register(values)
    # this process's own argv too: wandb records it in its run files when the stage trains in this process
    sys.argv[:] = [redaction.redact_text(a) for a in sys.argv]
    return out


# ---------------------------------------------------------------- tracking


def _netrc_path() -> Path:
    """The netrc file wandb reads: $NETRC, else ~/.netrc, else ~/_netrc (wandb's own order)."""
    if os.environ.get("NETRC"):
        return Path(os.environ["NETRC"]).expanduser()
    unix = Path("~/.netrc").expanduser()
    windows = Path("~/_netrc").expanduser()
    return windows if not unix.exists() and windows.exists() else unix


def wandb_login() -> str | None:
    """Where wandb would find credentials for its server ($WANDB_BASE_URL, default https://api.wandb.ai): the
    WANDB_API_KEY or WANDB_IDENTITY_TOKEN_FILE variable, or a netrc entry for the host (what `wandb login` writes);
    None when there are none. Read with the standard library, as wandb does, without importing wandb."""
    import netrc
    from urllib.parse import urlsplit

    for var in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE"):
        if os.environ.get(var):
            return var
    host = urlsplit(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").netloc
    path = _netrc_path()
    try:
        creds = netrc.netrc(str(path)).authenticators(host) if host else None
    except (OSError, netrc.NetrcParseError):
        return None
    return f"{path} (machine {host})" if creds and creds[2] else None


_WANDB_OFFLINE_LOGGED = False


def wandb_offline_fallback(report_to: list[str] | str | None) -> bool:
    """`report_to: wandb` with no WANDB_MODE and no wandb login (`wandb_login()`: env key, or a netrc entry from
    `wandb login`): log offline (`wandb sync` later) instead of failing at the first step on a node without
    credentials; said once per process. A login is respected: the run stays online. Returns True when it switched
    to offline."""
    global _WANDB_OFFLINE_LOGGED
    wants = report_to if isinstance(report_to, list) else [report_to or ""]
    if "wandb" not in wants or os.environ.get("WANDB_MODE") or wandb_login() is not None:
        return False
    if not _WANDB_OFFLINE_LOGGED:
        logger.warning("report_to includes wandb but there is no wandb login (no WANDB_API_KEY, no netrc entry "
                       "for %s): logging offline (WANDB_MODE=offline; `wandb sync` afterwards)", _netrc_path())
        _WANDB_OFFLINE_LOGGED = True
    os.environ["WANDB_MODE"] = "offline"
    return True


def check_tracking(report_to: list[str] | str | None) -> Check:
    wants = report_to if isinstance(report_to, list) else [report_to or ""]
    if "wandb" not in wants:
        return Check(what="report_to", status="ok", detail=f"{wants}")
    if os.environ.get("WANDB_MODE"):
        return Check(what="report_to=wandb", status="ok", detail=f"WANDB_MODE={os.environ.get('WANDB_MODE')!r}")
    if (login := wandb_login()) is not None:
        return Check(what="report_to=wandb", status="ok", detail=f"online: wandb login from {login}")
    return Check(what="report_to=wandb", status="warning",
                 detail="no wandb login (WANDB_API_KEY or a netrc entry from `wandb login`): the run logs offline "
                        "(WANDB_MODE=offline; `wandb sync` afterwards)")


# ---------------------------------------------------------------- paths and endpoints


def is_hub_id(name: str) -> bool:
    """`org/name` or `name`, not an existing local path and not a local-looking one (`inputs.local_looking`).

    >>> is_hub_id("Qwen/Qwen3-8B"), is_hub_id("runs/export/qwen3-8b"), is_hub_id("runs/sft"), is_hub_id("./model")
    (True, False, False, False)
    """
    return local_looking(name) is None and not Path(name).exists()


def check_model(name: str | None, what: str, *, local_only: bool = False) -> Check:
    """A model argument: a local folder with a config (full model or LoRA adapter), or a hub id."""
    if not name:
        return Check(what=what, status="error", detail="not set")
    p = Path(name).expanduser()
    if p.is_dir():
        if (p / "adapter_config.json").exists():
            base = _adapter_base(p)
            detail = f"LoRA adapter folder (base: {base})"
            if base and not Path(base).exists() and not is_hub_id(base):
                return Check(what=what, status="error", detail=f"{p}: adapter whose base {base} is neither a local "
                                                                f"folder nor a hub id")
            return Check(what=what, status="ok", detail=detail)
        if (p / "config.json").exists():
            return Check(what=what, status="ok", detail="local model folder")
        return Check(what=what, status="error", detail=f"{p} is a folder without config.json or adapter_config.json")
    if p.exists():
        return Check(what=what, status="error", detail=f"{p} is a file, not a model folder")
    if local_only:
        return Check(what=what, status="error", detail=f"{name}: no such folder")
    return ref_check(resolve(name, "model"), what)


def ref_check(ref: Ref, what: str) -> Check:
    """The check of a resolved model or dataset name (`inputs.resolve`): a missing local path is an error, a hub id
    found in the cache or on the hub is ok, one the hub could not be asked about is a warning saying so."""
    status: Literal["ok", "error", "warning"] = {"missing": "error", "unchecked": "warning"}.get(ref.kind, "ok")
    return Check(what=what, status=status, detail=ref.detail)


def _adapter_base(folder: Path) -> str | None:
    try:
        return json.loads((folder / "adapter_config.json").read_text("utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError):
        return None


def check_adapter(name: str, path: str) -> Check:
    p = Path(path).expanduser()
    what = f"lora {name}"
    if not p.is_dir():
        return Check(what=what, status="error", detail=f"{p} is not a folder")
    if not (p / "adapter_config.json").exists():
        return Check(what=what, status="error", detail=f"{p} has no adapter_config.json (not a LoRA adapter)")
    return Check(what=what, status="ok", detail=f"adapter of {_adapter_base(p)}")


def check_resume(value: str | bool | None, output_dir: str) -> Check:
    """Where `omnidecision sft|grpo` would start: the checkpoint it resumes from, or from scratch (said here, not
    logged: the run logs it once when it starts)."""
    try:
        start = resolve_resume(value, output_dir, say=False)
    except FileNotFoundError as exc:
        return Check(what="resume_from_checkpoint", status="error", detail=str(exc))
    return Check(what="resume_from_checkpoint", status="ok",
                 detail=f"{value}: resumes from {start}" if start else f"{value}: starts from scratch")


def check_folder(path: str | None, what: str, *, must_exist: bool = True) -> Check:
    if not path:
        return Check(what=what, status="error", detail="not set")
    p = Path(path).expanduser()
    if p.exists():
        return Check(what=what, status="ok", detail=str(p))
    if must_exist:
        return Check(what=what, status="error", detail=f"{p} does not exist")
    return Check(what=what, status="ok", detail=f"{p} (created by the run)")


# data files `datasets.load_dataset(folder)` reads; the file name (before the first `-` or `.`) is the split
DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".arrow")


def split_files(folder: str | Path) -> dict[str, list[str]]:
    """Split name -> data files of a dataset folder, without loading it: a `save_to_disk` folder lists its splits
    in dataset_dict.json; otherwise the file names give the splits, the way `datasets.load_dataset(folder)` reads
    them (train.jsonl, validation-00000-of-00001.parquet, ...)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    if (folder / "dataset_dict.json").exists():
        splits = json.loads((folder / "dataset_dict.json").read_text("utf-8")).get("splits", [])
        return {name: [str(folder / name)] for name in splits}
    out: dict[str, list[str]] = {}
    for f in sorted(folder.iterdir()):
        if f.is_file() and f.suffix in DATA_SUFFIXES:
            out.setdefault(f.name.split(".")[0].split("-")[0], []).append(str(f))
    return out


def split_columns(files: list[str]) -> list[str] | None:
    """The column names of a split, read from its first data file without loading the data (parquet schema, the
    first JSON line, the CSV header, a `save_to_disk` split's dataset_info.json); None when they cannot be read
    this way (then the loader is the judge)."""
    if not files:
        return None
    f = Path(files[0])
    try:
        if f.is_dir():  # a save_to_disk split
            info = json.loads((f / "dataset_info.json").read_text("utf-8"))
            return list((info.get("features") or {}).keys()) or None
        if f.suffix == ".parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(str(f)).names)
        if f.suffix == ".csv":
            import csv

            with f.open(encoding="utf-8", newline="") as fh:
                return next(csv.reader(fh), None)
        if f.suffix in (".jsonl", ".json"):
            with f.open(encoding="utf-8") as fh:
                first = next((line for line in fh if line.strip()), "")
            try:
                row = json.loads(first)
            except ValueError:  # a .json file holding one array over several lines
                rows = json.loads(f.read_text("utf-8"))
                row = rows[0] if isinstance(rows, list) and rows else None
            return list(row) if isinstance(row, dict) else None
        if f.suffix == ".arrow":
            import pyarrow as pa

            with f.open("rb") as fh:
                return list(pa.ipc.open_stream(fh).schema.names)
    except (OSError, ValueError, ImportError, StopIteration):
        return None
    return None


def check_split_columns(files: dict[str, list[str]], where: str, folder: str, columns: tuple[str, ...],
                        splits: list[str] | None = None) -> Check:
    """Every split in `splits` (default: all) has `columns`, read as `split_columns` reads them."""
    for split in splits if splits is not None else sorted(files):
        have = split_columns(files.get(split, []))
        if have is None:
            continue
        missing = [c for c in columns if c not in have]
        if missing:
            return Check(what=where, status="error", detail=f"{folder} split {split!r}: no "
                                                            f"{', '.join(f'`{c}`' for c in missing)} column "
                                                            f"(columns: {have})")
    return Check(what=where, status="ok", detail=f"{folder}: splits {sorted(files)}")


def check_url(url: str | None, what: str) -> Check:
    """Syntax of an endpoint URL; the endpoint is not contacted (it may only be up once the job runs).

    >>> check_url("http://node-a:8001/v1", "judge").status, check_url("node-a:8001", "judge").status
    ('ok', 'error')
    """
    if not url:
        return Check(what=what, status="error", detail="not set")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return Check(what=what, status="error", detail=f"{url!r} is not an http(s) URL with a host")
    return Check(what=what, status="ok", detail=f"{url} (syntax only: not contacted)")


def check_accelerate_config(path: str | None) -> Check:
    """An accelerate config file: it exists, is a YAML mapping, and names a distributed type."""
    import yaml

    if path is None:
        return Check(what="accelerate config", status="ok", detail="none: one process")
    p = Path(path)
    if not p.is_file():
        return Check(what="accelerate config", status="error", detail=f"{p} does not exist")
    try:
        cfg = yaml.safe_load(p.read_text("utf-8"))
    except yaml.YAMLError as exc:
        return Check(what="accelerate config", status="error", detail=f"{p}: not valid YAML: {exc}")
    if not isinstance(cfg, dict) or "distributed_type" not in cfg:
        return Check(what="accelerate config", status="error", detail=f"{p}: no distributed_type")
    return Check(what="accelerate config", status="ok",
                 detail=f"{p}: {cfg['distributed_type']}, {cfg.get('num_processes')} processes per launch")


# ---------------------------------------------------------------- resolved configuration


def changed_fields(obj: Any) -> dict[str, Any]:
    """The fields of a dataclass that differ from their defaults (what the recipe and the command line set)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        value = getattr(obj, f.name)
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            default = dataclasses.MISSING
        if default is dataclasses.MISSING or value != default:
            out[f.name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def parse_stage(command: str, stage_args: list[str], parse_args: Any
                ) -> tuple[DryRunReport, tuple[Any, Any, Any] | None]:
    """The dry-run report of a TRL stage (`--config RECIPE` + overrides) after parsing them the way the real run
    does (device checks deferred: a bf16/fp16 request is reported as `deferred` on a machine without CUDA), and the
    parsed (script, training, model) args, or None after the report names what failed."""
    recipe = stage_args[stage_args.index("--config") + 1] if "--config" in stage_args else None
    report = DryRunReport(command=command, recipe=recipe)
    if recipe is not None and not Path(recipe).is_file():
        report.add("recipe", "error", f"{recipe} does not exist")
        return report, None
    try:
        with deferred_device_checks():
            script, training, model = parse_args(list(stage_args))
    except (ValueError, FileNotFoundError) as exc:
        report.add("recipe", "error", str(exc))
        return report, None
    report.add("recipe", "ok", f"{recipe} + {len(stage_args) - 2} override argument(s) parsed by TrlParser")
    requested = getattr(training, "requested_precision", None) or {}
    training_fields = changed_fields(training)
    training_fields.update(requested)
    report.resolved = {"script": changed_fields(script), "training": training_fields, "model": changed_fields(model)}
    if requested:
        report.add("precision", "deferred", f"{'bf16' if requested['bf16'] else 'fp16'} needs a CUDA device: none "
                                            "on this machine; checked when the run starts on the GPU node")
    return report, (script, training, model)


def emit(report: DryRunReport) -> int:
    """Print the report on stdout and the failed checks on stderr, every secret hidden (protocol/redaction.py: a
    resolved recipe shows its URLs, headers and options); the exit code (0 ok, 2 some check failed)."""
    redaction = _redaction()

    print(redaction.redact_text(report.render()), file=report_out())
    for check in report.errors:
        print(redaction.redact_text(f"error: {check.what}: {check.detail}"), file=sys.stderr)
    return 2 if report.errors else 0
