"""bench.grpc_stream's replay source sends a feed a node could send: every update a transaction of its own, however
few were recorded (issue 83). Replayed as recorded, the same transactions came again and again, and the gateway's
subscription dropped every one after the first round as delivered already (a node's replay after a move): the
bench measured the gateway delivering nothing, taken for a collapse under load. The source in its own process,
read with a real grpcio client; no timing asserted."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import grpc
import orjson

from bench._proc import LOOPBACK, wait_for_port
from bench.grpc_processes import _subscribe_raw
from bench.grpc_stream import process, set_rate
from gateway.runtime.ports import free_port
from geyser_proto import geyser_pb2

RECORDED = 5
READ = 4 * RECORDED


def recorded(path: Path) -> Path:
    """``RECORDED`` transaction updates of slot 7, as bench.grpc_stream.record writes them (hex, JSON)."""
    updates = []
    for _ in range(RECORDED):
        update = geyser_pb2.SubscribeUpdate()
        update.transaction.slot = 7
        update.transaction.transaction.signature = os.urandom(64)
        updates.append(update.SerializeToString().hex())
    path.write_bytes(orjson.dumps(updates))
    return path


async def read(address: str, count: int) -> list[geyser_pb2.SubscribeUpdate]:
    async with grpc.aio.insecure_channel(address) as channel:
        call = _subscribe_raw(channel)(iter([geyser_pb2.SubscribeRequest()]))
        out: list[geyser_pb2.SubscribeUpdate] = []
        async for raw in call:
            update = geyser_pb2.SubscribeUpdate.FromString(raw)
            if update.WhichOneof("update_oneof") == "transaction":
                out.append(update)
            if len(out) == count:
                call.cancel()
                return out
    raise AssertionError(f"the source ended after {len(out)} updates")


def test_the_source_sends_each_transaction_once_in_advancing_slots(tmp_path: Path) -> None:
    port = free_port()
    address = f"{LOOPBACK}:{port}"
    with process("source", "--port", str(port), "--updates", str(recorded(tmp_path / "updates.json"))):
        asyncio.run(wait_for_port(LOOPBACK, port, 60))

        async def run() -> list[geyser_pb2.SubscribeUpdate]:
            reading = asyncio.create_task(read(address, READ))
            await asyncio.sleep(0.5)  # subscribed (an update sent before is not this reader's: it reads on)
            await asyncio.to_thread(set_rate, address, 200.0)
            try:
                async with asyncio.timeout(60):
                    return await reading
            finally:
                await asyncio.to_thread(set_rate, address, 0.0)

        updates = asyncio.run(run())
    signatures = [bytes(u.transaction.transaction.signature) for u in updates]
    assert len(set(signatures)) == READ, "a transaction sent twice"
    slots = [u.transaction.slot for u in updates]
    assert slots == sorted(slots) and slots[0] > 7, slots
