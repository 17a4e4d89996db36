"""One rule for where the dev wallet and its API key are (gateway_client.dev_wallet), followed by
`gateway fund`, the examples and the notebook; and when `gateway fund` deposits."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.app.settings import Settings
from gateway.cli.fund import DEFAULT_USDC, to_deposit, usdc_base_units
from gateway_client import api_key_path, dev_api_key, dev_wallet_path, gateway_home, require_dev_api_key


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GATEWAY_HOME", "GATEWAY_WALLET", "GATEWAY_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_the_wallet_is_in_the_data_dir_unless_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert gateway_home() == Path(".gateway")
    assert dev_wallet_path() == Path(".gateway/wallets/dev-wallet.json")
    monkeypatch.setenv("GATEWAY_HOME", str(tmp_path))
    assert dev_wallet_path() == tmp_path / "wallets" / "dev-wallet.json"
    assert dev_wallet_path(tmp_path / "other") == tmp_path / "other" / "wallets" / "dev-wallet.json"  # fund's home
    monkeypatch.setenv("GATEWAY_WALLET", str(tmp_path / "mine.json"))
    assert dev_wallet_path() == dev_wallet_path(tmp_path / "other") == tmp_path / "mine.json"
    assert api_key_path(dev_wallet_path()) == tmp_path / "mine.api-key"


def test_gateway_fund_and_the_clients_agree_on_the_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GATEWAY_HOME", str(tmp_path))
    assert dev_wallet_path(Settings().resolved_home) == dev_wallet_path()


def test_the_key_from_the_environment_else_the_saved_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GATEWAY_HOME", str(tmp_path))
    assert dev_api_key() is None
    with pytest.raises(LookupError, match="gateway fund"):
        require_dev_api_key()
    saved = tmp_path / "wallets" / "dev-wallet.api-key"
    saved.parent.mkdir()
    saved.write_text("srpc_live_saved\n")
    assert dev_api_key() == require_dev_api_key() == "srpc_live_saved"
    monkeypatch.setenv("GATEWAY_API_KEY", "srpc_live_env")
    assert dev_api_key() == "srpc_live_env"


def test_gateway_fund_deposits_only_when_asked_or_without_credits() -> None:
    assert to_deposit(None, 0) == usdc_base_units(DEFAULT_USDC)  # a new wallet, or one that spent everything
    assert to_deposit(None, 1) is None  # run again only for the key: nothing deposited
    assert to_deposit(20_000, 5_000) == 20_000  # --usdc 0.02
