"""What an account's gRPC streams share over the whole service: their stream opens per minute, and the
stream time they held that no interval has billed yet (docs/api.md, gRPC prices and limits).

- Opens: one Redis counter per account and minute (``grpc:opens:<pubkey>``, its window starting at its
  first open), so reconnecting cannot be done at any rate.
- Carried time: one counter per account (``grpc:carry:<pubkey>``, microseconds). A stream that ends adds
  the time it held past its last paid interval boundary; the account's next stream takes all of it when it
  opens and counts it as time it already held, so its next interval comes that much sooner (at once when
  it holds an interval or more). The account's streams are thus billed for the time they held, summed over
  their reconnects, wherever each ran: closing before an interval starts and reopening after it never
  skips it. The counter is kept ``CARRY_KEEP_INTERVALS`` intervals after the last stream that added to it.

Without Redis (a process started without one, as some tests run) both are counted in this process.
Fail closed like the seats (:mod:`gateway.storage.seats`) where a stream opens: when Redis cannot answer,
``StoreUnavailable``. A stream's end cannot be refused: a carry Redis cannot take is logged and lost (less
than an interval of that stream's time), as is the time of streams open on a process that dies.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

from gateway.storage.errors import StoreUnavailable, redis_errors

log = logging.getLogger(__name__)

WHAT = "the stream clocks"
WINDOW_S = 60
#: An account's carried stream time is kept this many intervals after a stream last added to it
#: (an hour at the default 60 s interval).
CARRY_KEEP_INTERVALS = 60
#: How long stopping waits for carries still on their way to Redis.
STOP_WAIT_S = 5.0
#: A carry Redis did not take is sent again up to this many times, SEND_RETRY_S, then twice that, ... apart.
SEND_TRIES = 4
SEND_RETRY_S = 0.25

_OPEN = """
redis.call('SET', KEYS[1], 0, 'EX', ARGV[1], 'NX')
return redis.call('INCR', KEYS[1])
"""

_TAKE = """
local carried = redis.call('GET', KEYS[1])
redis.call('DEL', KEYS[1])
return carried or 0
"""

_GIVE = """
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return total
"""


class StreamClocks:
    def __init__(self) -> None:
        self._open: AsyncScript | None = None
        self._take: AsyncScript | None = None
        self._give: AsyncScript | None = None
        self._opens: dict[str, tuple[float, int]] = {}  # without Redis: pubkey -> (window start, opens)
        self._carried: dict[str, tuple[int, float]] = {}  # without Redis: pubkey -> (µs, kept until)
        self._redis: aioredis.Redis | None = None
        self._queued: dict[str, tuple[int, float]] = {}  # to add at Redis: pubkey -> (µs, kept for s)
        self._sender: asyncio.Task[None] | None = None

    def start(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._open = redis.register_script(_OPEN)
        self._take = redis.register_script(_TAKE)
        self._give = redis.register_script(_GIVE)

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

    async def take(self, pubkey: str) -> float:
        """Seconds of stream time ``pubkey``'s ended streams held and no interval billed, now the opening
        stream's (0 when none)."""
        if self._take is None:
            carried, until = self._carried.pop(pubkey, (0, 0.0))
            return carried / 1e6 if time.monotonic() < until else 0.0
        async with redis_errors(WHAT):
            return int(await self._take(keys=[f"grpc:carry:{pubkey}"])) / 1e6

    def give(self, pubkey: str, seconds: float, interval_s: float) -> None:
        """An ending stream's unbilled time goes to the account's next stream (queued and sent while the
        stream's end is handled; :meth:`stop` waits for what is still going)."""
        micros = math.floor(seconds * 1e6)
        if micros <= 0:
            return
        keep_s = CARRY_KEEP_INTERVALS * interval_s
        if self._give is None:
            carried, until = self._carried.get(pubkey, (0, 0.0))
            now = time.monotonic()
            self._carried[pubkey] = ((carried if now < until else 0) + micros, now + keep_s)
            return
        carried, _ = self._queued.get(pubkey, (0, 0.0))
        self._queued[pubkey] = (carried + micros, keep_s)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        """What is queued, one pipeline at a time (many streams of an account often end at once: one
        addition), a failed one tried again a few times (Redis busy, as when a process's streams all end)."""
        assert self._give is not None and self._redis is not None
        failures = 0
        while self._queued:
            batch, self._queued = self._queued, {}
            try:
                async with redis_errors(WHAT), self._redis.pipeline(transaction=False) as pipe:
                    for pubkey, (micros, keep_s) in batch.items():
                        await self._give(
                            keys=[f"grpc:carry:{pubkey}"], args=[micros, math.ceil(keep_s * 1000)], client=pipe
                        )
                    await pipe.execute()
                failures = 0
            except StoreUnavailable:
                failures += 1
                if failures > SEND_TRIES:
                    lost = sum(micros for micros, _ in batch.values()) / 1e6
                    log.warning("%s: %.3f s of stream time of %d accounts not carried", WHAT, lost, len(batch))
                    failures = 0
                    continue
                for pubkey, (micros, keep_s) in batch.items():  # with what was queued meanwhile
                    carried, _ = self._queued.get(pubkey, (0, 0.0))
                    self._queued[pubkey] = (carried + micros, keep_s)
                await asyncio.sleep(SEND_RETRY_S * failures)

    async def stop(self) -> None:
        """Wait (a while) for the carries still on their way."""
        if self._sender is not None and not self._sender.done():
            await asyncio.wait({self._sender}, timeout=STOP_WAIT_S)
