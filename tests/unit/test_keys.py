"""Service keypair files: created once, readable by solders, never half-written."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from solders.keypair import Keypair

from gateway.keys import (
    DEPOSIT_WALLET,
    FEE_PAYER,
    ensure_service_keys,
    load_keypair,
    load_or_create_keypair,
    service_keypair,
    service_pubkey,
)


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


def test_a_configured_address_is_never_replaced_by_a_new_key(tmp_path: Path) -> None:
    wallet = str(Keypair().pubkey())
    assert str(service_pubkey(wallet, tmp_path, DEPOSIT_WALLET)) == wallet
    assert service_keypair(wallet, tmp_path, FEE_PAYER) is None  # no file on this machine: nothing to sign with
    assert not (tmp_path / "keys").exists()  # and nothing created


def test_a_key_file_that_is_not_the_configured_address_is_refused(tmp_path: Path) -> None:
    ensure_service_keys(tmp_path)
    with pytest.raises(ValueError, match="not the configured"):
        service_keypair(str(Keypair().pubkey()), tmp_path, FEE_PAYER)
    own = load_keypair(tmp_path / FEE_PAYER)
    assert service_keypair(str(own.pubkey()), tmp_path, FEE_PAYER) == own


def test_without_an_address_the_data_dirs_key_is_read_or_created(tmp_path: Path) -> None:
    created = service_pubkey(None, tmp_path, DEPOSIT_WALLET)
    assert created == load_keypair(tmp_path / DEPOSIT_WALLET).pubkey() == service_pubkey(None, tmp_path, DEPOSIT_WALLET)
