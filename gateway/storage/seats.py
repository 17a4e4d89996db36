"""Open connections counted over the whole service, so that a cap per account or per client address
holds however the connections spread over replicas, processes and machines.

One Redis sorted set per capped key (``seats:ws:account:<pubkey>``, ...), whose members are the open
connections, each scored by when it lapses. Taking a seat is one Lua script, atomic at Redis: drop the
lapsed members, count, add under the cap. The process that holds connections pushes their lapse forward
every ``refresh_s`` (one pipelined round trip for all it holds) and removes each when it closes; a
process that dies without closing leaves its members to lapse after ``ttl_s``, so for that long its
connections still count. Scores use Redis's clock, so the machines' clocks do not matter. A refresh
re-adds a member that lapsed while Redis was out of reach (an outage longer than ``ttl_s``): the
connection is still open, so it counts again from the next refresh, even if that puts its key over the
cap for a while (openings are refused until enough close).

Why Redis and not the account shards, which own the per-account concurrency of calls: a shard's slice
lives 1 s, sized for calls that last milliseconds; a socket or a stream lives for hours, and holding it
on a shard would renew every open one twice a second (1,000 open sockets: 2,000 exchanges a second,
half of what one shard serves in docs/scaling.md). Here it is one pipelined refresh per process every
10 s, and one script call per opening. Fail closed: when Redis cannot answer, the opening is refused
(``StoreUnavailable``), never let through uncounted.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

from gateway.base.stopping import cancel_and_wait
from gateway.storage.errors import redis_errors

log = logging.getLogger(__name__)

WHAT = "the open-connection seats"
#: Seats taken at Redis at once by one process (the rest wait their turn).
TAKES_AT_ONCE = 16
#: A dead process's connections stop counting this long after its last refresh.
SEAT_TTL_S = 30.0
REFRESH_S = 10.0

_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 1)
return 1
"""

_REFRESH = """
local t = redis.call('TIME')
local lapse = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, lapse, ARGV[i + 1])
  redis.call('EXPIRE', key, math.ceil(tonumber(ARGV[1])) + 1)
end
return #KEYS
"""


@dataclass(frozen=True, slots=True)
class Seat:
    key: str
    member: str
    local: bool = False  # counted in this process only (taken without Redis)


class Seats:
    """The seats this process holds, and taking and giving them back at Redis.

    Until :meth:`start` gives it Redis (a process without one, as some tests run) it counts this
    process's seats only; :attr:`shared` tells the caller which, so that it can share a cap out.
    """

    def __init__(self, *, ttl_s: float = SEAT_TTL_S, refresh_s: float = REFRESH_S) -> None:
        self._redis: aioredis.Redis | None = None
        self.ttl_s = ttl_s
        self.refresh_s = refresh_s
        self._take: AsyncScript | None = None
        self._refresh: AsyncScript | None = None
        self.held: set[Seat] = set()
        self._local: Counter[str] = Counter()
        self._task: asyncio.Task[None] | None = None
        self._gate = asyncio.Semaphore(TAKES_AT_ONCE)
        self._removals: list[tuple[Seat, asyncio.Future[None]]] = []  # given back, not yet removed at Redis
        self._remover: asyncio.Task[None] | None = None

    @property
    def shared(self) -> bool:
        """Whether the seats are counted over the whole service (else in this process only)."""
        return self._redis is not None

    async def take(self, key: str, cap: int) -> Seat | None:
        """A seat under ``key`` if fewer than ``cap`` are taken; None when full. Raises
        ``StoreUnavailable`` when Redis cannot answer (the caller refuses the connection)."""
        seat = Seat(key, os.urandom(8).hex(), local=self._take is None)
        if self._take is None:
            if self._local[key] >= cap:
                return None
            self._local[key] += 1
        else:
            async with self._gate, redis_errors(WHAT):  # a reconnecting crowd: a few commands at a time
                if not await self._take(keys=[key], args=[cap, seat.member, self.ttl_s]):
                    return None
        self.held.add(seat)
        return seat

    async def give(self, seat: Seat) -> None:
        """Give a seat back; if Redis cannot take it now, it lapses by itself after ``ttl_s``."""
        removed = self._queue(seat)
        if removed is not None:
            await asyncio.shield(removed)

    def release(self, seat: Seat) -> None:
        """:meth:`give` from code that cannot await (a stream's end callback): it stops counting here at
        once, and at Redis a moment later."""
        self._queue(seat)

    def _queue(self, seat: Seat) -> asyncio.Future[None] | None:
        """Stop holding ``seat`` here and queue its removal at Redis: the seats given back while one
        removal is in flight go in the next, one pipelined round trip (a thousand sockets closing at
        once would otherwise open a thousand Redis connections). None for a local seat: gone at once."""
        if seat not in self.held:
            return None
        self.held.discard(seat)
        if seat.local:
            self._local[seat.key] -= 1
            if self._local[seat.key] <= 0:
                del self._local[seat.key]
            return None
        return self._remove_at_redis(seat)

    def _remove_at_redis(self, seat: Seat) -> asyncio.Future[None]:
        removed = asyncio.get_running_loop().create_future()
        self._removals.append((seat, removed))
        if self._remover is None:
            self._remover = asyncio.get_running_loop().create_task(self._remove_queued())
        return removed

    async def _remove_queued(self) -> None:
        assert self._redis is not None
        try:
            while self._removals:
                batch, self._removals = self._removals, []
                try:
                    async with redis_errors(WHAT), self._redis.pipeline(transaction=False) as pipe:
                        for seat, _ in batch:
                            pipe.zrem(seat.key, seat.member)
                        await pipe.execute()
                except Exception:
                    log.warning("could not give back %d seat(s) at Redis; they lapse in %.0f s", len(batch), self.ttl_s)
                finally:  # whatever happened, no giver waits for it any longer
                    for _, removed in batch:
                        if not removed.done():
                            removed.set_result(None)
        finally:
            self._remover = None

    async def refresh(self) -> None:
        """Push the lapse of every seat held here forward by ``ttl_s``."""
        seats = [seat for seat in self.held if not seat.local]
        if seats and self._refresh is not None:
            async with self._gate, redis_errors(WHAT):
                await self._refresh(keys=[s.key for s in seats], args=[self.ttl_s, *(s.member for s in seats)])
            for seat in seats:  # given back during the refresh, which may have re-added it after its removal
                if seat not in self.held:
                    self._remove_at_redis(seat)

    def start(self, redis: aioredis.Redis) -> None:
        """Count at Redis from now on (seats taken before, locally, stay local until given back)."""
        self._redis = redis
        self._take, self._refresh = redis.register_script(_TAKE), redis.register_script(_REFRESH)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._refresh_forever())

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        for seat in list(self.held):  # connections still open as the process stops: they end with it
            self._queue(seat)
        if self._remover is not None:
            await self._remover

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            try:
                await self.refresh()
            except Exception:  # retried at the next pass; a seat lapses only after ttl_s without one
                log.warning("refreshing %d open-connection seats failed", len(self.held))
