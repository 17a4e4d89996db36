"""The leader's replication log: every change of its chain, in order, for the last `window` slots, plus a
base (the whole state just before the oldest logged event), so that a follower can start from the base or
resume from where it was.

A `ChainListener` registered first on the chain (so a slot's opening is logged before anything a listener
lands in it, the block engine's bundles), and a watcher of the chain's genesis writes. Each landed transaction
is a `TxEvent` (the record and the accounts it changed, as `Chain._record` hands them), each tick a
`SlotEvent` (the closed block with its blockhash, the new open slot, its open time, the root), each
`set_genesis_account` a `WriteEvent`. That is every write to the chain's accounts: executed, emulated
(pump.fun), injected (the launch feed) and airdropped transactions all go through `Chain._record`; writes
outside a transaction go through `set_genesis_account` (the SOL/USD pool and the block engine's tip
accounts at start, so before the log: they are in its first base). The block engine's rehearsals write
and put back within one synchronous tick (devnode/block_engine/engine.py says why that is not logged).

Bounds. The log keeps `window` slots of events; when a slot falls off, its events are applied to the base
(accounts, position, the newest block and its records, the valid blockhashes), so memory is the window plus
one copy of the accounts. Each follower is a `Reader`: a sequence number into the log, not a queue of its
own. A reader that falls more than `max_queued` events behind the newest, or behind the oldest event still
logged, is cut (its connection is closed; the follower reconnects and resumes or resyncs). Frames are
encoded once, when a reader first needs them, and shared by all readers.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from solders.account import Account
from solders.hash import Hash
from solders.pubkey import Pubkey

from devnode.chain import Chain
from devnode.chain.constants import MAX_PROCESSING_AGE
from devnode.records import ChainSnapshot, TxRecord
from devnode.replication.frames import Base, Event, Hello, SlotEvent, TxEvent, WriteEvent, encode

log = logging.getLogger(__name__)

#: Slots of events kept (about 7 minutes at 400 ms): how far back a follower resumes, and the largest lag.
DEFAULT_WINDOW = 1_024
#: Events a follower may be behind the newest before it is cut.
DEFAULT_MAX_QUEUED = 250_000
#: Frames handed to a sender at once.
BATCH = 256


class Reader:
    """One follower's place in the log: the sequence number of the next event it is sent."""

    def __init__(self, next_seq: int) -> None:
        self.next_seq = next_seq
        self.cut_reason: str | None = None
        self.on_cut: Callable[[], object] = lambda: None
        self._wake = asyncio.Event()

    @property
    def cut(self) -> bool:
        return self.cut_reason is not None

    async def wait(self) -> None:
        """Until the log has more for this reader (or it is cut)."""
        await self._wake.wait()


class ReaderCut(Exception):
    """The reader fell out of the log's bounds; its connection is to be closed."""


class ReplicationLog:
    """The events of the last `window` slots of `chain`, a base before them, and the readers following them."""

    def __init__(self, chain: Chain, *, window: int = DEFAULT_WINDOW, max_queued: int = DEFAULT_MAX_QUEUED) -> None:
        if window < 1:
            raise ValueError(f"a replication window is at least one slot, not {window}")
        self.chain = chain
        self.window = window
        self.max_queued = max_queued
        self.log_id = os.urandom(8).hex()  # a restarted leader has a new log: followers resync, never resume
        self.base: ChainSnapshot = chain.snapshot()
        # Lists with a dead prefix (`_dead` entries, compacted now and then): indexing stays O(1).
        self._events: list[Event] = []
        self._frames: list[bytes | None] = []
        self._dead = 0
        self._first_seq = 0
        self._slot_events = 0
        self._readers: set[Reader] = set()
        chain.add_listener(self, first=True)
        chain.watch_genesis_writes(self._on_write)

    def close(self) -> None:
        """Stop logging; every reader is cut."""
        self.chain.remove_listener(self)
        self.chain.unwatch_genesis_writes(self._on_write)
        for reader in list(self._readers):
            self._cut(reader, "the leader is stopping")

    # ------------------------------------------------------------ what is logged

    @property
    def first_seq(self) -> int:
        """The sequence number of the oldest event logged (the first after the base)."""
        return self._first_seq

    @property
    def next_seq(self) -> int:
        """The sequence number the next event gets."""
        return self._first_seq + len(self)

    @property
    def slots(self) -> int:
        """Slot events logged (at most `window`)."""
        return self._slot_events

    def __len__(self) -> int:
        return len(self._events) - self._dead

    @property
    def readers(self) -> int:
        return len(self._readers)

    def on_transaction(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None:
        self._append(TxEvent(self.next_seq, rec, list(changed)))

    def on_slot(self, slot: int, parent: int, root: int) -> None:
        block = self.chain.blocks[parent]
        self._append(SlotEvent(self.next_seq, block, slot, self.chain.open_time, root))
        self._slot_events += 1
        self._trim()

    def _on_write(self, pubkey: Pubkey, account: Account) -> None:
        self._append(WriteEvent(self.next_seq, self.chain.slot, [(pubkey, account)]))

    def _append(self, event: Event) -> None:
        self._events.append(event)
        self._frames.append(None)
        newest = self.next_seq
        for reader in list(self._readers):
            if newest - reader.next_seq > self.max_queued:
                self._cut(reader, f"more than {self.max_queued} events behind")
            else:
                reader._wake.set()

    def _trim(self) -> None:
        while self._slot_events > self.window:
            event = self._events[self._dead]
            self._dead += 1
            self._first_seq += 1
            self._fold(event)
        if self._dead > len(self._events) // 2:
            del self._events[: self._dead], self._frames[: self._dead]
            self._dead = 0
        for reader in list(self._readers):
            if reader.next_seq < self._first_seq:
                self._cut(reader, f"fell out of the {self.window}-slot window")

    def _fold(self, event: Event) -> None:
        """An event falling off the window, applied to the base."""
        base = self.base
        match event:
            case TxEvent(_, rec, changed):
                base.accounts.update(changed)
                base.open_records.append(rec)
                base.transaction_count += 1
            case WriteEvent(_, _, accounts):
                base.accounts.update(accounts)
            case SlotEvent(_, block, next_slot, open_time, _):
                self._slot_events -= 1
                base.block, base.block_records, base.open_records = block, base.open_records, []
                base.slot, base.block_height, base.open_time = next_slot, block.block_height + 1, open_time
                base.hash_valid[block.blockhash] = block.block_height + MAX_PROCESSING_AGE
                for blockhash in [h for h, last in base.hash_valid.items() if last < base.block_height]:
                    del base.hash_valid[blockhash]

    # ------------------------------------------------------------ readers

    def open_reader(
        self, genesis: Hash | None, log_id: str | None, seq: int | None
    ) -> tuple[list[bytes], Reader | None]:
        """A follower connects, saying where it is (the genesis it follows, the log and sequence number it
        resumes from, or nothing). The frames to send first (the hello, then a base unless it resumes) and its
        reader; no reader for a follower of another cluster (it gets the hello, which says so, and nothing else).
        """
        if genesis is not None and genesis != self.chain.genesis_hash:
            hello = Hello(self.chain.genesis_hash, self.log_id, self.window, self.chain.slot, resync=False)
            return [encode(hello)], None
        resume = log_id == self.log_id and seq is not None and self._first_seq <= seq <= self.next_seq
        hello = Hello(self.chain.genesis_hash, self.log_id, self.window, self.chain.slot, resync=not resume)
        frames = [encode(hello)]
        if resume:
            assert seq is not None
            reader = Reader(seq)
        else:
            frames.append(encode(Base(self.base, self._first_seq)))
            reader = Reader(self._first_seq)
        self._readers.add(reader)
        return frames, reader

    def close_reader(self, reader: Reader) -> None:
        self._readers.discard(reader)

    def read(self, reader: Reader) -> list[bytes]:
        """The next frames for `reader` (at most `BATCH`; none when it is up to date), its place moved past them.
        `ReaderCut` once it was cut."""
        if reader.cut_reason is not None:
            raise ReaderCut(reader.cut_reason)
        reader._wake.clear()
        start = reader.next_seq - self._first_seq + self._dead
        end = min(len(self._events), start + BATCH)
        out = []
        for i in range(start, end):
            frame = self._frames[i]
            if frame is None:
                frame = self._frames[i] = encode(self._events[i])
            out.append(frame)
        reader.next_seq += len(out)
        return out

    def _cut(self, reader: Reader, reason: str) -> None:
        if reader.cut_reason is None:
            reader.cut_reason = reason
            log.warning("replication: a follower is cut off: %s", reason)
        self._readers.discard(reader)
        reader._wake.set()
        reader.on_cut()
