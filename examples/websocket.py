"""The WebSocket at /ws with solana-py's own PubSub client: the API key rides in the subprotocol
header, then a slot subscription and a watch on the wallet's account, which a transfer sent
through the gateway changes. 1 credit per subscription and per notification received.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)          # on the embedded devnode: also gives the wallet SOL
# the wallet: $GATEWAY_WALLET, else gateway fund's, $GATEWAY_HOME/wallets/dev-wallet.json
.venv/bin/python examples/websocket.py
"""

from __future__ import annotations

import asyncio
import json
import os

from solana.rpc.websocket_api import SolanaWsClient
from solders.keypair import Keypair
from solders.message import Message
from solders.rpc.responses import AccountNotification, SlotNotification
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from gateway_client import dev_wallet_path, require_dev_api_key, solana_client

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json


async def main(payer: Keypair) -> None:
    ws_url = URL.replace("http", "ws", 1) + "/ws"
    # Only "solana-rpc" is echoed back; the entry carrying the key never is.
    async with SolanaWsClient(ws_url, subprotocols=[f"auth.{API_KEY}", "solana-rpc"]) as ws:
        await ws.slot_subscribe()
        for _ in range(3):
            note = await asyncio.wait_for(ws.recv(), 10)
            assert isinstance(note, SlotNotification)
            print(f"slot {note.result.slot} (parent {note.result.parent})")
        await ws.account_subscribe(pubkey=payer.pubkey(), commitment="confirmed")
        async with solana_client(URL, api_key=API_KEY) as client:
            blockhash = (await client.get_latest_blockhash()).value.blockhash
            pay = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=Keypair().pubkey(), lamports=1_000_000))
            tx = Transaction([payer], Message.new_with_blockhash([pay], payer.pubkey(), blockhash), blockhash)
            await client.send_raw_transaction(bytes(tx))
        while True:
            note = await asyncio.wait_for(ws.recv(), 15)
            if isinstance(note, AccountNotification):
                print(f"wallet balance now {note.result.value.lamports} lamports (slot {note.result.context.slot})")
                break


if __name__ == "__main__":
    asyncio.run(main(Keypair.from_bytes(bytes(json.loads(WALLET.read_text())))))
