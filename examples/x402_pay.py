"""x402: pay for credits with one sponsored USDC transfer, no SOL and no sign-up.

The 402 of a call without credentials carries the x402 terms (base64 PAYMENT-REQUIRED header): pay
`amount` of `asset` to `payTo`, with `extra.feePayer` as the fee payer. The wallet signs a transaction of
one TransferChecked whose fee payer is the service's key, leaving the fee payer's signature empty;
POST /x402/settle co-signs and sends it. Once the transfer is finalized, confirm-deposit credits the
wallet that signed for the USDC, and that wallet's signed requests are paid calls.

On the embedded devnode (`make up`) the test USDC is minted here with the devnode's mint authority
(in $GATEWAY_HOME/devnode), and blockhashes and statuses are read from the devnode's own RPC; on a real
network the wallet already holds USDC and any Solana RPC serves those two reads.

    .venv/bin/python examples/x402_pay.py
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import Any

import aiohttp
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Finalized
from solders.keypair import Keypair
from solders.message import Message, MessageV0, to_bytes_versioned
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction
from spl.token.constants import TOKEN_PROGRAM_ID
from spl.token.instructions import (
    create_idempotent_associated_token_account,
    get_associated_token_address,
    mint_to_checked,
    transfer_checked,
)
from spl.token.models import MintToCheckedParams, TransferCheckedParams

from gateway_client import GatewayClient, WalletSigner, gateway_home

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
HOME = gateway_home()  # $GATEWAY_HOME, else .gateway
NODE = f"http://127.0.0.1:{os.environ.get('GATEWAY_DEVNODE_RPC_PORT', '8899')}"
USDC_DECIMALS = 6
PAYMENT = 50_000  # 0.05 USDC: 5,000 credits at the default rate


async def x402_terms(http: aiohttp.ClientSession) -> dict[str, Any]:
    """The `exact` terms of the 402 a call without credentials gets."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "getSlot"}
    async with http.post(f"{URL}/", json=call) as resp:
        assert resp.status == 402, resp.status
        required = json.loads(base64.b64decode(resp.headers["PAYMENT-REQUIRED"]))
    accept: dict[str, Any] = next(a for a in required["accepts"] if a["scheme"] == "exact")
    return accept


def sponsored_payment(terms: dict[str, Any], wallet: Keypair, blockhash: Any, amount: int) -> bytes:
    """One TransferChecked to payTo's USDC account; the fee payer's signature slot left empty."""
    mint, pay_to = Pubkey.from_string(terms["asset"]), Pubkey.from_string(terms["payTo"])
    pay = transfer_checked(
        TransferCheckedParams(
            program_id=TOKEN_PROGRAM_ID,
            source=get_associated_token_address(wallet.pubkey(), mint),
            mint=mint,
            dest=get_associated_token_address(pay_to, mint),
            owner=wallet.pubkey(),
            amount=amount,
            decimals=USDC_DECIMALS,
        )
    )
    message = MessageV0.try_compile(Pubkey.from_string(terms["extra"]["feePayer"]), [pay], [], blockhash)
    signatures = [Signature.default(), wallet.sign_message(to_bytes_versioned(message))]
    return bytes(VersionedTransaction.populate(message, signatures))


async def test_usdc(node: AsyncClient, wallet: Keypair, mint: Pubkey, amount: int) -> None:
    """Devnode only: mint test USDC to the wallet (the mint authority pays the fee, not the wallet)."""
    authority = Keypair.from_bytes(bytes(json.loads((HOME / "devnode" / "usdc-mint-authority.json").read_text())))
    if (await node.get_balance(authority.pubkey())).value < 100_000_000:
        airdrop = (await node.request_airdrop(authority.pubkey(), 1_000_000_000)).value
        await node.confirm_transaction(airdrop, sleep_seconds=0.2)
    dest = get_associated_token_address(wallet.pubkey(), mint)
    create = create_idempotent_associated_token_account(authority.pubkey(), wallet.pubkey(), mint)
    params = MintToCheckedParams(
        program_id=TOKEN_PROGRAM_ID,
        mint=mint,
        dest=dest,
        mint_authority=authority.pubkey(),
        amount=amount,
        decimals=USDC_DECIMALS,
    )
    blockhash = (await node.get_latest_blockhash()).value.blockhash
    message = Message.new_with_blockhash([create, mint_to_checked(params)], authority.pubkey(), blockhash)
    tx = VersionedTransaction(message, [authority])
    await node.confirm_transaction((await node.send_transaction(tx)).value, sleep_seconds=0.2)


async def main() -> None:
    wallet = Keypair()  # a new wallet: no SOL, no account at the gateway
    async with aiohttp.ClientSession() as http, AsyncClient(NODE) as node:
        terms = await x402_terms(http)
        print(f"x402 terms: {terms['amount']} base units of {terms['asset']} to {terms['payTo']} on {terms['network']}")
        await test_usdc(node, wallet, Pubkey.from_string(terms["asset"]), PAYMENT)

        blockhash = (await node.get_latest_blockhash()).value.blockhash
        raw = sponsored_payment(terms, wallet, blockhash, max(PAYMENT, int(terms["amount"])))
        async with GatewayClient(URL) as anonymous:  # settling needs no credentials
            settled = await anonymous.x402_settle(raw)
        signature = settled["transaction"]
        print(f"settled {signature}: {settled['message']}")
        await node.confirm_transaction(Signature.from_string(signature), Finalized, sleep_seconds=0.2)

    async with GatewayClient(URL, signer=WalletSigner(bytes(wallet))) as gateway:  # signed requests
        confirmed = await gateway.confirm_deposit(signature)
        first = " (the deposit watcher had credited it already)" if confirmed["already_processed"] else ""
        print(f"credited {confirmed['credited_pubkey']}: {confirmed['new_balance']} credits{first}")
        slot = await gateway.rpc("getSlot")
        print(f"paid call: slot {slot}, {gateway.meter.credits_remaining} credits left")


if __name__ == "__main__":
    asyncio.run(main())
