"""The live environment (`environment.kind: live`): real tools for real benchmark files, and the pre-flight check
that names everything missing before a collection starts.

Services: "media" = `backends.perception.PerceptionRouter` (one OpenAI-compatible multimodal endpoint per
perception tool, or a "default"), "search" = `tools.web_live.LiveWeb` (a search API + the page reader), shared by
every run; "live": True labels the runs. Tasks get the environment's tool set and block list, and the durations
of their media files (PyAV), so the digest's R0 shows them.

`live_problems(recipe, tasks)` lists, in words, every endpoint that is not configured (or, with `probe=True`, does
not answer), every API key variable that is unset, and every media file a task names that is not under the media
root. `omnidecision collect --config configs/collect/omnigaia-live.yaml --dry-run` prints them; a collection refuses
to start while any is left, instead of failing mid-run.

    omnidecision collect --config configs/collect/omnigaia-live.yaml --dry-run
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import httpx

from omnidecision.backends.perception import PerceptionRouter
from omnidecision.ledger.schema import PERCEPTION_TOOLS, WEB_TOOLS
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.secrets import endpoint_url, redact
from omnidecision.rollout.recipe import Environment, RolloutRecipe
from omnidecision.tasks.schema import Task
from omnidecision.tools.media import video_duration
from omnidecision.tools.web_live import LiveWeb

logger = logging.getLogger(__name__)

# What each perception tool needs from its endpoint when the task's asset is of a kind (what the tool sends).
NEEDS_INPUT = {"audio_scouting": "audio", "clip_grounding": "image", "frame_confirmation": "image"}


def apply_environment(env: Environment, tasks: list[Task]) -> None:
    """Give every task the environment's tool set (unless it has its own) and block list, in place."""
    for task in tasks:
        if env.tools is not None and task.tools is None:
            task.tools = list(env.tools)
        if env.blocked_domains:
            task.blocked_domains = list(dict.fromkeys([*task.blocked_domains, *env.blocked_domains]))


def fill_durations(tasks: list[Task]) -> None:
    """Asset durations from the media files (PyAV) where the task file gave none: R0 shows them."""
    for task in tasks:
        for asset in task.assets:
            if asset.duration is not None or asset.type == "image":
                continue
            path = task.resolve(asset.path)
            if path is not None and path.is_file():
                try:
                    asset.duration = video_duration(path)
                except Exception as exc:  # a file PyAV cannot open is reported by the tools, not here
                    logger.warning("%s: no duration (%s: %s)", path, type(exc).__name__, exc)


def _allowed(task: Task, tool: str) -> bool:
    return task.tools is None or tool in task.tools


def _missing_media(tasks: list[Task], media_root: str | None) -> list[str]:
    out = []
    for task in tasks:
        raw = list(task.meta.get("missing_media") or [])
        for asset in task.assets:
            path = task.resolve(asset.path)
            if path is not None and path.is_file():
                continue
            if raw:
                continue  # the loader named the files it did not find (below)
            out.append(f"task {task.id}: no media file for asset {asset.id} ({asset.type})"
                       + (f" under {media_root}" if media_root else ""))
        out += [f"task {task.id}: media file {name} not found under {media_root}" for name in raw]
    return out


def probe_openai(base_url: str, key_env: str, what: str, timeout_s: float) -> str | None:
    """None when `GET {base_url}/models` answers 200, else why not."""
    key = os.environ.get(key_env) or "EMPTY"
    url = endpoint_url(base_url, "models")  # joined on the path: a query string stays a query string
    try:
        r = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return redact(f"{what}: {url} does not answer ({type(exc).__name__}: {exc})", [key])
    if r.status_code != 200:
        return f"{what}: {url} answered HTTP {r.status_code}"
    return None


def _backend_problems(name: str, spec: BackendSpec, probe: bool, timeout_s: float) -> list[str]:
    if spec.kind != "openai":
        return []
    if not spec.base_url:
        return [f"{name}: base_url is not set (an OpenAI-compatible endpoint)"]
    if not spec.model:
        return [f"{name}: model is not set"]
    if probe:
        why = probe_openai(spec.base_url, spec.api_key_env, name, timeout_s)
        return [why] if why else []
    return []


def live_problems(recipe: RolloutRecipe, tasks: list[Task], probe: bool = False, timeout_s: float = 3.0) -> list[str]:
    """Everything missing before `recipe` can collect `tasks` (an empty list: ready). See the module docstring."""
    env = recipe.environment
    problems: list[str] = []
    for role, spec in sorted(recipe.backends.items()):
        problems += _backend_problems(f"backends.{role}", spec, probe, timeout_s)
    if recipe.judge.enabled and recipe.judge.llm is not None:
        problems += _backend_problems("judge.llm", recipe.judge.llm, probe, timeout_s)
    if env.kind != "live":
        return problems
    if not env.media_root:
        problems.append("environment.media_root: not set (the folder of the downloaded media files)")
    elif not Path(env.media_root).is_dir():
        problems.append(f"environment.media_root: {env.media_root} is not a folder")
    # perception: every tool some task allows and that looks at media needs an endpoint that takes its input
    kinds = {a.type for t in tasks for a in t.assets}
    for tool in PERCEPTION_TOOLS:
        if tool == "subtitle_grounding" or not any(_allowed(t, tool) for t in tasks):
            continue  # subtitles are read from their .srt/.vtt files
        spec = env.perception.get(tool) or env.perception.get("default")
        where = f"environment.perception.{tool if tool in env.perception else 'default'}"
        if spec is None:
            problems.append(f"environment.perception: no endpoint for {tool} (set perception.{tool} or "
                            "perception.default)")
            continue
        problems += [p.replace(f"perception.{tool}", where) for p in spec.problems(tool)]
        need = NEEDS_INPUT.get(tool)
        if need == "audio" and kinds & {"audio", "video"} and "audio" not in spec.inputs:
            problems.append(f"{where}: {tool} sends audio but inputs is {spec.inputs} (add audio, or serve an "
                            "audio-capable model such as Qwen2.5-Omni)")
        if need == "image" and kinds & {"video", "image"} and not {"image", "video"} & set(spec.inputs):
            problems.append(f"{where}: {tool} sends frames but inputs is {spec.inputs}")
        if probe and spec.base_url and spec.model:
            why = probe_openai(spec.base_url, spec.api_key_env, where, timeout_s)
            problems += [why] if why else []
    # web: only when some task may search
    if any(_allowed(t, tool) for t in tasks for tool in WEB_TOOLS):
        if env.search is None:
            problems.append("environment.search: not set, and tasks allow web_search (set a search API, or "
                            "environment.tools without the web tools)")
        else:
            problems += [f"environment.{p}" for p in env.search.problems()]
            if probe and env.search.url():
                problems += _probe_search(env, timeout_s)
    problems += _missing_media(tasks, env.media_root)
    return list(dict.fromkeys(problems))  # one endpoint shared by several tools is named once


def _probe_search(env: Environment, timeout_s: float) -> list[str]:
    url = env.search.url() if env.search is not None else None
    if url is None or env.search is None or env.search.kind != "searxng":
        return []  # keyed APIs are not called in a dry run: that spends the key's quota
    try:
        r = httpx.get(endpoint_url(url, "search"), params={"q": "test", "format": "json"}, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return [f"environment.search: {url} does not answer ({type(exc).__name__}: {exc})"]
    if r.status_code != 200:
        hint = " (is `json` listed under search.formats in its settings.yml?)" if r.status_code == 403 else ""
        return [f"environment.search: {url}/search?format=json answered HTTP {r.status_code}{hint}"]
    return []


def build_live_services(env: Environment) -> dict[str, Any]:
    """The services every run of a live collection shares (see the module docstring)."""
    services: dict[str, Any] = {"live": True}
    if env.perception:
        services["media"] = PerceptionRouter(env.perception, env.media_root)
    services["search"] = LiveWeb.from_specs(env.search, env.pages, env.blocked_domains)
    return services
