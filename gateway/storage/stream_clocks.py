"""What an account's gRPC streams share over the whole service: their stream opens per minute, and the
interval clock that bills their stream time (docs/api.md, gRPC prices and limits).

- Opens: one Redis counter per account and minute (``grpc:opens:<pubkey>``, its window starting at its
  first open), so reconnecting cannot be done at any rate.
- The clock: one anchor per account (``grpc:clock:<pubkey>``, a time in Redis's clock), set by the first
  stream the account opens and kept while it opens streams at least once per two intervals. Every stream of
  the account pays its further intervals at the anchor's ticks (anchor + k intervals), not an interval after
  it opened, so closing a stream and opening another, or overlapping short streams, never buys a fresh
  first interval: an account's streams are billed for the time they cover, however often they reconnect.

Without Redis (a process started without one, as some tests run) both are counted in this process.
Fail closed like the seats (:mod:`gateway.storage.seats`): when Redis cannot answer, ``StoreUnavailable``.
"""

from __future__ import annotations

import logging
import math
import time

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

from gateway.storage.errors import redis_errors

log = logging.getLogger(__name__)

WHAT = "the stream clocks"
WINDOW_S = 60

_OPEN = """
redis.call('SET', KEYS[1], 0, 'EX', ARGV[1], 'NX')
return redis.call('INCR', KEYS[1])
"""

_TICK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local anchor = tonumber(redis.call('GET', KEYS[1]) or now)
redis.call('SET', KEYS[1], tostring(anchor), 'EX', math.ceil(2 * interval) + 1)
return tostring(anchor + (math.floor((now - anchor) / interval) + 1) * interval - now)
"""


class StreamClocks:
    def __init__(self) -> None:
        self._open: AsyncScript | None = None
        self._tick: AsyncScript | None = None
        self._opens: dict[str, tuple[float, int]] = {}  # without Redis: pubkey -> (window start, opens)
        self._anchors: dict[str, tuple[float, float]] = {}  # without Redis: pubkey -> (anchor, last touched)

    def start(self, redis: aioredis.Redis) -> None:
        self._open = redis.register_script(_OPEN)
        self._tick = redis.register_script(_TICK)

    async def opened(self, pubkey: str) -> int:
        """Count a stream opening of ``pubkey``; how many it opened in its current minute, this one included."""
        if self._open is None:
            now = time.monotonic()
            since, count = self._opens.get(pubkey, (now, 0))
            if now - since >= WINDOW_S:
                since, count = now, 0
            self._opens[pubkey] = (since, count + 1)
            return count + 1
        async with redis_errors(WHAT):
            return int(await self._open(keys=[f"grpc:opens:{pubkey}"], args=[WINDOW_S]))

    async def next_tick(self, pubkey: str, interval_s: float) -> float:
        """Seconds until the account's next interval starts (a stream opening now pays its next interval then);
        the account's clock starts now when it has none."""
        if self._tick is None:
            now = time.monotonic()
            anchor, touched = self._anchors.get(pubkey, (now, now))
            if now - touched > 2 * interval_s:
                anchor = now
            self._anchors[pubkey] = (anchor, now)
            return anchor + (math.floor((now - anchor) / interval_s) + 1) * interval_s - now
        async with redis_errors(WHAT):
            return float(await self._tick(keys=[f"grpc:clock:{pubkey}"], args=[interval_s]))
