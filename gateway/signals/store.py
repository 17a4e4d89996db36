"""The signal log: every signal the classifier emitted, in Redis streams, and the classifier's cursor.

Keys (``signals`` is the default prefix)::

    signals:events           stream of every event; entry id <slot>-<n> (n-th event of the slot), one
                             field "event" holding the SignalEvent JSON
    signals:events:<kind>    the same entries of one kind, same ids (so a kind is read without
                             scanning the others)
    signals:cursor           the last slot the classifier processed

Ids order by slot, so "events after slot S" is the XRANGE bound ``S+1-0``. Each stream is capped with
an exact ``MAXLEN`` at ``retention`` entries (default :data:`DEFAULT_RETENTION_EVENTS`): the newest are
kept, the oldest dropped at each append; a kind's stream keeps that many of its own kind.

:meth:`SignalLog.append_slot` writes a slot's events and moves the cursor in one ``MULTI``/``EXEC``
under ``WATCH`` of the cursor: a crash leaves the slot either wholly written with the cursor past it or
not at all, and a second writer (a classifier restarted while the old one still runs) makes one of the
two fail with :class:`CursorConflict` instead of writing a slot twice. Redis does not roll a
transaction back when a command in it fails, so the slot is checked against the cursor before: an id
below the stream's top would fail mid-transaction.

Every Redis failure is :class:`StoreUnavailable`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
import redis.asyncio as aioredis
from redis.exceptions import WatchError

from gateway.signals.rules import KINDS, SignalEvent, event_id, parse_event_id
from gateway.storage.errors import redis_errors

DEFAULT_PREFIX: Final = "signals"
DEFAULT_RETENTION_EVENTS: Final = 10_000
_FIELD: Final = b"event"
_U64_MAX: Final = 2**64 - 1
WHAT: Final = "the signal log"


class CursorConflict(Exception):
    """The cursor is at or past the slot being appended: it was appended already (by another writer)."""


@dataclass(frozen=True, slots=True)
class StoredSignal:
    id: str  # <slot>-<n>
    event: dict[str, Any]  # SignalEvent.to_json()


@dataclass(frozen=True, slots=True)
class RecentSignals:
    events: list[StoredSignal]  # newest first
    more: bool  # older events matched but were left out (the limit)
    cursor: int | None  # the classifier's cursor when they were read


class SignalLog:
    def __init__(
        self, redis: aioredis.Redis, *, retention: int = DEFAULT_RETENTION_EVENTS, prefix: str = DEFAULT_PREFIX
    ) -> None:
        if retention < 1:
            raise ValueError("retention must be at least 1 event")
        self._redis = redis
        self.retention = retention
        self.stream = f"{prefix}:events"
        self.cursor_key = f"{prefix}:cursor"

    def kind_stream(self, kind: str) -> str:
        return f"{self.stream}:{kind}"

    async def cursor(self) -> int | None:
        """The last slot processed, or None before the first."""
        async with redis_errors(WHAT):
            value = await self._redis.get(self.cursor_key)
        return int(value) if value is not None else None

    async def append_slot(self, slot: int, events: Sequence[SignalEvent]) -> list[str]:
        """Write ``slot``'s events and set the cursor to ``slot``, atomically; their ids.

        Raises :class:`CursorConflict` when the cursor is at or past ``slot`` (nothing written)."""
        ids = [event_id(slot, n) for n in range(len(events))]
        async with redis_errors(WHAT), self._redis.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(self.cursor_key)
                current = await pipe.get(self.cursor_key)
                if current is not None and int(current) >= slot:
                    raise CursorConflict(f"slot {slot} is not after the cursor {int(current)}")
                pipe.multi()  # type: ignore[no-untyped-call]
                for id_, event in zip(ids, events, strict=True):
                    fields: Any = {_FIELD: orjson.dumps(event.to_json())}
                    for stream in (self.stream, self.kind_stream(event.kind)):
                        pipe.xadd(stream, fields, id=id_, maxlen=self.retention, approximate=False)
                pipe.set(self.cursor_key, slot)
                await pipe.execute()
            except WatchError as exc:
                raise CursorConflict(f"the cursor moved while slot {slot} was appended") from exc
        return ids

    async def recent(
        self, limit: int, kind: str | None = None, since_slot: int | None = None, before: str | None = None
    ) -> RecentSignals:
        """At most ``limit`` events, newest first: of ``kind``, with a slot after ``since_slot``, an id
        before ``before``; read together with the cursor."""
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown signal kind {kind!r}")
        low = f"{since_slot + 1}-0" if since_slot is not None else "-"
        high = _just_before(before) if before is not None else "+"
        if high is None:
            return RecentSignals([], False, await self.cursor())
        stream = self.stream if kind is None else self.kind_stream(kind)
        async with redis_errors(WHAT), self._redis.pipeline(transaction=True) as pipe:
            pipe.get(self.cursor_key)
            pipe.xrevrange(stream, high, low, count=limit + 1)
            cursor, entries = await pipe.execute()
        events = [_stored(entry) for entry in entries]
        return RecentSignals(events[:limit], len(events) > limit, int(cursor) if cursor is not None else None)

    async def last_id(self) -> str:
        """The id of the newest event, or ``0-0`` when there is none (reading after it gets everything)."""
        async with redis_errors(WHAT):
            entries: Any = await self._redis.xrevrange(self.stream, "+", "-", count=1)
        return _text(entries[0][0]) if entries else "0-0"

    async def read_after(self, last_id: str, block_ms: int | None = None, count: int = 100) -> list[StoredSignal]:
        """Up to ``count`` events after ``last_id``, oldest first; with ``block_ms``, waits that long for
        one when there is none yet (keep it below the client's socket timeout)."""
        async with redis_errors(WHAT):
            answer: Any = await self._redis.xread({self.stream: last_id}, count=count, block=block_ms)
        out: list[StoredSignal] = []
        for _stream, entries in answer or []:
            out += [_stored(entry) for entry in entries]
        return out


def _just_before(id_: str) -> str | None:
    """The greatest id below ``id_`` (an inclusive XRANGE bound; Redis < 6.2 has no exclusive ones),
    or None when nothing is below it."""
    parsed = parse_event_id(id_)
    if parsed is None:
        raise ValueError(f"not an event id: {id_!r}")
    slot, n = parsed
    if n > 0:
        return f"{slot}-{n - 1}"
    return f"{slot - 1}-{_U64_MAX}" if slot > 0 else None


def _stored(entry: Any) -> StoredSignal:
    id_, fields = entry
    raw = fields.get(_FIELD) or fields.get(_FIELD.decode())  # a client may decode responses
    return StoredSignal(_text(id_), orjson.loads(raw))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
