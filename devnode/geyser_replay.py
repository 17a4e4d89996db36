"""What the devnode's geyser server keeps of its own feed, and the ``from_slot`` replays it serves from it.

:class:`Retention` holds every update the server published (each serialized once, with its slot) for the
last ``slots`` slots and at most ``max_bytes``, in the order published. It holds whole slots: when the
newest slot is ``slots`` ahead of the oldest, or the bytes are over the bound, the oldest slot goes, all of
it (its late updates, a finalization published two slots later, are not kept either), so for every slot
it holds it holds every update published since it began holding (the newest slot stays, whatever its
size). It begins at a slot's start
(:meth:`Retention.restart`), and stops on a hole in the feed (:meth:`Retention.stop`): a follower that
loaded a new base from its leader has not published the slots in between.

:class:`Replay` runs one stream's replay, as Yellowstone's ``replay_stored_slots`` does: the held updates
whose slot is at or after ``from_slot``, in the order published, then what the server publishes
meanwhile (:meth:`Replay.feed`), through a fan-out of the stream's own (the same matching, data slices
and commitment holds as live), into the stream's queue at the client's pace. Once nothing is left to
read it hands the stream to the server's fan-out, what its commitment still holds back included, in one
step with no await: every update once, in the order published, none missing at the seam.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

import grpc

from geyser_proto import geyser_pb2
from geyser_proto.fanout import Fanout, Member
from geyser_proto.filters import Filters
from geyser_proto.streaming import Outbound

log = logging.getLogger(__name__)

#: Held updates matched between two yields of a replay (the other streams and the chain go on between).
CHUNK = 256
#: A held update: its slot (the slot field of the slot status, transaction, account or block meta), serialized.
Entry = tuple[int, bytes]


class Retention:
    def __init__(self, slots: int, max_bytes: int) -> None:
        self.slots = slots
        self.max_bytes = max_bytes
        self.nbytes = 0  # of the slots held
        self._log: list[Entry] = []  # in the order published (a dropped slot's late updates may linger)
        self._head = 0  # sequence number of _log[0] (one per update held)
        self._next = 0  # sequence number of the next update held: _head + len(_log)
        self._held: dict[int, list[int]] = {}  # slot -> [sequence number of its first update, its bytes]
        self._floor: int | None = None  # slots below it are not held; None: nothing is (until restart)

    @property
    def first_available(self) -> int | None:
        """The oldest slot held (a replay from it has every update of it); None when nothing is held."""
        return next(iter(self._held), None)

    @property
    def holding(self) -> bool:
        """Whether updates are held (since a :meth:`restart`, not stopped since)."""
        return self._floor is not None

    @property
    def newest(self) -> int | None:
        return next(reversed(self._held), None)

    def restart(self, slot: int) -> None:
        """Hold from ``slot`` on, nothing before: the feed (re)starts at this slot's beginning."""
        self._clear()
        self._floor = slot

    def stop(self) -> None:
        """Hold nothing until the next :meth:`restart` (the feed has a hole)."""
        self._clear()
        self._floor = None

    def _clear(self) -> None:
        self._head += len(self._log)
        self._log = []
        self._held = {}
        self.nbytes = 0

    def add(self, slot: int, data: bytes) -> None:
        """One update as published (``data``: serialized) of ``slot``."""
        floor = self._floor
        if floor is None or slot < floor:
            return  # before the holding began, or of a slot that went
        held = self._held.get(slot)
        if held is None:
            newest = self.newest
            if newest is not None and slot < newest:  # a slot begun out of order: hold nothing up to it
                self._drop_through(slot)
                return
            held = self._held[slot] = [self._next, 0]
        self._log.append((slot, data))
        self._next += 1
        held[1] += len(data)
        self.nbytes += len(data)
        self._trim()

    def _trim(self) -> None:
        held = self._held
        newest = next(reversed(held))
        dropped = False
        while len(held) > 1:
            oldest = next(iter(held))
            if oldest > newest - self.slots and self.nbytes <= self.max_bytes:
                break
            self.nbytes -= held.pop(oldest)[1]
            self._floor = oldest + 1
            dropped = True
        if dropped:
            self._compact()

    def _drop_through(self, slot: int) -> None:
        for old in [s for s in self._held if s <= slot]:
            self.nbytes -= self._held.pop(old)[1]
        self._floor = slot + 1
        self._compact()

    def _compact(self) -> None:
        """Take the dropped slots' updates off the front of the log."""
        floor, log_ = self._floor, self._log
        assert floor is not None
        i = 0
        while i < len(log_) and log_[i][0] < floor:
            i += 1
        if i:
            del log_[:i]
            self._head += i

    def since(self, from_slot: int) -> list[Entry]:
        """The held updates of ``from_slot`` and later slots, in the order published."""
        if self._floor is not None:
            from_slot = max(from_slot, self._floor)
        starts = [first for slot, (first, _) in self._held.items() if slot >= from_slot]
        if not starts:
            return []
        return [entry for entry in self._log[min(starts) - self._head :] if entry[0] >= from_slot]


class Replay:
    """One stream's replay from ``from_slot``: ``backlog`` (what was held then), then what :meth:`feed` adds,
    then the hand-over to ``fanout`` (where ``member`` waits with no filters) with ``filters``.
    ``on_done`` is called once, when the replay hands over, fails or is cancelled."""

    def __init__(
        self,
        fanout: Fanout,
        member: Member,
        out: Outbound,
        filters: Filters,
        from_slot: int,
        backlog: list[Entry],
        on_done: Callable[[Replay], None],
    ) -> None:
        self.fanout = fanout
        self.member = member
        self.out = out
        self.filters = filters
        self.from_slot = from_slot
        self.replayed = 0  # held and fed updates read (matched or not)
        self.fed = 0  # updates fed while it ran (published after it began)
        self._backlog = deque(backlog)
        self._tail: deque[Entry] = deque()
        self._tail_bytes = 0
        self._on_done = on_done
        self._shadow = Fanout()
        self._shadow_member = self._shadow.attach(out, filters)
        self._task: asyncio.Task[None] | None = None
        self._done = False

    @property
    def running(self) -> bool:
        return not self._done

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="geyser-replay")

    def feed(self, slot: int, data: bytes) -> None:
        """An update the server published while the replay runs (read after what came before it)."""
        if self._done or slot < self.from_slot:
            return
        self._tail.append((slot, data))
        self._tail_bytes += len(data)
        self.fed += 1
        out = self.out
        if len(self._tail) > out.max_messages or self._tail_bytes > out.max_bytes:
            self._finish()
            out.end(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the client is not reading its replay fast enough: more than {out.max_messages} updates or "
                f"{out.max_bytes} bytes came meanwhile; the stream is closed (read faster or replay less)",
            )

    def refilter(self, filters: Filters) -> None:
        """A new request (without ``from_slot``) during the replay: its filters for the rest of it, and live."""
        self.filters = filters
        self._shadow.replace(self._shadow_member, filters)

    async def settled(self) -> None:
        """Wait until the replay handed over, failed or was cancelled."""
        task = self._task
        while task is not None and not task.done():
            await asyncio.wait({task})

    def cancel(self) -> None:
        self._finish()
        if self._task is not None:
            self._task.cancel()

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._shadow.detach(self._shadow_member)
            self._on_done(self)

    def _next_chunk(self) -> list[Entry]:
        chunk: list[Entry] = []
        for source in (self._backlog, self._tail):
            while source and len(chunk) < CHUNK:
                entry = source.popleft()
                if source is self._tail:
                    self._tail_bytes -= len(entry[1])
                chunk.append(entry)
        return chunk

    async def _run(self) -> None:
        out = self.out
        low_messages, low_bytes = out.max_messages // 2, out.max_bytes // 2
        try:
            while not self._done and out.ended is None:
                chunk = self._next_chunk()
                if not chunk:
                    self._hand_over()  # no await since the last read: nothing was published in between
                    return
                for _, data in chunk:
                    self._shadow.publish(geyser_pb2.SubscribeUpdate.FromString(data))
                self.replayed += len(chunk)
                await asyncio.sleep(0)
                await out.room(low_messages, low_bytes)
        except Exception:
            log.exception("a geyser replay failed")  # a bug: this stream ends, the others go on
            out.end(grpc.StatusCode.INTERNAL, "the replay failed; subscribe again")
        finally:
            self._finish()

    def _hand_over(self) -> None:
        self.fanout.replace(self.member, self.filters)
        self.fanout.take_held(self._shadow, self._shadow_member, self.member)
        self._finish()
