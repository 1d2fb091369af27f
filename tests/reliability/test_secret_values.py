"""Secrets are hidden by value, wherever they sit (issue 55, item 2): one distinct key planted in each of the
credential variable (`api_key_env`), a URL query string, a URL's userinfo, a header of a harmless name (`Cookie`,
through `options.default_headers`), an option (`environment.options`), vLLM's extra arguments (`serve.extra_args:
[--api-key, X]`) and a server's error body (a fault-injection stand-in on 127.0.0.1 that answers 500 quoting what it
was sent and the node's HF_TOKEN). `collect --dry-run`, `eval --dry-run`, a short collection and an eval run as a
user runs them (subprocesses); every printed line and every file under the output folders is searched for each key,
plain, base64 (standard and URL-safe) and URL-encoded: none is found. The keys refused before the run (query string,
userinfo) are refused with a message that names the field and not the key.

    .venv/bin/pytest tests/reliability/test_secret_values.py -q
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import yaml
from typer.testing import CliRunner

from omnidecision.tasks.synth import write_suite
from tests.stub_chat import ChatStubHandler
from tests.tools.local_pages import serving

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from omnidecision.cli import app; app()"]
# one key per place, none shaped like a provider key (sk-, hf_, ...): found by value, not by look; `/` and `+` make
# the URL-encoded and base64 forms differ from the key itself
KEYS = {where: f"{where[:3]}{i}/{secrets.token_urlsafe(15)}+q" for i, where in enumerate(
    ["variable", "query", "userinfo", "header", "option", "vllm", "body"])}
KEY_ENV = "OD_PLANTED_PLANNER_KEY"


def forms(key: str) -> set[str]:
    """The key and its base64 (standard, URL-safe, padded or not) and URL-encoded spellings."""
    raw = key.encode()
    b64 = {base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
    return {key, quote(key, safe=""), quote_plus(key), *b64, *(b.rstrip("=") for b in b64)}


def leaks(text: str | bytes, keys: dict[str, str] = KEYS) -> list[str]:
    """The planted keys found in `text`, in any of their forms."""
    data = text.encode("utf-8", errors="replace") if isinstance(text, str) else text
    return [f"{where} ({form})" for where, key in keys.items() for form in forms(key) if form.encode() in data]


def files_leaking(root: Path, skip: set[Path]) -> dict[str, list[str]]:
    return {str(p): found for p in sorted(root.rglob("*"))
            if p.is_file() and p not in skip and (found := leaks(p.read_bytes()))}


class EchoesWhatItGets(ChatStubHandler):
    """A vLLM-like endpoint whose every chat request fails with HTTP 500, its error body quoting the credentials it
    was sent (the bearer key plain and base64, the Cookie URL-encoded) and the node's HF_TOKEN."""

    received: list[dict[str, str]] = []

    def do_GET(self) -> None:
        self._send(200, json.dumps({"object": "list", "data": [{"id": "planner", "object": "model",
                                                                 "owned_by": "vllm"}]}).encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        bearer = self.headers.get("Authorization", "").removeprefix("Bearer ")
        cookie = self.headers.get("Cookie", "")
        EchoesWhatItGets.received.append({"bearer": bearer, "cookie": cookie})
        message = (f"upstream refused key {bearer} ({base64.b64encode(bearer.encode()).decode()}) cookie "
                   f"{quote(cookie, safe='')} node token {KEYS['body']}")
        self._send(500, json.dumps({"error": {"message": message, "type": "server_error"}}).encode())


@pytest.fixture(scope="module")
def endpoint():
    with serving(EchoesWhatItGets) as port:
        yield f"http://127.0.0.1:{port}/v1"


def recipe(tasks: Path, out: Path, base_url: str) -> dict:
    planner = {"kind": "openai", "base_url": base_url, "model": "planner", "api_key_env": KEY_ENV, "max_retries": 0,
               "endpoint_kind": "vllm", "options": {"default_headers": {"Cookie": f"session={KEYS['header']}"}}}
    return {"tasks": {"path": str(tasks), "format": "synthetic", "limit": 3},
            "backends": {"default": {"kind": "teacher"}, "planner": planner},
            "agent": {"mode": "ledger", "step_budget": 4}, "samples": 1, "concurrency": 3, "out": str(out),
            "progress": False, "breaker": {"enabled": False},
            "environment": {"options": {"search_api_token": KEYS["option"]}}}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tasks")
    write_suite(3, 1, out)
    return out


@pytest.mark.long  # an end-to-end repeat of a stage the fast suite covers: `make long-test` (CI runs it)
def test_no_planted_key_is_printed_or_written(tmp_path: Path, tasks: Path, endpoint: str) -> None:
    env = {**os.environ, KEY_ENV: KEYS["variable"], "HF_TOKEN": KEYS["body"], "PYTHONPATH": str(ROOT),
           "HF_HUB_OFFLINE": "1"}
    printed: list[tuple[str, str]] = []

    def run(name: str, *args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        printed.append((name, proc.stdout + proc.stderr))
        return proc

    collect_yaml, eval_yaml = tmp_path / "collect.yaml", tmp_path / "eval.yaml"
    collect_yaml.write_text(yaml.safe_dump(recipe(tasks, tmp_path / "collect", endpoint)), "utf-8")
    served = {**recipe(tasks, tmp_path / "eval", endpoint), "plots": False,
              "serve": {"model": str(tmp_path / "no-such-model"), "roles": ["critic"],
                        "extra_args": ["--api-key", KEYS["vllm"], f"--api-key={KEYS['vllm']}"]}}
    eval_yaml.write_text(yaml.safe_dump(served), "utf-8")

    dry = run("collect --dry-run", "collect", "--config", str(collect_yaml), "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    resolved = json.loads(dry.stdout)["resolved"]  # the dry run shows the fields, their values hidden
    assert resolved["backends"]["planner"]["options"]["default_headers"]["Cookie"] == "***"
    assert resolved["environment"]["options"]["search_api_token"] == "***"
    eval_dry = run("eval --dry-run", "eval", "--config", str(eval_yaml), "--dry-run")
    report = json.loads(eval_dry.stdout)
    assert report["extra"]["vllm_command"][-3:] == ["--api-key", "***", "--api-key=***"], report["extra"]
    for _ in range(2):  # the second start resumes: the manifest it wrote (keys hidden) is the same experiment
        collected = run("collect", "collect", "--config", str(collect_yaml), "--verbose")
        assert collected.returncode == 0, collected.stdout + collected.stderr
    evaluated = run("eval", "eval", "--config", str(eval_yaml), "--serve", "null")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr

    # the keys were in play: sent to the endpoint, echoed back in its error body, which the records keep (redacted)
    assert {"bearer": KEYS["variable"], "cookie": f"session={KEYS['header']}"} in EchoesWhatItGets.received
    records = [json.loads(line) for f in (tmp_path / "collect").glob("trajectories*.jsonl")
               for line in f.read_text("utf-8").splitlines()]
    assert len(records) == 3 and all(r["outcome"] == "error" and "HTTP 500" in r["error"] for r in records)
    assert all(r["error"].count("***") >= 4 for r in records), records[0]["error"]
    manifest = json.loads((tmp_path / "collect" / "manifest.json").read_text("utf-8"))
    assert manifest["backends"]["planner"]["options"]["default_headers"]["Cookie"] == "***"
    assert manifest["backends"]["planner"]["api_key_env"] == KEY_ENV  # the variable's name stays readable
    assert (tmp_path / "eval" / "report.json").is_file() and (tmp_path / "eval" / "recipe.yaml").is_file()

    assert {name: found for name, text in printed if (found := leaks(text))} == {}
    assert files_leaking(tmp_path, skip={collect_yaml, eval_yaml}) == {}


@pytest.mark.parametrize("where", ["query", "userinfo", "fragment"])
def test_a_key_in_a_url_is_refused_without_echo(tmp_path: Path, tasks: Path, endpoint: str, where: str,
                                                caplog) -> None:
    from omnidecision.cli import app

    key = KEYS["userinfo" if where == "userinfo" else "query"]
    host = endpoint.removeprefix("http://")
    base_url = {"query": f"{endpoint}?api_key={quote(key, safe='')}",
                "userinfo": f"http://planner:{quote(key, safe='')}@{host}",
                "fragment": f"{endpoint}#access_token={quote(key, safe='')}"}[where]
    caplog.set_level(logging.DEBUG)
    config = tmp_path / "recipe.yaml"
    out = tmp_path / "out"
    config.write_text(yaml.safe_dump({**recipe(tasks, out, base_url), "plots": False}), "utf-8")
    for command in ("collect", "eval"):
        for extra in (["--dry-run"], []):
            res = CliRunner().invoke(app, [command, "--config", str(config), *extra])
            assert res.exit_code == 2, (command, extra, res.output)
            assert "backends.planner.base_url" in res.output, res.output
            assert ("query string" if where == "query" else "fragment" if where == "fragment" else "user:password"
                    ) in res.output
            # not even hidden: the refusal never held the key (a hidden one would show as ***)
            assert leaks(res.output) == [] and "***" not in res.output and leaks(caplog.text) == []
    assert not out.exists() or files_leaking(out, skip=set()) == {}


def test_the_vllm_command_is_logged_and_its_failure_reported_without_the_key(tmp_path: Path, caplog) -> None:
    """A server that fails at start with its arguments in its log (as vLLM logs them): the log line that starts it
    and the error with the log's tail show no key."""
    from omnidecision.serving.vllm_server import VLLMServer, VLLMServerError

    fake = tmp_path / "python"  # stands in for the interpreter that would run vLLM: prints its arguments, fails
    fake.write_text('#!/bin/sh\necho "non-default args: $*"\nexit 1\n')
    fake.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    key = KEYS["vllm"]
    server = VLLMServer(model, extra_args=[f"--api-key={key}"], python=str(fake), fresh_cache=True, cpu=True,
                        startup_timeout_s=30, warmup=False)
    caplog.set_level(logging.INFO)
    with pytest.raises(VLLMServerError) as err:
        server.start()
    shutil.rmtree(server.workdir, ignore_errors=True)  # kept by a failed start, for its log
    assert "non-default args" in str(err.value) and "--api-key=***" in str(err.value)
    assert "--api-key=***" in caplog.text
    assert leaks(str(err.value)) == [] and leaks(caplog.text) == []
    assert f"--api-key={key}" in server.command()  # the server itself still gets it


def test_the_endpoint_check_joins_the_path_and_keeps_a_query_a_query(endpoint: str) -> None:
    """The live pre-flight and the breaker's probe ask `{base_url}/models` by joining the URL's path: a query string
    (here a harmless one) stays after the path, never gets `/models` appended to it."""
    import asyncio

    from omnidecision.rollout.breaker import probe
    from omnidecision.rollout.live import probe_openai

    seen: list[str] = []

    class Paths(ChatStubHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self._send(200, b'{"object": "list", "data": []}')

    with serving(Paths) as port:
        base = f"http://127.0.0.1:{port}/v1/?api-version=2024-06-01"
        assert probe_openai(base, "NO_SUCH_KEY_VARIABLE", "backends.planner", 5.0) is None
        asyncio.run(probe(base, 5.0))
    assert seen == ["/v1/models?api-version=2024-06-01"] * 2


def test_the_redactor_finds_keys_by_value_and_hides_their_encodings(monkeypatch) -> None:
    from omnidecision.protocol.redaction import credentials_in, redact_args, redact_text, register, scan_environment

    key = "Zq81/" + secrets.token_urlsafe(12)
    basic = base64.b64encode(f"planner:{key}".encode()).decode()  # the key inside a longer base64 string
    register([key])
    for text in (key, quote(key, safe=""), base64.urlsafe_b64encode(key.encode()).decode(), f"Basic {basic}"):
        assert leaks(redact_text(f"[{text}]"), {"key": key}) == [] and "***" in redact_text(text), text
    # found by where it sits, whatever it looks like
    found = credentials_in({"options": {"default_headers": {"X-Session": "a1b2c3d4e5", "Accept": "text/plain"}},
                            "url": "https://h/x?sig=s1g2n3a4&page=12345678", "extra_args": ["--hf-token", "h1234567"],
                            "environment": {"options": {"auth_cookie": "c9c8c7c6"}}, "model": "text/plain-model"})
    assert found == {"a1b2c3d4e5", "s1g2n3a4", "h1234567", "c9c8c7c6"}
    assert redact_args(["--return-tokens-as-token-ids", "--port", "8000"]) == [
        "--return-tokens-as-token-ids", "--port", "8000"]  # a flag without a value hides nothing
    # a variable named like a key: its value hidden when it looks like one, not when it is a word or a path
    monkeypatch.setenv("OD_TEST_SESSION_TOKEN", "t0k3n-VALUE-42")
    monkeypatch.setenv("OD_TEST_MODE_TOKEN", "question")
    scan_environment()
    assert redact_text("t0k3n-VALUE-42 question") == "*** question"


def test_logs_and_printed_lines_are_redacted_once_installed(capsys) -> None:
    from omnidecision.protocol.redaction import install, register

    key = "L0g/" + secrets.token_urlsafe(12)
    register([key])
    install()
    try:
        log = logging.getLogger("omnidecision.test_secret_values")
        record = log.makeRecord(log.name, logging.ERROR, __file__, 1, "failed with %s", (key,), None)
        assert record.getMessage() == "failed with ***"
        try:
            raise RuntimeError(f"server said {key}")
        except RuntimeError:
            record = log.makeRecord(log.name, logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
        assert key not in logging.Formatter().format(record) and "server said ***" in logging.Formatter().format(
            record)
        print(f"printed {key}")
        sys.stderr.write(f"written {base64.b64encode(key.encode()).decode()}\n")
        sys.stdout.buffer.write(f"bytes {key}\n".encode())
        sys.stdout.flush()
    finally:
        from omnidecision.protocol.redaction import RedactingStream

        for name in ("stdout", "stderr"):  # leave pytest's own streams as they were
            stream = getattr(sys, name)
            if isinstance(stream, RedactingStream):
                setattr(sys, name, stream._inner)
    out, err = capsys.readouterr()
    assert "printed ***" in out and "written ***" in err and key not in out + err
