"""``from_slot``: a stream resumed from the process's log of the node's recent feed, with no gap at the seam.

Why a log of the whole feed: a client that went away had no filters in the process's upstream subscription
while it was gone, so only a record of everything the node sent can give it what it missed. With a log,
the upstream subscription asks for the whole feed (:func:`gateway.node.geyser.whole_feed`) and
:class:`ReplayLog` keeps every
update as the bytes the node sent, in the order received, in segments: a segment begins with the first
update of a slot newer than every slot before it (the slot's boundary) and holds all that came until the
next one. ``from_slot`` S replays from the boundary of the first held slot at or after S: a suffix of
the feed, so the updates of older slots that came later (confirmations, finalizations, the updates a
commitment held back until then) are in it (docs/api.md, gRPC, "Replay").

:class:`Resume` runs one stream's replays: the log through a fan-out of the stream's own (the same
matching, data slices and commitment holds as live), into the stream's queue at the client's pace; once
it has read the whole log it hands the stream over to the process's fan-out, what the replay still holds
back included, in one step with no await, so every update is delivered once, in the feed's order.

Bounds: whole segments leave from the front when the newest slot is ``slots`` ahead, or beyond
``max_bytes`` or ``max_updates``; a segment too big on its own empties the log. A gap in the upstream feed empties it
too (a log with a hole would replay a gap): the upstream subscription reopened on a node that could not
replay from where it was (:mod:`gateway.node.geyser`); one that moves or reconnects with ``from_slot``
goes on with no gap, and the log with it. Empty, or at start, the log fills again from the next boundary
that a slot status announces (a resumed feed may begin in a slot's middle).
Pure but for :class:`Resume`'s task: no I/O.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import grpc

from gateway.grpc.rules import replay_gap_refusal, replay_out_of_range_message, replay_unavailable_message
from geyser_proto import geyser_pb2
from geyser_proto.fanout import Fanout, Member
from geyser_proto.filters import CONFIRMED, EMPTY, FINALIZED, PROCESSED, Filters
from geyser_proto.streaming import Outbound

log = logging.getLogger(__name__)

#: Log updates matched between two yields of a replay (and at most what the stream's queue has room for).
CHUNK = 256
_NEVER = 2**64
_SLOTTED = ("slot", "account", "transaction", "transaction_status", "block_meta", "block", "entry", "block_footer")


def slot_of(update: geyser_pb2.SubscribeUpdate) -> int | None:
    """The slot an update is about (None for pings and pongs)."""
    kind = update.WhichOneof("update_oneof")
    if kind not in _SLOTTED:
        return None
    return int(getattr(update, kind).slot)


class OutOfRange(Exception):
    def __init__(self, oldest: int, newest: int) -> None:
        super().__init__(f"oldest {oldest}, newest {newest}")
        self.oldest, self.newest = oldest, newest


class NothingYet(Exception):
    """The log holds no slot yet (just started, or its feed just resumed)."""


class Gap(Exception):
    """What a replay was still to read is no longer held (``emptied``: the log was emptied since, else it aged
    out while the client read slowly)."""

    def __init__(self, emptied: bool) -> None:
        super().__init__("emptied" if emptied else "aged out")
        self.emptied = emptied


@dataclass(eq=False)
class Segment:
    slot: int
    first: int  # sequence number of its first update
    at: float = 0.0  # when its first update came (time.monotonic()): a replay from it covers the time since
    updates: list[bytes] = field(default_factory=list)
    nbytes: int = 0
    #: Per commitment (index), the lowest slot whose status releasing updates held for it came in this segment.
    releases: list[int] = field(default_factory=lambda: [_NEVER, _NEVER, _NEVER])


@dataclass(frozen=True)
class Plan:
    """Where a replay reads: from ``warm`` its updates are matched only to learn what the commitment holds back
    across ``start``; from ``start`` on what matches is delivered."""

    start: int
    warm: int


class ReplayLog:
    def __init__(self, slots: int, max_bytes: int, max_updates: int) -> None:
        self.slots = slots
        self.max_bytes = max_bytes
        self.max_updates = max_updates
        self.segments: list[Segment] = []
        self.nbytes = 0
        self.count = 0
        self.next_seq = 0  # every update of the feed takes one, held or not
        self.resets = 0  # the feed was interrupted, or one slot outgrew the bounds
        self._top: int | None = None  # the newest slot of the feed since it (re)started
        self._synced = False  # a boundary was seen since: what comes is held
        self._emptied_at = 0

    # -- the feed ---------------------------------------------------------------------------------

    def append(self, raw: bytes, update: geyser_pb2.SubscribeUpdate) -> None:
        """One update of the feed (``raw``: as the node sent it), in the order received."""
        slot = slot_of(update)
        if slot is None:
            return
        seq = self.next_seq
        self.next_seq += 1
        top, is_status = self._top, update.HasField("slot")
        if top is None or slot > top:
            self._top = slot
            if top is not None and (self._synced or is_status):
                self._synced = True
                self.segments.append(Segment(slot, seq, time.monotonic()))
        if not self._synced:
            return
        segment = self.segments[-1]
        segment.updates.append(raw)
        segment.nbytes += len(raw)
        self.nbytes += len(raw)
        self.count += 1
        if is_status and update.slot.status in (CONFIRMED, FINALIZED):
            releases = segment.releases
            releases[CONFIRMED] = min(releases[CONFIRMED], slot)
            if update.slot.status == FINALIZED:
                releases[FINALIZED] = min(releases[FINALIZED], slot)
        self._trim()

    def _trim(self) -> None:
        segments = self.segments
        newest = segments[-1].slot
        while len(segments) > 1 and (
            segments[0].slot <= newest - self.slots or self.nbytes > self.max_bytes or self.count > self.max_updates
        ):
            gone = segments.pop(0)
            self.nbytes -= gone.nbytes
            self.count -= len(gone.updates)
        if self.nbytes > self.max_bytes or self.count > self.max_updates:
            self._empty()  # one slot on its own outgrew the bounds: hold again from the next boundary

    def reset(self) -> None:
        """The feed has a gap (the upstream subscription reopened without from_slot): what is held ends before it."""
        self._empty()
        self._top = None

    def _empty(self) -> None:
        self.segments = []
        self.nbytes = self.count = 0
        self._synced = False
        self.resets += 1
        self._emptied_at = self.next_seq

    # -- replays ----------------------------------------------------------------------------------

    @property
    def newest(self) -> int | None:
        return self.segments[-1].slot if self.segments else None

    def oldest(self, commitment: int = PROCESSED) -> int | None:
        """The oldest ``from_slot`` served at this commitment: the first held slot after which nothing releases
        an update of a slot older than the log (which it could not replay); None when nothing is held."""
        segments = self.segments
        if not segments:
            return None
        base, lowest, first = segments[0].slot, _NEVER, len(segments)
        if commitment != PROCESSED:
            for i in range(len(segments) - 1, -1, -1):
                lowest = min(lowest, segments[i].releases[commitment])
                if lowest < base:
                    break
                first = i
        else:
            first = 0
        return segments[first].slot if first < len(segments) else segments[-1].slot + 1

    def received_at(self, from_slot: int) -> float | None:
        """When the first held slot at or after ``from_slot`` came (time.monotonic()): where a replay from it
        starts covering; None when no held slot is that new."""
        return next((segment.at for segment in self.segments if segment.slot >= from_slot), None)

    def plan(self, from_slot: int, commitment: int) -> Plan | None:
        """Where a replay from ``from_slot`` reads, or None when the slot is newer than any held (the stream
        starts live). Raises :class:`OutOfRange` (older than held) or :class:`NothingYet`."""
        segments = self.segments
        oldest = self.oldest(commitment)
        if oldest is None:
            raise NothingYet()
        if from_slot > segments[-1].slot:
            return None
        if from_slot < oldest:
            raise OutOfRange(oldest, segments[-1].slot)
        i = next(i for i, segment in enumerate(segments) if segment.slot >= from_slot)
        start = segments[i].first
        if commitment == PROCESSED:
            return Plan(start, start)
        lowest = min(segment.releases[commitment] for segment in segments[i:])
        warm = next((segment.first for segment in segments[: i + 1] if segment.slot >= lowest), start)
        return Plan(start, warm)

    def read(self, seq: int, limit: int) -> list[bytes]:
        """Up to ``limit`` updates from sequence number ``seq`` on ([] at the end); :class:`Gap` when ``seq``
        is no longer held."""
        if seq == self.next_seq:
            return []
        for segment in reversed(self.segments):
            if segment.first <= seq:
                offset = seq - segment.first
                if offset < len(segment.updates):
                    return segment.updates[offset : offset + limit]
                break
        raise Gap(emptied=seq < self._emptied_at)


class _Switch:
    """A replay's sink: nothing until its start (the updates before it only fill the commitment holds)."""

    def __init__(self) -> None:
        self.target: Outbound | None = None
        self.delivered = 0

    def deliver(self, data: bytes) -> None:
        if self.target is not None:
            self.delivered += 1
            self.target.deliver(data)


class Resume:
    """One stream's ``from_slot`` requests: its replay, then its hand-over to the process's fan-out.

    ``take`` is given each of the stream's requests before it is applied live: it answers the filters to
    apply live now, or None when a replay (started, or running) applies them when it hands over."""

    def __init__(
        self, log: ReplayLog, fanout: Fanout, member: Member, out: Outbound, on_live: Callable[[], None]
    ) -> None:
        self.log = log
        self.fanout = fanout
        self.member = member
        self.out = out
        self.on_live = on_live  # the stream's filters changed in the process's fan-out
        self.delivered = 0  # updates a replay delivered (all of them, this stream's)
        self._task: asyncio.Task[None] | None = None
        self._filters = EMPTY
        self._shadow: tuple[Fanout, Member] | None = None

    @property
    def replaying(self) -> bool:
        return self._task is not None and not self._task.done()

    def take(self, filters: Filters) -> Filters | None:
        from_slot = filters.from_slot
        filters = replace(filters, from_slot=None)
        if from_slot is None:
            if not self.replaying:
                return filters
            self._filters = filters  # for the rest of the replay, and live after it
            if self._shadow is not None:
                shadow, member = self._shadow
                shadow.replace(member, filters)
            return None
        self.cancel()
        try:
            plan = self.log.plan(from_slot, filters.commitment)
        except OutOfRange as exc:
            message = replay_out_of_range_message(from_slot, exc.oldest, exc.newest, filters.commitment, self.log.slots)
            self.out.end(grpc.StatusCode.OUT_OF_RANGE, message)
            return None
        except NothingYet:
            self.out.end(grpc.StatusCode.UNAVAILABLE, replay_unavailable_message())
            return None
        if plan is None:
            return filters  # newer than any slot held: live at once
        self._filters = filters
        self.fanout.replace(self.member, EMPTY)  # nothing live until the hand-over
        self._task = asyncio.get_running_loop().create_task(self._replay(plan), name="grpc-replay")
        return None

    async def settled(self) -> None:
        """Wait until no replay runs (a ping is answered after the replay it follows)."""
        while self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._shadow = None

    async def _replay(self, plan: Plan) -> None:
        out, feed = self.out, self.log
        low_messages, low_bytes = out.max_messages // 2, out.max_bytes // 2
        switch = _Switch()
        shadow = Fanout()
        member = shadow.attach(switch, self._filters)
        self._shadow = (shadow, member)
        cursor = plan.warm
        try:
            while out.ended is None:
                if cursor >= plan.start:
                    switch.target = out
                limit = CHUNK if cursor >= plan.start else min(CHUNK, plan.start - cursor)
                batch = feed.read(cursor, limit)
                if not batch:
                    self._hand_over(shadow, member)  # no await since the read: nothing came in between
                    return
                for raw in batch:
                    shadow.publish(geyser_pb2.SubscribeUpdate.FromString(raw))
                    cursor += 1
                    if out.queued > low_messages or out.queued_bytes > low_bytes:
                        break
                await asyncio.sleep(0)  # the live streams go on between chunks
                await out.room(low_messages, low_bytes)
        except Gap as exc:
            code, message = replay_gap_refusal(exc.emptied, feed.oldest())
            out.end(grpc.StatusCode[code], message)
        except Exception:
            log.exception("a replay failed")  # a bug: the stream ends, the others go on
            out.end(grpc.StatusCode.INTERNAL, "the replay failed; subscribe again")
        finally:
            self.delivered += switch.delivered
            self._shadow = None

    def _hand_over(self, shadow: Fanout, member: Member) -> None:
        self.fanout.replace(self.member, self._filters)
        self.fanout.take_held(shadow, member, self.member)
        self.on_live()
