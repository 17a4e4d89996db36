"""The Yellowstone gRPC stream with a client generated from the .proto files, as any Yellowstone user
would build one: grpcio-tools writes the Python modules into a temporary directory (nothing of this
project's own modules is imported). A unary call, slot updates, a ping, then the wallet's own
transfer seen as a transaction update. 1 credit per call and per stream, then 60 a minute.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)          # on the embedded devnode: also gives the wallet SOL
# the wallet: $GATEWAY_WALLET, else gateway fund's, $GATEWAY_HOME/wallets/dev-wallet.json
.venv/bin/python examples/grpc_stream.py                  # GATEWAY_GRPC: host:port, default 127.0.0.1:10000
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import grpc
from grpc_tools import protoc
from solders.keypair import Keypair
from solders.message import Message
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from gateway_client import dev_wallet_path, require_dev_api_key, solana_client

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
GRPC = os.environ.get("GATEWAY_GRPC", f"127.0.0.1:{os.environ.get('GATEWAY_GRPC_PORT', '10000')}")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
WALLET = dev_wallet_path()  # $GATEWAY_WALLET, else $GATEWAY_HOME/wallets/dev-wallet.json
PROTOS = Path(__file__).resolve().parents[1] / "geyser_proto"  # or the public geyser.proto + solana-storage.proto


def generated_client(out: Path) -> tuple[Any, Any]:
    """``geyser_pb2`` and ``geyser_pb2_grpc``, generated from the .proto files into ``out``."""
    for name in ("geyser.proto", "solana-storage.proto"):
        shutil.copy(PROTOS / name, out / name)
    include = str(resources.files("grpc_tools") / "_proto")
    args = ["protoc", f"-I{out}", f"-I{include}", f"--python_out={out}", f"--grpc_python_out={out}"]
    if protoc.main([*args, str(out / "geyser.proto"), str(out / "solana-storage.proto")]) != 0:
        raise SystemExit("protoc failed")
    sys.path.insert(0, str(out))
    return importlib.import_module("geyser_pb2"), importlib.import_module("geyser_pb2_grpc")


async def main(pb2: Any, pb2_grpc: Any, payer: Keypair) -> None:
    token = (("x-token", API_KEY),)  # a session token works too
    async with grpc.aio.insecure_channel(GRPC) as channel:  # behind TLS: grpc.aio.secure_channel(...)
        stub = pb2_grpc.GeyserStub(channel)
        print(f"GetSlot: {(await stub.GetSlot(pb2.GetSlotRequest(), metadata=token)).slot}")
        print(f"GetVersion: {json.loads((await stub.GetVersion(pb2.GetVersionRequest(), metadata=token)).version)}")

        stream = stub.Subscribe(metadata=token)  # requests are written on the open stream
        await stream.write(pb2.SubscribeRequest(slots={"slots": pb2.SubscribeRequestFilterSlots()}))
        for _ in range(3):
            update = await asyncio.wait_for(stream.read(), 10)
            if update.WhichOneof("update_oneof") == "slot":
                print(
                    f"slot {update.slot.slot} status {pb2.SlotStatus.Name(update.slot.status)} {list(update.filters)}"
                )

        # A new request replaces the filters: now this wallet's transactions, confirmed.
        mine = pb2.SubscribeRequestFilterTransactions(account_include=[str(payer.pubkey())], vote=False)
        await stream.write(pb2.SubscribeRequest(transactions={"mine": mine}, commitment=pb2.CONFIRMED))
        await stream.write(pb2.SubscribeRequest(ping=pb2.SubscribeRequestPing(id=1)))
        while (update := await asyncio.wait_for(stream.read(), 10)).WhichOneof("update_oneof") != "pong":
            pass
        print(f"pong {update.pong.id}: the new filters are live")

        async with solana_client(URL, api_key=API_KEY) as client:
            blockhash = (await client.get_latest_blockhash()).value.blockhash
            pay = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=Keypair().pubkey(), lamports=1_000_000))
            tx = Transaction([payer], Message.new_with_blockhash([pay], payer.pubkey(), blockhash), blockhash)
            signature = (await client.send_raw_transaction(bytes(tx))).value
        while True:
            update = await asyncio.wait_for(stream.read(), 15)
            if update.WhichOneof("update_oneof") == "transaction":
                info = update.transaction.transaction
                assert info.signature == bytes(signature)
                print(f"transaction {signature} in slot {update.transaction.slot}, fee {info.meta.fee} lamports")
                break
        stream.cancel()  # closing the stream stops its billing


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as generated:
        messages, services = generated_client(Path(generated))
        asyncio.run(main(messages, services, Keypair.from_bytes(bytes(json.loads(WALLET.read_text())))))
