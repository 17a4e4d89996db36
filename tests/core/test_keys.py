"""Service keypair files: created once, readable by solders, never half-written."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from solders.keypair import Keypair

from gateway.base.config import ConfigError
from gateway.base.keys import FEE_PAYER, ensure_service_keys, load_keypair, load_or_create_keypair, service_keys


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


def test_configured_addresses_are_served_and_no_key_is_created(tmp_path: Path) -> None:
    deposit, fee_payer = Keypair().pubkey(), Keypair().pubkey()
    keys = service_keys(tmp_path, str(deposit), str(fee_payer), fee_payer_needed=True)
    assert (keys.deposit, keys.fee_payer, keys.signer) == (deposit, fee_payer, None)  # no file here: no signer
    assert keys.view() == {
        "deposit_address": str(deposit),
        "fee_payer_address": str(fee_payer),
        "fee_payer_key_here": False,
        "mismatch": None,
    }
    assert not (tmp_path / "keys").exists()


@pytest.mark.parametrize(
    ("deposit", "fee_payer", "setting"),
    [(None, "x", "GATEWAY_DEPOSIT_ADDRESS"), ("x", None, "GATEWAY_FEE_PAYER_ADDRESS"), (None, None, "DEPOSIT")],
)
def test_a_missing_address_stops_start_up_naming_the_setting(
    tmp_path: Path, deposit: str | None, fee_payer: str | None, setting: str
) -> None:
    given = {"x": str(Keypair().pubkey()), None: None}
    with pytest.raises(ConfigError, match=setting):
        service_keys(tmp_path, given[deposit], given[fee_payer], fee_payer_needed=True)
    assert not (tmp_path / "keys").exists()


def test_without_x402_settlement_no_fee_payer_is_needed(tmp_path: Path) -> None:
    keys = service_keys(tmp_path, str(Keypair().pubkey()), None, fee_payer_needed=False)
    assert keys.fee_payer is None and keys.signer is None
    assert not (tmp_path / "keys").exists()


def test_a_fee_payer_file_holding_another_key_stops_start_up_naming_setting_and_file(tmp_path: Path) -> None:
    ensure_service_keys(tmp_path)
    deposit = str(Keypair().pubkey())
    with pytest.raises(ConfigError, match="GATEWAY_FEE_PAYER_ADDRESS") as refused:
        service_keys(tmp_path, deposit, str(Keypair().pubkey()), fee_payer_needed=True)
    assert str(tmp_path / FEE_PAYER) in str(refused.value)
    (tmp_path / FEE_PAYER).write_text("not a key")
    with pytest.raises(ConfigError, match="cannot be read"):
        service_keys(tmp_path, deposit, str(Keypair().pubkey()), fee_payer_needed=True)


def test_the_fee_payer_file_holding_the_configured_key_signs(tmp_path: Path) -> None:
    ensure_service_keys(tmp_path)
    own = load_keypair(tmp_path / FEE_PAYER)
    keys = service_keys(tmp_path, str(Keypair().pubkey()), str(own.pubkey()), fee_payer_needed=True)
    assert keys.signer == own and keys.view()["fee_payer_key_here"] is True
