"""The x402 SDK's own client (``x402==2.25.0``: ``x402ClientSync``, the SVM exact scheme, its requests
session) against the running stack (``gateway up``): it pays in one retry with ``PAYMENT-SIGNATURE``, the
call is served, and the payment is the deposit confirm-deposit would credit, credited once.

Its Solana client needs solana-py's old synchronous client: :mod:`tests.x402.sdk_shim`."""

from __future__ import annotations

import asyncio

import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from x402 import x402ClientSync
from x402.http.clients.requests import x402_requests
from x402.http.utils import decode_payment_response_header

from tests.chain import USDC_MINT, airdrop, mint_usdc, read_keypair
from tests.integration.service import RunningService, confirm_deposit, create_api_key
from tests.x402 import sdk_shim

DEVNET = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"  # what the devnode's terms name


def fund(service: RunningService, wallet: Keypair, base_units: int) -> None:
    """SOL and test USDC for ``wallet`` on the stack's devnode (nothing deposited)."""

    async def run() -> None:
        authority = read_keypair(service.home / "devnode" / "usdc-mint-authority.json")
        await airdrop(service.node_url, wallet.pubkey())
        await airdrop(service.node_url, authority.pubkey())
        async with AsyncClient(service.node_url) as node:
            await mint_usdc(node, authority, wallet, wallet.pubkey(), base_units)

    asyncio.run(run())


def test_the_sdks_client_pays_in_one_retry(service: RunningService, monkeypatch: pytest.MonkeyPatch) -> None:
    sdk_shim.install(monkeypatch)
    from x402.mechanisms.svm import KeypairSigner
    from x402.mechanisms.svm.exact import register_exact_svm_client

    wallet = Keypair()
    fund(service, wallet, 100_000)
    client = x402ClientSync()
    register_exact_svm_client(client, KeypairSigner(wallet), rpc_url=service.node_url)
    client.set_spend_controls({"allowed_assets": [{"network": DEVNET, "asset": str(USDC_MINT)}]})  # test USDC
    body = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
    with x402_requests(client) as session:
        answer = session.post(service.url + "/", data=body, headers={"Content-Type": "application/json"}, timeout=90)

    assert answer.status_code == 200, answer.text
    assert isinstance(answer.json()["result"], int)
    settled = decode_payment_response_header(answer.headers["PAYMENT-RESPONSE"])
    assert settled.success and settled.payer == str(wallet.pubkey()) and settled.network == DEVNET

    key = create_api_key(service.url, wallet)  # the payer's account exists: it was credited
    confirmed = confirm_deposit(service, settled.transaction, {"X-Api-Key": key})
    assert confirmed["already_processed"] is True and confirmed["credits_added"] == 0
