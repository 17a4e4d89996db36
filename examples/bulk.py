"""Bulk lookups: many balances, token balances or transactions in one request (up to 100 keys),
billed per key (1, 5 and 5 credits), all reserved at once; invalid keys and failed lookups are free.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)      # on the embedded devnode; or your own key
.venv/bin/python examples/bulk.py [<address> ...]     # default: the funded wallet and two others
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import orjson
from solders.keypair import Keypair

from gateway_client import GatewayClient, dev_wallet_path, require_dev_api_key

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json


def addresses() -> list[str]:
    """The addresses asked for, or the funded wallet's, an address that does not exist and one invalid."""
    if len(sys.argv) > 1:
        return sys.argv[1:]
    wallet = str(Keypair.from_bytes(bytes(json.loads(WALLET.read_text()))).pubkey())
    return [wallet, str(Keypair().pubkey()), "not-an-address"]


async def bulk(gateway: GatewayClient, route: str, document: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = await gateway.request("POST", f"/bulk/{route}", orjson.dumps(document))
    return answer


async def main() -> None:
    keys = addresses()
    async with GatewayClient(URL, api_key=API_KEY) as gateway:
        balances = await bulk(gateway, "getBalances", {"addresses": keys})
        listed = ", ".join(f"{r['address'][:8]}…={r['lamports']}" for r in balances["results"])
        print(f"{len(balances['results'])} balances: {listed}; {len(balances['errors'])} free errors")
        print(f"credits left: {gateway.meter.credits_remaining}")

        tokens = await bulk(gateway, "getTokenBalances", {"owners": keys[:1]})
        for owner in tokens["results"]:
            for account in owner["token_accounts"]:
                what = f"{account['ui_amount']} of {account['mint'][:8]}… ({account['program']})"
                print(f"{owner['owner'][:8]}… holds {what}")

        history = await gateway.rpc("getSignaturesForAddress", [keys[0], {"limit": 3}])
        signatures = [entry["signature"] for entry in history]
        transactions = await bulk(gateway, "getTransactions", {"signatures": signatures or ["1" * 88]})
        found = sum(1 for r in transactions["results"] if r["transaction"] is not None)
        print(f"{found} of {len(signatures)} transactions found; credits left: {gateway.meter.credits_remaining}")


if __name__ == "__main__":
    asyncio.run(main())
