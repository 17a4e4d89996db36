"""What an account's gRPC streams share over the whole service: their stream opens per minute, and the
interval clock that bills their stream time (docs/api.md, gRPC prices and limits).

- Opens: one Redis counter per account and minute (``grpc:opens:<pubkey>``, its window starting at its
  first open), so reconnecting cannot be done at any rate.
- Clocks: a stream that ends inside an interval it paid leaves the rest of that interval here
  (``grpc:clock:<pubkey>``, a sorted set scored by when the interval ends, in Redis's clock); the
  account's next stream takes it and its next interval is due then, not a whole interval after it
  opened. So closing a stream and opening another does not restart the paid interval: an account's
  streams are billed for the time they cover, however often they reconnect. A leftover only ever
  brings a charge sooner, never later.

Without Redis (a process started without one, as some tests run) both are counted in this process.
Fail closed like the seats (:mod:`gateway.storage.seats`): when Redis cannot answer, ``StoreUnavailable``.
"""

from __future__ import annotations

import asyncio
import logging
import os
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

_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local got = redis.call('ZPOPMAX', KEYS[1])
if #got == 0 then
  return false
end
return tostring(tonumber(got[2]) - now)
"""

_LEAVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[2])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1])) + 1)
return 1
"""


class StreamClocks:
    def __init__(self) -> None:
        self._open: AsyncScript | None = None
        self._take: AsyncScript | None = None
        self._leave: AsyncScript | None = None
        self._opens: dict[str, tuple[float, int]] = {}  # without Redis: pubkey -> (window start, opens)
        self._left: dict[str, list[float]] = {}  # without Redis: pubkey -> monotonic ends of paid intervals
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, redis: aioredis.Redis) -> None:
        self._open = redis.register_script(_OPEN)
        self._take = redis.register_script(_TAKE)
        self._leave = redis.register_script(_LEAVE)

    async def stop(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

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

    async def take(self, pubkey: str) -> float | None:
        """Seconds left of the latest paid interval an ended stream of ``pubkey`` left, or None (taken: one
        stream gets it)."""
        if self._take is None:
            now = time.monotonic()
            left = [end for end in self._left.pop(pubkey, []) if end > now]
            if not left:
                return None
            left.sort()
            if left[:-1]:
                self._left[pubkey] = left[:-1]
            return left[-1] - now
        async with redis_errors(WHAT):
            got = await self._take(keys=[f"grpc:clock:{pubkey}"])
        return None if got is None else float(got)

    def leave(self, pubkey: str, remaining_s: float) -> None:
        """A stream of ``pubkey`` ended ``remaining_s`` before the end of the interval it paid (from code that
        cannot await: written a moment later; lost if Redis cannot take it, which only spares a charge)."""
        if remaining_s <= 0:
            return
        if self._leave is None:
            self._left.setdefault(pubkey, []).append(time.monotonic() + remaining_s)
            return
        task = asyncio.get_running_loop().create_task(self._write(pubkey, remaining_s))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, pubkey: str, remaining_s: float) -> None:
        assert self._leave is not None
        try:
            async with redis_errors(WHAT):
                await self._leave(keys=[f"grpc:clock:{pubkey}"], args=[remaining_s, os.urandom(8).hex()])
        except Exception:
            log.warning("the rest of a paid stream interval of %s could not be recorded", pubkey, exc_info=True)
