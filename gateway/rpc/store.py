"""The shared layer of the response cache: final node answers in Redis, seen by every replica.

``GET``/``SET ... EX`` of ``rpc-cache:{key}`` (the key and value of
:mod:`gateway.rpc.cache_rules`). Best effort throughout: a lookup or a write that fails or
takes longer than :data:`LOOKUP_TIMEOUT_S` is a miss or a lost write, logged at debug, never the
call's failure, and after a failure Redis is left alone for :data:`BACKOFF_S` so that a Redis that
is down costs the calls nothing.

The embedded Redis runs ``noeviction`` (a nonce must never be evicted), so the cache may never take
the room nonces, sessions and seats need. Two bounds keep it out of their way:

- a byte budget the store itself enforces, atomically at Redis (one script per write): each entry
  costs its key, value and :data:`ENTRY_OVERHEAD`, counted in the hour window it was written in.
  Every entry lives at most :data:`WINDOW_S` (its TTL), so what is alive is at most what this window
  and the previous one counted, and a write that would take the two past the budget is skipped.
  The budget is :data:`BUDGET_SHARE` of Redis's ``maxmemory`` (:data:`DEFAULT_BUDGET_BYTES` when it has
  none), so a caller who fills it only stops the cache from sharing answers until the window turns;
- and no write while Redis is more than :data:`MAX_MEMORY_SHARE` full, whatever filled it (read
  from ``INFO memory`` at most every :data:`MEMORY_CHECK_S`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import redis.asyncio as aioredis

from gateway.storage.errors import REDIS_UNAVAILABLE

log = logging.getLogger(__name__)

PREFIX = b"rpc-cache:"
BUDGET_PREFIX = b"rpc-cache-budget:"
#: What a best-effort call swallows (RuntimeError: a client closed under it).
_FAILURES: tuple[type[BaseException], ...] = (*REDIS_UNAVAILABLE, RuntimeError)
LOOKUP_TIMEOUT_S = 0.1
WRITE_TIMEOUT_S = 1.0
BACKOFF_S = 5.0
MEMORY_CHECK_S = 5.0
MAX_MEMORY_SHARE = 0.5
#: Every entry's TTL is at most this (cache_rules.FINAL_TTL_S), the length of a budget window.
WINDOW_S = 3600
BUDGET_SHARE = 0.25
DEFAULT_BUDGET_BYTES = 64 << 20
#: Redis's own memory per key beyond its name and value (dict entry, object headers, expiry), rounded up.
ENTRY_OVERHEAD = 96

# KEYS: this window's counter, the previous one's, then the entries' keys. ARGV: the budget, the
# counters' TTL, the write's cost, then each entry's TTL and value. 1: written; 0: over the budget.
_WRITE = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0') + tonumber(redis.call('GET', KEYS[2]) or '0')
if used + tonumber(ARGV[3]) > tonumber(ARGV[1]) then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[2])
for i = 3, #KEYS do
  redis.call('SET', KEYS[i], ARGV[2 * i - 1], 'EX', ARGV[2 * i - 2])
end
return 1
"""


class SharedResponses:
    """Args:
    budget_bytes: the byte budget of the cache's entries; None: :data:`BUDGET_SHARE` of ``maxmemory``.
    """

    def __init__(
        self,
        redis: aioredis.Redis,
        clock: Callable[[], float] = time.monotonic,
        budget_bytes: int | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis
        self._clock = clock
        self._wall_clock = wall_clock
        self.budget_bytes = budget_bytes
        self._write = redis.register_script(_WRITE)
        self._quiet_until = 0.0  # after a failure, Redis is left alone until then
        self._memory_checked_at = -MEMORY_CHECK_S
        self._room = True
        self._derived_budget = DEFAULT_BUDGET_BYTES

    @property
    def budget(self) -> int:
        """The byte budget of the cache's entries in Redis (module docstring)."""
        return self.budget_bytes or self._derived_budget

    @property
    def available(self) -> bool:
        return self._clock() >= self._quiet_until

    async def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of ``keys`` (None where absent); all None when Redis fails or is slow."""
        if not keys or not self.available:
            return [None] * len(keys)
        try:
            async with asyncio.timeout(LOOKUP_TIMEOUT_S):
                values = await self._redis.mget([PREFIX + k for k in keys])
        except _FAILURES as exc:
            self._failed("lookup", exc)
            return [None] * len(keys)
        return [v if isinstance(v, bytes) else None for v in values]

    async def set_many(self, entries: Sequence[tuple[bytes, bytes, float]]) -> bool:
        """Store ``(key, value, ttl_s)`` entries, all or none within the budget; never raises. Whether
        they were written."""
        if not entries or not self.available:
            return False
        window = int(self._wall_clock()) // WINDOW_S
        counters = [BUDGET_PREFIX + str(n).encode() for n in (window, window - 1)]
        cost = sum(len(PREFIX) + len(key) + len(value) + ENTRY_OVERHEAD for key, value, _ in entries)
        args: list[bytes | int] = []
        for _, value, ttl_s in entries:
            args += [min(WINDOW_S, max(1, int(ttl_s))), value]
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                if not await self._has_room():
                    return False
                keys = [*counters, *(PREFIX + key for key, _, _ in entries)]
                written = await self._write(keys=keys, args=[self.budget, 2 * WINDOW_S, cost, *args])
        except _FAILURES as exc:
            self._failed("write", exc)
            return False
        if not written:
            log.info("response cache: its Redis budget of %d bytes is spent, not sharing answers now", self.budget)
        return bool(written)

    async def _has_room(self) -> bool:
        now = self._clock()
        if now - self._memory_checked_at >= MEMORY_CHECK_S:
            self._memory_checked_at = now
            info = await self._redis.info("memory")
            limit = int(info.get("maxmemory", 0) or 0)
            used = int(info.get("used_memory", 0) or 0)
            self._room = limit == 0 or used < limit * MAX_MEMORY_SHARE
            self._derived_budget = int(limit * BUDGET_SHARE) if limit else DEFAULT_BUDGET_BYTES
            if not self._room:
                log.info("response cache: Redis is %d%% full, not sharing answers for now", 100 * used // limit)
        return self._room

    def _failed(self, what: str, exc: BaseException) -> None:
        log.debug("response cache %s failed, Redis left alone for %g s: %r", what, BACKOFF_S, exc)
        self._quiet_until = self._clock() + BACKOFF_S
