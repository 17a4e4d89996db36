"""Transaction history: getTransactionHistory (25 credits), an address's recent transactions, each
with its SOL and token transfers, the programs it called, a one-line summary and an explanation.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)      # on the embedded devnode; or your own key
.venv/bin/python examples/transaction_history.py [<address>]   # default: the funded wallet's address
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from solders.keypair import Keypair

from gateway_client import GatewayClient, dev_wallet_path, require_dev_api_key

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json


def address() -> str:
    """The address asked for, or the public key of the wallet `gateway fund` made (its deposit is history)."""
    if len(sys.argv) > 1:
        return sys.argv[1]
    return str(Keypair.from_bytes(bytes(json.loads(WALLET.read_text()))).pubkey())


async def main() -> None:
    async with GatewayClient(URL, api_key=API_KEY) as gateway:
        history = await gateway.rpc("getTransactionHistory", [address(), {"limit": 20}])
        latest = history["transactions"][0]["enriched"]["summary"] if history["count"] else "none"
        print(f"{history['count']} transactions; latest: {latest}")
        for tx in history["transactions"]:
            print(f"  slot {tx['slot']}  fee {tx['fee']}  {tx['explanation']}")


if __name__ == "__main__":
    asyncio.run(main())
