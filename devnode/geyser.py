"""The devnode's geyser gRPC server: Yellowstone's ``geyser.Geyser`` service over this chain.

A `ChainListener`: each landed transaction becomes a transaction update and one account update per
account it wrote; each slot tick becomes the closed block's meta and slot updates. Everything goes
through one :class:`geyser_proto.fanout.Fanout` (the same filter code the gateway runs), so a stream
gets exactly what the public server would send for its filters.

Slot statuses, on this node's simplified commitment (processed when a transaction lands, confirmed
one slot later, finalized two slots later): at each tick the closed slot is ``SLOT_COMPLETED`` then
``SLOT_CONFIRMED`` (its block meta just before), the slot two behind is ``SLOT_FINALIZED``, and the
new slot is ``SLOT_CREATED_BANK`` then ``SLOT_PROCESSED`` (the interslot statuses only reach streams
that ask for ``interslot_updates``). No votes, no entries, no blocks stream, no replay.

Unary reads answer from the chain at the requested commitment: processed is the open slot (its
newest closed block for a blockhash), confirmed the newest closed block, finalized the root.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from typing import Any

import grpc
from solders.account import Account
from solders.hash import Hash, ParseHashError
from solders.pubkey import Pubkey

from devnode.chain import Chain
from devnode.chain.constants import MAX_PROCESSING_AGE
from devnode.geyser_convert import account_update, block_meta_update, slot_update, transaction_update
from devnode.records import Block, TxRecord
from devnode.rpc.cluster import CORE_VERSION
from geyser_proto import geyser_pb2
from geyser_proto.fanout import Fanout
from geyser_proto.filters import CONFIRMED, FINALIZED, PROCESSED, Filters
from geyser_proto.streaming import Outbound, read_requests, service_handler

log = logging.getLogger(__name__)

SLOT_COMPLETED, SLOT_CREATED_BANK = 4, 5
VERSION = "0.1.0"
#: Keepalive of the public server: a ping update on a stream that had nothing for this long.
PING_INTERVAL_S = 10.0
#: A stream's undelivered updates before it is closed RESOURCE_EXHAUSTED (a client not reading).
MAX_QUEUED = 100_000
MAX_QUEUED_BYTES = 256 * 2**20


class GeyserServer:
    def __init__(self, chain: Chain, *, ping_interval_s: float = PING_INTERVAL_S) -> None:
        self.chain = chain
        self.fanout = Fanout()
        self.ping_interval_s = ping_interval_s
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._write_versions = itertools.count(1)
        self._last_root = -1

    @property
    def streams(self) -> int:
        """Open Subscribe streams (a gateway's one upstream subscription shows as one here)."""
        return len(self.fanout.members)

    async def start(self, host: str, port: int) -> int:
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((service_handler(self, "the devnode's geyser server"),))
        self.port = server.add_insecure_port(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        await server.start()
        self._server = server
        self.chain.add_listener(self)
        return self.port

    async def stop(self) -> None:
        self.chain.remove_listener(self)
        if self._server is not None:
            await self._server.stop(grace=0.5)
            self._server = None

    # -- the chain's events -------------------------------------------------------------------------

    def on_transaction(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None:
        fanout = self.fanout
        if not fanout.members:
            return
        now = time.time()
        if fanout.wants("transaction"):
            fanout.publish(transaction_update(rec, now))
        if fanout.wants("account"):
            for key, account in changed:
                fanout.publish(account_update(key, account, rec, next(self._write_versions), now))

    def on_slot(self, slot: int, parent: int, root: int) -> None:
        new_root, self._last_root = root != self._last_root, root
        if not self.fanout.members:
            return
        now = time.time()
        closed = self.chain.blocks.get(parent)
        if closed is not None:
            self.fanout.publish(block_meta_update(closed, now))
            self.fanout.publish(slot_update(parent, closed.parent_slot, SLOT_COMPLETED, now))
            self.fanout.publish(slot_update(parent, closed.parent_slot, CONFIRMED, now))
        if new_root:
            rooted = self.chain.blocks.get(root)
            self.fanout.publish(slot_update(root, rooted.parent_slot if rooted else None, FINALIZED, now))
        self.fanout.publish(slot_update(slot, parent, SLOT_CREATED_BANK, now))
        self.fanout.publish(slot_update(slot, parent, PROCESSED, now))

    # -- the service ----------------------------------------------------------------------------------

    async def Subscribe(self, requests: Any, context: grpc.aio.ServicerContext) -> None:
        out = Outbound(MAX_QUEUED, MAX_QUEUED_BYTES)
        member = self.fanout.attach(out)

        def apply(filters: Filters) -> None:
            self.fanout.replace(member, filters)

        reader = asyncio.create_task(read_requests(requests, out, apply))

        def release() -> None:
            self.fanout.detach(member)
            reader.cancel()

        try:
            await out.run(context, self.ping_interval_s, release)
        finally:
            release()
            await asyncio.gather(reader, return_exceptions=True)

    async def Ping(self, request: geyser_pb2.PingRequest, context: grpc.aio.ServicerContext) -> geyser_pb2.PongResponse:
        return geyser_pb2.PongResponse(count=request.count)

    async def GetLatestBlockhash(
        self, request: geyser_pb2.GetLatestBlockhashRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.GetLatestBlockhashResponse:
        block = self._block(await _commitment(request, context))
        return geyser_pb2.GetLatestBlockhashResponse(
            slot=block.slot,
            blockhash=str(block.blockhash),
            last_valid_block_height=block.block_height + MAX_PROCESSING_AGE,
        )

    async def GetBlockHeight(
        self, request: geyser_pb2.GetBlockHeightRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.GetBlockHeightResponse:
        commitment = await _commitment(request, context)
        height = self.chain.block_height if commitment == PROCESSED else self._block(commitment).block_height
        return geyser_pb2.GetBlockHeightResponse(block_height=height)

    async def GetSlot(
        self, request: geyser_pb2.GetSlotRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.GetSlotResponse:
        return geyser_pb2.GetSlotResponse(slot=self._slot(await _commitment(request, context)))

    async def IsBlockhashValid(
        self, request: geyser_pb2.IsBlockhashValidRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.IsBlockhashValidResponse:
        commitment = await _commitment(request, context)
        blockhash = _hash(request.blockhash)
        if blockhash is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid blockhash {request.blockhash[:64]!r}")
            raise AssertionError("abort raises")
        valid = self.chain.is_blockhash_valid(blockhash)
        return geyser_pb2.IsBlockhashValidResponse(slot=self._slot(commitment), valid=valid)

    async def GetVersion(
        self, request: geyser_pb2.GetVersionRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.GetVersionResponse:
        info = {"version": {"package": "devnode-geyser", "version": VERSION, "solana": CORE_VERSION}, "extra": {}}
        return geyser_pb2.GetVersionResponse(version=json.dumps(info))

    def _slot(self, commitment: int) -> int:
        if commitment == PROCESSED:
            return self.chain.slot
        return self._block(commitment).slot

    def _block(self, commitment: int) -> Block:
        last = self.chain.last_block
        if commitment == FINALIZED:
            return self.chain.blocks.get(self.chain.root, last)
        return last


def _hash(text: str) -> Hash | None:
    try:
        return Hash.from_string(text)
    except (ValueError, ParseHashError):
        return None


async def _commitment(request: Any, context: grpc.aio.ServicerContext) -> int:
    if not request.HasField("commitment"):
        return PROCESSED
    value = int(request.commitment)
    if value not in (PROCESSED, CONFIRMED, FINALIZED):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"failed to create CommitmentLevel from {value}")
    return value
