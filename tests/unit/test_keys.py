"""Service keypair files: created once, readable by solders, never half-written."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gateway.keys import ensure_service_keys, load_keypair, load_or_create_keypair


def test_created_once_and_reused(tmp_path: Path) -> None:
    first = ensure_service_keys(tmp_path)
    assert ensure_service_keys(tmp_path) == first
    path = tmp_path / "keys" / "deposit-wallet.json"
    assert len(json.loads(path.read_text())) == 64
    assert path.stat().st_mode & 0o777 == 0o600
    assert str(load_keypair(path).pubkey()) == first["keys/deposit-wallet.json"]


def test_concurrent_creators_agree(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "fee-payer.json"
    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: str(load_or_create_keypair(path).pubkey()), range(32)))
    assert len(keys) == 1
    assert list(path.parent.glob(".key-*")) == []
