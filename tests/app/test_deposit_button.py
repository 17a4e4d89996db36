"""The deposit button (docs/dashboard.md): a FRESH wallet (no SOL, no credits, no account; only test USDC minted
to it on the devnode) signs in, types an amount and presses the button; the test wallet signs the transfer
(``solana:signTransaction``, in Python), the gateway settles it sponsored (``POST /x402/settle``: its fee payer
pays the fee) and the page follows it to ``confirm-deposit``. The balance rises on the page, the ledger shows the
deposit once (read from Python through the API), and the wallet still has no SOL."""

from __future__ import annotations

import re

import aiohttp
import pytest
from playwright.async_api import expect
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from devnode.node import Devnode
from tests.app.conftest import AccountPage
from tests.app.test_page import WAIT_MS, sign_in
from tests.chain import USDC_MINT, airdrop, mint_usdc, usdc_account
from tests.support import RunningGateway

pytestmark = pytest.mark.slow
HELD = 300_000  # 0.3 USDC minted to the wallet
PAID = 250_000  # 0.25 USDC deposited: 25,000 credits at the default rate
FINALIZE_MS = 90_000  # settle, then confirm-deposit polled until the transfer is finalized


async def fresh_wallet_with_usdc(devnode: Devnode, gateway: RunningGateway, owner: Pubkey) -> None:
    """Test USDC for ``owner`` (its token account paid by another wallet: ``owner`` gets no SOL), and SOL for the
    gateway's fee payer, as ``gateway up`` gives it on the devnode."""
    funder = Keypair()
    await airdrop(devnode.rpc_url, funder.pubkey())
    await airdrop(devnode.rpc_url, Pubkey.from_string(gateway.app.settings.fee_payer_address), 1_000_000_000)
    async with AsyncClient(devnode.rpc_url) as node:
        await mint_usdc(node, devnode.usdc_mint_authority, funder, owner, HELD)
        assert (await node.get_balance(owner)).value == 0


async def test_a_fresh_wallet_deposits_with_the_button_and_the_gateway_pays_the_fee(
    account_page: AccountPage, page_gateway: RunningGateway, devnode: Devnode, http: aiohttp.ClientSession
) -> None:
    app, page = account_page, account_page.page
    owner = app.wallet.keypair.pubkey()
    await fresh_wallet_with_usdc(devnode, page_gateway, owner)
    await sign_in(app)
    await expect(page.locator("#balance")).to_contain_text("no account yet", timeout=WAIT_MS)

    # More than it holds: the network refuses at preflight, nothing moves, the page says why.
    pay = page.get_by_role("button", name="Pay with Test Wallet")
    await page.locator("#deposit-amount").fill("5")
    await pay.click()
    progress = page.locator("#deposit-progress")
    await expect(progress).to_have_text(
        "Not sent: this wallet does not hold 5 USDC (the network refused the transfer, nothing moved).", timeout=WAIT_MS
    )

    await page.locator("#deposit-amount").fill("0.25")
    await pay.click()
    # Credited by the page's confirm-deposit, or by the deposit watcher first: the page says which.
    credited = re.compile(r"^Credited(: 25,000 credits added| \(the deposit watcher had credited it already\))\.$")
    await expect(progress).to_have_text(credited, timeout=FINALIZE_MS)
    await expect(page.locator("#balance-value")).to_have_text(re.compile(r"^25,000"), timeout=WAIT_MS)

    # What the wallet signed: one TransferChecked whose fee payer is the gateway's (twice: the refused one too).
    fee_payer = Pubkey.from_string(page_gateway.app.settings.fee_payer_address)
    assert len(app.wallet.transactions) == 2
    signed = app.wallet.transactions[-1]
    assert signed.message.account_keys[0] == fee_payer
    assert len(signed.message.instructions) == 1 and len(signed.signatures) == 2
    assert signed.signatures[0] == Signature.default(), "the fee payer's slot is left for the gateway"

    # The ledger, through the API with the page's session: the deposit once, under the settled transfer.
    token = await app.session_token()
    async with http.get(f"{page_gateway.url}/account/ledger", headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.status == 200, await resp.text()
        entries = (await resp.json())["entries"]
    deposits = [e for e in entries if e["type"] == "deposit"]
    assert len(deposits) == 1, entries
    assert deposits[0]["amount"] == 25_000 and deposits[0]["balance"] == 25_000
    async with AsyncClient(devnode.rpc_url) as node:
        landed = await node.get_transaction(
            Signature.from_string(deposits[0]["signature"]), "base64", max_supported_transaction_version=0
        )
        assert landed.value is not None
        sent = landed.value.transaction.transaction
        assert isinstance(sent, VersionedTransaction) and sent.signatures[1] == signed.signatures[1]
        assert (await node.get_balance(owner)).value == 0, "the gateway paid the fee"
        held = await node.get_token_account_balance(usdc_account(owner))
        assert int(held.value.amount) == HELD - PAID
    assert str(USDC_MINT) in {str(k) for k in signed.message.account_keys}
    assert app.errors == []


async def test_the_blockhash_route_is_one_node_read_for_every_caller(
    page_gateway: RunningGateway, http: aiohttp.ClientSession
) -> None:
    """``GET /x402/blockhash`` (no credentials): callers within its 2 s share one read of the node."""
    answers = []
    for _ in range(3):
        async with http.get(f"{page_gateway.url}/x402/blockhash") as resp:
            assert resp.status == 200, await resp.text()
            assert resp.headers["Cache-Control"] == "no-store"
            answers.append(await resp.json())
    assert set(answers[0]) == {"blockhash", "last_valid_block_height"}
    assert len({a["blockhash"] for a in answers}) == 1
