"""Issue 14 through the running stack (Ray Serve, HAProxy, the devnode): a caller pays for what the
node did for them, and cannot choose what Serve does with its request."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from solders.keypair import Keypair

from tests.chain import airdrop, signed_transfer
from tests.integration.service import (
    Customer,
    RunningService,
    confirm_deposit,
    create_api_key,
    deposit_usdc,
    post_json,
)

pytestmark = pytest.mark.integration


def rpc(method: str, params: list[Any], id_: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def credits_left(headers: dict[str, str]) -> int:
    return int(headers["x-credits-remaining"])


def test_serve_control_headers_from_clients_are_ignored(service: RunningService, customer: Customer) -> None:
    """``x-request-timeout-seconds`` would let a client have Serve cancel its own request after the
    node did the work (and, before, get it refunded): the gateway strips Serve's control headers."""
    wallet = Keypair()  # a wallet of its own: the shared customer's SOL is other tests' too
    asyncio.run(airdrop(service.node_url, wallet.pubkey()))
    tx = asyncio.run(signed_transfer(service.node_url, wallet, Keypair().pubkey(), 1_000_000))
    batch = [
        rpc("getBalance", [str(wallet.pubkey())], 1),
        rpc("sendTransaction", [tx, {"encoding": "base64"}], 2),
    ]
    _, _, before = post_json(f"{service.url}/", rpc("getSlot", [], 0), customer.headers)
    controls = {"x-request-timeout-seconds": "0.001", "x-request-disconnect-disabled": "?1", "x-request-id": "mine"}
    status, answers, headers = post_json(f"{service.url}/", batch, {**customer.headers, **controls})
    assert status == 200, answers
    assert [("result" in a) for a in answers] == [True, True], answers
    assert headers["x-request-id"] != "mine"
    assert credits_left(before) - credits_left(headers) == 1 + 2


def test_a_failed_preflight_of_send_transaction_is_charged(service: RunningService, customer: Customer) -> None:
    """The node ran the simulation the caller asked for; ``simulateTransaction`` costs 5 for the same."""
    tx = asyncio.run(signed_transfer(service.node_url, customer.wallet, Keypair().pubkey(), 10**15))  # far too much
    _, _, before = post_json(f"{service.url}/", rpc("getSlot", [], 0), customer.headers)
    status, answer, headers = post_json(
        f"{service.url}/", rpc("sendTransaction", [tx, {"encoding": "base64"}], 1), customer.headers
    )
    assert status == 200 and answer["error"]["code"] == -32002, answer
    assert credits_left(before) - credits_left(headers) == 2


def test_confirm_deposit_shows_balances_only_to_the_credited_wallet(service: RunningService) -> None:
    depositor, stranger = Keypair(), Keypair()
    depositor_key = create_api_key(service.url, depositor)
    stranger_key = create_api_key(service.url, stranger)
    signature = deposit_usdc(service, depositor, 30_000)
    mine = confirm_deposit(service, signature, {"X-Api-Key": depositor_key})
    assert mine["credited_to_caller"] is True and mine["new_balance"] == 3_000

    theirs = confirm_deposit(service, signature, {"X-Api-Key": stranger_key})
    assert theirs["already_processed"] is True and theirs["credited_to_caller"] is False
    assert theirs["new_balance"] == 0  # the stranger's own balance, not the depositor's
    assert theirs["credited_pubkey"] == str(depositor.pubkey())  # public on chain anyway
