"""The wandb fallback respects a login: with `report_to: wandb`, a run goes offline only when wandb would find no
credentials (no WANDB_API_KEY, no netrc entry for its host, as `wandb login` writes), and says so once. Each test
runs with a temporary HOME / NETRC; the installed wandb's own netrc reader is asked too, so the two agree.

    .venv/bin/pytest tests/cluster/test_wandb_login.py
"""

from __future__ import annotations

import logging
import os

import pytest

from omnidecision import preflight

KEY = "a" * 40  # the shape of a wandb API key


@pytest.fixture
def home(tmp_path, monkeypatch):
    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_BASE_URL", "NETRC"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(preflight, "_WANDB_OFFLINE_LOGGED", False)
    return tmp_path


def _wandb_sees(host: str = "https://api.wandb.ai") -> bool:
    wbnetrc = pytest.importorskip("wandb.sdk.lib.wbauth.wbnetrc")
    return wbnetrc.read_netrc_auth(host=host) is not None


def test_a_netrc_login_keeps_wandb_online(home):
    (home / ".netrc").write_text(f"machine api.wandb.ai\n  login user\n  password {KEY}\n")
    (home / ".netrc").chmod(0o600)
    assert _wandb_sees()
    assert preflight.wandb_offline_fallback(["wandb"]) is False
    assert "WANDB_MODE" not in os.environ
    check = preflight.check_tracking(["wandb"])
    assert check.status == "ok" and "machine api.wandb.ai" in check.detail


def test_netrc_variable_and_server_host(home, monkeypatch):
    other = home / "elsewhere.netrc"
    other.write_text(f"machine wandb.example.org login user password {KEY}\n")
    other.chmod(0o600)
    monkeypatch.setenv("NETRC", str(other))
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    assert _wandb_sees("https://wandb.example.org")
    assert preflight.wandb_offline_fallback("wandb") is False
    monkeypatch.delenv("WANDB_BASE_URL")  # the entry is for another server than api.wandb.ai: no login there
    assert not _wandb_sees()
    assert preflight.wandb_login() is None


def test_no_login_goes_offline_once(home, caplog):
    (home / ".netrc").write_text(f"machine example.org login user password {KEY}\n")
    (home / ".netrc").chmod(0o600)
    with caplog.at_level(logging.WARNING, logger="omnidecision.preflight"):
        assert preflight.wandb_offline_fallback(["wandb"]) is True
        del os.environ["WANDB_MODE"]
        assert preflight.wandb_offline_fallback(["wandb"]) is True
    assert os.environ["WANDB_MODE"] == "offline"
    assert sum("no wandb login" in r.message for r in caplog.records) == 1
    assert preflight.check_tracking(["wandb"]).status == "ok"  # WANDB_MODE is set now: the run's own choice


def test_an_environment_key_is_a_login(home, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    assert preflight.wandb_login() == "WANDB_API_KEY"
    assert preflight.wandb_offline_fallback(["tensorboard", "wandb"]) is False
    assert preflight.wandb_offline_fallback(["none"]) is False
