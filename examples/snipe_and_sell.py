"""Trade builders: executeSnipe builds an unsigned pump.fun buy for your wallet, you sign it with solders and
send it; then executeSell builds the sale of what it bought. The gateway never holds your key.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)          # on the embedded devnode: also gives the wallet SOL
# the wallet the key belongs to (it trades and signs): $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json
.venv/bin/python examples/snipe_and_sell.py [<mint>]      # default: a coin the devnode's launch feed trades now

Each build costs its `fee_credits`: the TRADE_BUILD fee plus a share of the SOL it moves (`GET /pricing`,
`trade_builders`). A build the gateway refuses (a graduated curve, a coin not quoted in SOL...) is free.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from typing import Any

import base58
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed
from solana.rpc.core import RPCException
from solders.keypair import Keypair
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from gateway_client import GatewayClient, dev_wallet_path, require_dev_api_key, solana_client
from gateway_client.errors import RpcError

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json
PUMP = "6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P"
BUY = bytes([102, 6, 61, 18, 1, 218, 235, 234])  # the pump `buy` instruction's discriminator


async def recent_mints(gateway: GatewayClient) -> list[str]:
    """Mints of the pump.fun coins bought most recently (a buy's third account is its mint), newest first."""
    listed = await gateway.rpc("getSignaturesForAddress", [PUMP, {"limit": 15, "commitment": "confirmed"}])
    config = {"encoding": "json", "maxSupportedTransactionVersion": 0, "commitment": "confirmed"}
    answers = await gateway.batch([("getTransaction", [s["signature"], config]) for s in listed if s["err"] is None])
    mints: list[str] = []
    for answer in answers:
        tx = answer.get("result")
        if not tx:
            continue
        keys = tx["transaction"]["message"]["accountKeys"]
        for ix in tx["transaction"]["message"]["instructions"]:
            if keys[ix["programIdIndex"]] == PUMP and base58.b58decode(ix["data"])[:8] == BUY:
                mint = keys[ix["accounts"][2]]
                if mint not in mints:
                    mints.append(mint)
    return mints


async def snipe_one(gateway: GatewayClient, client: AsyncClient, mints: list[str], wallet: Keypair) -> dict[str, Any]:
    """Snipe the first coin of ``mints`` that takes it. A refused build is free; a transaction the node's
    preflight simulation rejects never lands (only its build was paid for). Either way: the next coin."""
    for mint in mints:
        try:
            params = {"mint": mint, "amount_sol": "0.01", "slippage_bps": 1000}
            snipe: dict[str, Any] = await gateway.rpc("executeSnipe", [params])
        except RpcError as exc:
            print(f"  {mint}: refused, free: {exc}")
            continue
        print(f"snipe {mint}: {snipe['tokens_out']} units for at most {snipe['max_sol_cost_lamports']} lamports")
        print(f"  fee_credits {snipe['fee_credits']}")
        try:
            print(f"  landed: {await sign_and_send(client, snipe['unsigned_tx_base64'], wallet)}")
        except RPCException as exc:
            print(f"  the preflight rejected it, nothing landed: {str(exc)[:160]}")
            continue
        return snipe
    raise SystemExit("no coin to snipe: is the devnode's launch feed on (GATEWAY_DEVNODE_FEED)?")


async def sign_and_send(client: AsyncClient, unsigned_tx: str, wallet: Keypair) -> Signature:
    """Sign the gateway's unsigned v0 transaction with the wallet (solders), send it, wait for it."""
    message = VersionedTransaction.from_bytes(base64.b64decode(unsigned_tx)).message
    signed = VersionedTransaction(message, [wallet])
    signature = (await client.send_raw_transaction(bytes(signed))).value
    await client.confirm_transaction(signature, Confirmed, sleep_seconds=0.2)
    status = (await client.get_signature_statuses([signature])).value[0]
    if status is None or status.err is not None:
        raise SystemExit(f"{signature} failed: {status.err if status else 'not found'}")
    return signature


async def main(wallet: Keypair) -> None:
    async with GatewayClient(URL, api_key=API_KEY) as gateway, solana_client(URL, api_key=API_KEY) as client:
        mints = sys.argv[1:] or await recent_mints(gateway)
        while True:
            snipe = await snipe_one(gateway, client, mints, wallet)
            mint, tokens = snipe["mint"], snipe["tokens_out"]
            params = {"mint": mint, "token_amount": str(tokens), "slippage_bps": 1000}
            try:
                sell = await gateway.rpc("executeSell", [params])
                break
            except RpcError as exc:
                if "graduated" not in str(exc):
                    raise
                # the coin completed its curve after the buy: it trades on PumpSwap now, not on its curve
                print(f"  {mint} graduated before the sell (refused, free): the next coin")
                mints = mints[mints.index(mint) + 1 :]

        print(f"sell {tokens} units: about {sell['sol_out_lamports']} lamports")
        print(f"  at least {sell['min_sol_output_lamports']}; fee_credits {sell['fee_credits']}")
        before = (await client.get_balance(wallet.pubkey(), Confirmed)).value
        landed = await sign_and_send(client, sell["unsigned_tx_base64"], wallet)
        after = (await client.get_balance(wallet.pubkey(), Confirmed)).value
        print(f"  landed: {landed}; the wallet got {after - before} lamports net of the transaction fee")


if __name__ == "__main__":
    asyncio.run(main(Keypair.from_bytes(bytes(json.loads(WALLET.read_text())))))
