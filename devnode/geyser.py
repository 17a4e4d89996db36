"""The devnode's geyser gRPC server: Yellowstone's ``geyser.Geyser`` service over this chain.

A `ChainListener`: each landed transaction becomes a transaction update and one account update per
account it wrote; each slot tick becomes the closed block's meta and slot updates. Everything goes
through one :class:`geyser_proto.fanout.Fanout` (the same filter code the gateway runs), so a stream
gets exactly what the public server would send for its filters.

Slot statuses, on this node's simplified commitment (processed when a transaction lands, confirmed
one slot later, finalized two slots later): at each tick the closed slot is ``SLOT_COMPLETED`` then
``SLOT_CONFIRMED`` (its block meta just before), the slot two behind is ``SLOT_FINALIZED``, and the
new slot is ``SLOT_CREATED_BANK`` then ``SLOT_PROCESSED`` (the interslot statuses only reach streams
that ask for ``interslot_updates``). No votes, no entries, no blocks stream.

**Replay** (``from_slot``, as Yellowstone's ``replay_stored_slots``): every update published is also
retained, serialized, with its slot, for the last ``replay_slots`` slots (512) and at most
``replay_bytes`` (64 MiB), whole oldest slots going first (:class:`devnode.geyser_replay.Retention`),
whether or not a stream is attached: each transaction and account update is built (some µs a
transaction) even for none. Retention begins at the first slot that opens after the server starts (a
restarted node holds nothing of before), and begins again at the next slot after a hole in what was
published here: a follower that loads a new base from its leader (``Chain.load_replica`` tells no
listener) has not published the slots in between. A ``Subscribe`` request with ``from_slot`` S (the
first or any later one, which starts over) is answered as follows:

- S older than the oldest slot held: the stream ends ``OUT_OF_RANGE`` "broadcast from S is not available,
  last available: FIRST". That is Yellowstone's message, and the code its current server sends (its own
  client's auto-reconnect reads ``OUT_OF_RANGE`` as "the replay window moved past my slot"; earlier
  releases sent it as ``INTERNAL``). It is not ``INVALID_ARGUMENT``, which says the request is wrong
  whatever the server holds. The gateway's own replay log refuses with ``OUT_OF_RANGE`` as well.
- S held: the stream receives every held update whose slot is S or later, in the order published,
  through a fan-out of its own (the same filters, data slices and commitment holds as live: a
  ``confirmed`` stream gets a slot's transactions with its confirmation, whether that comes in the
  replay or live), then what was published meanwhile, then goes live. The hand-over to the live fan-out
  (with what its commitment still holds back) is one step with no await after the replay read the last
  update: none missing, none twice. A ping sent after the request is answered after the replay.
- S newer than the newest slot held, or nothing held yet (just started): live at once, every live update
  (those of slots before S too), as Yellowstone does (its replay finds nothing and the stream goes on).

``SubscribeReplayInfo`` answers ``first_available``, the oldest slot held (unset when nothing is held).
With ``replay_slots`` 0 nothing is retained, ``from_slot`` is ``UNIMPLEMENTED`` (the filters' refusal, as
before) and ``first_available`` is unset (as Yellowstone's without replay).

A follower (devnode/replication/) runs this same server on its replica: it is told the leader's
transactions (with the accounts they changed, as the leader recorded them) and the leader's slot events,
so it publishes the same slot statuses (the same parents, roots and block metas), transactions and
accounts for a slot as its leader, in the same order; only ``created_at`` differs. ``write_version`` is
the chain's transaction count shifted by 16 plus the account's index among those its transaction wrote:
increasing, and the same on a follower as on its leader (Yellowstone's is each validator's own; a client
must not rely on it across nodes). A follower's retention starts when it starts.

Unary reads answer from the chain at the requested commitment: processed is the open slot (its
newest closed block for a blockhash), confirmed the newest closed block, finalized the root.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from typing import Any

import grpc
from solders.account import Account
from solders.hash import Hash, ParseHashError
from solders.pubkey import Pubkey

from devnode.chain import Chain
from devnode.chain.constants import MAX_PROCESSING_AGE
from devnode.geyser_convert import account_update, block_meta_update, slot_update, transaction_update
from devnode.geyser_replay import Replay, Retention
from devnode.records import Block, TxRecord
from devnode.rpc.cluster import CORE_VERSION
from geyser_proto import geyser_pb2
from geyser_proto.fanout import Fanout, Member
from geyser_proto.filters import CONFIRMED, DEFAULT_LIMITS, EMPTY, FINALIZED, PROCESSED, FilterLimits, Filters
from geyser_proto.streaming import Outbound, pong_update, read_requests, service_handler

log = logging.getLogger(__name__)

SLOT_COMPLETED, SLOT_CREATED_BANK = 4, 5
VERSION = "0.1.0"
#: Keepalive of the public server: a ping update on a stream that had nothing for this long.
PING_INTERVAL_S = 10.0
#: A stream's undelivered updates before it is closed RESOURCE_EXHAUSTED (a client not reading).
MAX_QUEUED = 100_000
MAX_QUEUED_BYTES = 256 * 2**20
#: Slots of the server's own feed retained for ``from_slot`` replays (Yellowstone's ``replay_stored_slots``),
#: and the bytes they may take (the oldest whole slots go first).
REPLAY_SLOTS = 512
REPLAY_BYTES = 64 * 2**20
#: An account update's ``write_version``: the chain's transaction count (the transaction's own, the same on a
#: follower as on its leader) shifted by this, plus the account's index among those the transaction wrote.
WRITE_VERSION_BITS = 16


class GeyserServer:
    def __init__(
        self,
        chain: Chain,
        *,
        ping_interval_s: float = PING_INTERVAL_S,
        replay_slots: int = REPLAY_SLOTS,
        replay_bytes: int = REPLAY_BYTES,
    ) -> None:
        self.chain = chain
        self.fanout = Fanout()
        self.ping_interval_s = ping_interval_s
        self.port = 0
        #: What was published for the last ``replay_slots`` slots (None: 0, no retention, no ``from_slot``).
        self.retention = Retention(replay_slots, replay_bytes) if replay_slots > 0 else None
        self._limits = FilterLimits(from_slot=True) if self.retention is not None else DEFAULT_LIMITS
        self._replays: dict[Replay, None] = {}  # running, in the order begun
        self._server: grpc.aio.Server | None = None
        self._last_root = -1
        self._open_slot: int | None = None  # the slot the last slot event opened
        self._tx_count = -1  # the chain's transaction count after the last event published

    @property
    def streams(self) -> int:
        """Open Subscribe streams (a gateway's one upstream subscription shows as one here)."""
        return len(self.fanout.members)

    @property
    def replaying(self) -> int:
        """Streams replaying from ``from_slot`` (not live yet)."""
        return len(self._replays)

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
        for replay in list(self._replays):
            replay.cancel()
        if self._server is not None:
            await self._server.stop(grace=0.5)
            self._server = None

    # -- the chain's events -------------------------------------------------------------------------

    def on_transaction(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None:
        fanout, retention = self.fanout, self.retention
        if retention is None:
            if not fanout.members:
                return
        elif not self._follows(rec):
            retention.stop()  # a follower's new base: what came between was not published here
        self._tx_count = self.chain.transaction_count
        now = time.time()
        kept = retention is not None
        if kept or fanout.wants("transaction"):
            self._publish(transaction_update(rec, now), rec.slot)
        if kept or fanout.wants("account"):
            # The same on a follower as on its leader: the transaction count is the leader's.
            base = self.chain.transaction_count << WRITE_VERSION_BITS
            for i, (key, account) in enumerate(changed):
                self._publish(account_update(key, account, rec, base + i, now), rec.slot)

    def on_slot(self, slot: int, parent: int, root: int) -> None:
        new_root, self._last_root = root != self._last_root, root
        if self.retention is not None:
            if parent != self._open_slot or not self.retention.holding:  # the first slot seen, or after a hole
                self.retention.restart(slot)  # held from this slot's beginning
            self._open_slot, self._tx_count = slot, self.chain.transaction_count
        elif not self.fanout.members:
            return
        now = time.time()
        closed = self.chain.blocks.get(parent)
        if closed is not None:
            self._publish(block_meta_update(closed, now), parent)
            self._publish(slot_update(parent, closed.parent_slot, SLOT_COMPLETED, now), parent)
            self._publish(slot_update(parent, closed.parent_slot, CONFIRMED, now), parent)
        if new_root:
            rooted = self.chain.blocks.get(root)
            self._publish(slot_update(root, rooted.parent_slot if rooted else None, FINALIZED, now), root)
        self._publish(slot_update(slot, parent, SLOT_CREATED_BANK, now), slot)
        self._publish(slot_update(slot, parent, PROCESSED, now), slot)

    def _follows(self, rec: TxRecord) -> bool:
        """Whether ``rec`` is the chain's next transaction after the last event published here: not after a
        follower's new base (``Chain.load_replica`` tells no listener), which moves the slot or the count."""
        chain = self.chain
        if chain.transaction_count != self._tx_count + 1:
            return False
        # In the open slot, or in the one the chain just opened whose opening reaches this server later in
        # the same tick (a listener told of it first landed a transaction in it).
        return rec.slot == self._open_slot or (rec.slot == chain.slot and chain.last_block.slot == self._open_slot)

    def _publish(self, update: geyser_pb2.SubscribeUpdate, slot: int) -> None:
        """One update of ``slot``: retained, given to the replays running, and to the live streams."""
        if self.retention is not None:
            data = update.SerializeToString()
            self.retention.add(slot, data)
            if self._replays:
                for replay in list(self._replays):
                    replay.feed(slot, data)
        if self.fanout.members:
            self.fanout.publish(update)

    # -- the service ----------------------------------------------------------------------------------

    async def Subscribe(self, requests: Any, context: grpc.aio.ServicerContext) -> None:
        out = Outbound(MAX_QUEUED, MAX_QUEUED_BYTES)
        member = self.fanout.attach(out)
        replay: Replay | None = None

        def apply(filters: Filters) -> None:
            nonlocal replay
            from_slot = filters.from_slot
            filters = replace(filters, from_slot=None)
            if from_slot is None:
                if replay is not None and replay.running:
                    replay.refilter(filters)  # applied live when it hands over
                else:
                    self.fanout.replace(member, filters)
                return
            if replay is not None:
                replay.cancel()  # a new from_slot starts over
            replay = self._replay(member, out, filters, from_slot)

        async def pong(ping_id: int) -> None:
            if replay is not None:
                await replay.settled()  # a pong follows the replay its ping followed
            out.deliver(pong_update(ping_id))

        reader = asyncio.create_task(read_requests(requests, out, apply, pong, self._limits))

        def release() -> None:
            self.fanout.detach(member)
            reader.cancel()
            if replay is not None:
                replay.cancel()

        try:
            await out.run(context, self.ping_interval_s, release)
        finally:
            release()
            await asyncio.gather(reader, return_exceptions=True)

    def _replay(self, member: Member, out: Outbound, filters: Filters, from_slot: int) -> Replay | None:
        """Begin ``member``'s replay from ``from_slot`` (None: it goes live at once, or its stream ended)."""
        retention = self.retention
        assert retention is not None  # a request with from_slot is refused without retention
        first = retention.first_available
        if first is not None and from_slot < first:
            out.end(grpc.StatusCode.OUT_OF_RANGE, replay_unavailable(from_slot, first))
            return None
        backlog = retention.since(from_slot)
        if not backlog:  # newer than every slot held, or nothing held yet: live at once, as Yellowstone does
            self.fanout.replace(member, filters)
            return None
        self.fanout.replace(member, EMPTY)  # nothing live until the replay hands over
        replay = Replay(self.fanout, member, out, filters, from_slot, backlog, self._replay_done)
        self._replays[replay] = None
        replay.start()
        return replay

    def _replay_done(self, replay: Replay) -> None:
        self._replays.pop(replay, None)

    async def SubscribeReplayInfo(
        self, request: geyser_pb2.SubscribeReplayInfoRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.SubscribeReplayInfoResponse:
        first = self.retention.first_available if self.retention is not None else None
        if first is None:
            return geyser_pb2.SubscribeReplayInfoResponse()
        return geyser_pb2.SubscribeReplayInfoResponse(first_available=first)

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


def replay_unavailable(from_slot: int, first: int) -> str:
    """Yellowstone's words for a ``from_slot`` older than the oldest slot held (``first``)."""
    return f"broadcast from {from_slot} is not available, last available: {first}"


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
