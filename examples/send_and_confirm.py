"""sendAndConfirm: a signed SOL transfer raced to confirmation over every leg, what it was charged,
and getSendStatus, which says whether sending again would be safe.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)          # on the embedded devnode: also gives the wallet SOL
# the wallet: $GATEWAY_WALLET, else gateway fund's, $GATEWAY_HOME/wallets/dev-wallet.json
.venv/bin/python examples/send_and_confirm.py
"""

from __future__ import annotations

import asyncio
import json
import os

from solders.keypair import Keypair
from solders.message import Message
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from gateway_client import GatewayClient, dev_wallet_path, require_dev_api_key, solana_client

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json


async def main(payer: Keypair) -> None:
    async with solana_client(URL, api_key=API_KEY) as client:
        blockhash = (await client.get_latest_blockhash()).value.blockhash
    pay = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=Keypair().pubkey(), lamports=1_000_000))
    tx = Transaction([payer], Message.new_with_blockhash([pay], payer.pubkey(), blockhash), blockhash)

    async with GatewayClient(URL, api_key=API_KEY) as gateway:
        result = await gateway.send_and_confirm(bytes(tx))
        print(f"{result['status']} in slot {result['slot']} after {result['landing_time_ms']} ms")
        print(f"legs {', '.join(result['legs_attempted'])}; charged {result['charged_credits']} credits")
        status = await gateway.send_status(result["signature"])
        assert status is not None
        print(f"getSendStatus: {status['status']}, retry_safe={status['retry_safe']}")


if __name__ == "__main__":
    asyncio.run(main(Keypair.from_bytes(bytes(json.loads(WALLET.read_text())))))
