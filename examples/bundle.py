"""The bundle relay: two transfers that land together or not at all, the second one tipping a tip
account, sent with POST /relay/sendBundle and followed with /relay/getBundleStatuses.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)
# the wallet: $GATEWAY_WALLET, else gateway fund's, $GATEWAY_HOME/wallets/dev-wallet.json
.venv/bin/python examples/bundle.py
"""

from __future__ import annotations

import asyncio
import json
import os
import random

from solders.hash import Hash
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from gateway_client import GatewayClient, dev_wallet_path, require_dev_api_key, solana_client

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json
TIP_LAMPORTS = 10_000  # at least 1,000


def signed(payer: Keypair, instructions: list[Instruction], blockhash: Hash) -> bytes:
    return bytes(Transaction([payer], Message.new_with_blockhash(instructions, payer.pubkey(), blockhash), blockhash))


def pay(payer: Keypair, to: Pubkey, lamports: int) -> Instruction:
    return transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=lamports))


async def main(payer: Keypair) -> None:
    async with solana_client(URL, api_key=API_KEY) as client:
        blockhash = (await client.get_latest_blockhash()).value.blockhash
    async with GatewayClient(URL, api_key=API_KEY) as gateway:
        tip_account = Pubkey.from_string(random.choice(await gateway.tip_accounts()))
        first = signed(payer, [pay(payer, Keypair().pubkey(), 1_000_000)], blockhash)
        second = signed(
            payer, [pay(payer, Keypair().pubkey(), 2_000_000), pay(payer, tip_account, TIP_LAMPORTS)], blockhash
        )
        bundle_id = await gateway.send_bundle([first, second])
        print(f"bundle {bundle_id}")
        for _ in range(100):
            status = (await gateway.bundle_statuses([bundle_id]))[0]
            if status is not None:
                print(f"landed in slot {status['slot']} ({status['confirmation_status']}), err {status['err']}")
                return
            await asyncio.sleep(0.2)
        raise SystemExit("the bundle did not land in 20 s")


if __name__ == "__main__":
    asyncio.run(main(Keypair.from_bytes(bytes(json.loads(WALLET.read_text())))))
