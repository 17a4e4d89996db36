"""Secrets are private files: what ``gateway up`` checks and fixes at start (gateway/runtime/private_files.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gateway.runtime.private_files import ray_token_path, secure_home, secure_ray_token


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_key_readable_by_others_is_made_private_and_reported(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o755)
    keys.chmod(0o755)
    key = keys / "fee-payer.json"
    key.write_text("[]")
    key.chmod(0o644)
    aof = tmp_path / "redis" / "appendonlydir" / "appendonly.aof.1.incr.aof"
    aof.parent.mkdir(parents=True)
    aof.write_text("")
    aof.chmod(0o644)
    fixed = secure_home(tmp_path)
    assert (mode(keys), mode(key), mode(aof), mode(aof.parent)) == (0o700, 0o600, 0o600, 0o700)
    assert any(str(key) in line and "-rw-r--r--" in line for line in fixed), fixed
    assert secure_home(tmp_path) == []  # private now: nothing more to say


def test_rays_token_is_created_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "ray" / "auth_token"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert ray_token_path() == token
    assert secure_ray_token(create=True) == []
    assert mode(token) == 0o600 and len(token.read_text()) >= 32
    token.chmod(0o644)  # as Ray 2.60 writes it
    assert [str(token) in line for line in secure_ray_token(create=True)] == [True]
    assert mode(token) == 0o600
