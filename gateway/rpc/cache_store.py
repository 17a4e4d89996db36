"""The shared layer of the response cache: final node answers in Redis, seen by every replica.

``GET``/``SET ... EX`` of ``rpc-cache:{key}`` (the key and value of
:mod:`gateway.rpc.cache_rules`). Best effort throughout: a lookup or a write that fails or
takes longer than :data:`LOOKUP_TIMEOUT_S` is a miss or a lost write, logged at debug, never the
call's failure, and after a failure Redis is left alone for :data:`BACKOFF_S` so that a Redis that
is down costs the calls nothing.

The embedded Redis runs ``noeviction`` (a nonce must never be evicted), so every entry has a TTL,
and writes stop while Redis is more than :data:`MAX_MEMORY_SHARE` full (read from ``INFO memory``
at most every :data:`MEMORY_CHECK_S`): the cache may never take the room nonces and sessions need.
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
#: What a best-effort call swallows (RuntimeError: a client closed under it).
_FAILURES: tuple[type[BaseException], ...] = (*REDIS_UNAVAILABLE, RuntimeError)
LOOKUP_TIMEOUT_S = 0.1
WRITE_TIMEOUT_S = 1.0
BACKOFF_S = 5.0
MEMORY_CHECK_S = 5.0
MAX_MEMORY_SHARE = 0.5


class SharedResponses:
    def __init__(self, redis: aioredis.Redis, clock: Callable[[], float] = time.monotonic) -> None:
        self._redis = redis
        self._clock = clock
        self._quiet_until = 0.0  # after a failure, Redis is left alone until then
        self._memory_checked_at = -MEMORY_CHECK_S
        self._room = True

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

    async def set_many(self, entries: Sequence[tuple[bytes, bytes, float]]) -> None:
        """Store ``(key, value, ttl_s)`` entries; never raises."""
        if not entries or not self.available:
            return
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                if not await self._has_room():
                    return
                async with self._redis.pipeline(transaction=False) as pipe:
                    for key, value, ttl_s in entries:
                        pipe.set(PREFIX + key, value, ex=max(1, int(ttl_s)))
                    await pipe.execute()
        except _FAILURES as exc:
            self._failed("write", exc)

    async def _has_room(self) -> bool:
        now = self._clock()
        if now - self._memory_checked_at >= MEMORY_CHECK_S:
            self._memory_checked_at = now
            info = await self._redis.info("memory")
            limit = int(info.get("maxmemory", 0) or 0)
            used = int(info.get("used_memory", 0) or 0)
            self._room = limit == 0 or used < limit * MAX_MEMORY_SHARE
            if not self._room:
                log.info("response cache: Redis is %d%% full, not sharing answers for now", 100 * used // limit)
        return self._room

    def _failed(self, what: str, exc: BaseException) -> None:
        log.debug("response cache %s failed, Redis left alone for %g s: %r", what, BACKOFF_S, exc)
        self._quiet_until = self._clock() + BACKOFF_S
