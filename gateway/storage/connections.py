"""Per-process connections: one asyncpg pool and one Redis client, opened at start-up, closed at stop.

Every wait on them is bounded: connecting (10 s), each statement (30 s) and each Redis command (5 s),
so a store that hangs becomes :class:`gateway.storage.errors.StoreUnavailable`, not a hung request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import asyncpg
import redis.asyncio as aioredis

from gateway.base.config import ServiceSettings
from gateway.storage.errors import REDIS_UNAVAILABLE, StoreUnavailable, postgres_errors

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
STATEMENT_TIMEOUT_S = 30.0
REDIS_TIMEOUT_S = 5.0

#: The database handle the layers above pass to storage functions (they never use it themselves).
Pool: TypeAlias = asyncpg.Pool


RETRY_S = 2.0


@dataclass
class ConnectCounter:
    """Counts the connections a Redis client opens: each new one may be to a restarted Redis."""

    count: int = 0

    async def on_connect(self, connection: Any) -> None:
        await connection.on_connect()  # what redis-py does when no callback is given
        self.count += 1

    def __call__(self) -> int:
        return self.count


@dataclass
class Connections:
    db: asyncpg.Pool | None = None
    redis: aioredis.Redis | None = None
    redis_connects: ConnectCounter = field(default_factory=ConnectCounter)

    @classmethod
    async def open(cls, database_url: str | None, redis_url: str | None, pool_size: int = 10) -> Connections:
        db = None
        if database_url:
            async with postgres_errors("the database"):
                db = await asyncpg.create_pool(
                    database_url,
                    min_size=1,
                    max_size=pool_size,
                    timeout=CONNECT_TIMEOUT_S,
                    command_timeout=STATEMENT_TIMEOUT_S,
                )
        client = None
        counter = ConnectCounter()
        if redis_url:
            client = aioredis.Redis.from_url(
                redis_url,
                socket_timeout=REDIS_TIMEOUT_S,
                socket_connect_timeout=REDIS_TIMEOUT_S,
                redis_connect_func=counter.on_connect,
            )
        return cls(db=db, redis=client, redis_connects=counter)

    async def close(self) -> None:
        if self.db is not None:
            await self.db.close()
        if self.redis is not None:
            await self.redis.aclose()


async def redis_eviction_policy(redis: aioredis.Redis) -> str | None:
    """Redis's ``maxmemory-policy``, or None when it cannot be read (managed Redis often forbids CONFIG).
    Anything but ``noeviction`` can evict a nonce before its time and reopen a replay window."""
    try:
        config: dict[Any, Any] = await redis.config_get("maxmemory-policy")
    except REDIS_UNAVAILABLE:
        return None
    for name, value in config.items():  # names and values are bytes unless the client decodes
        if (name.decode() if isinstance(name, bytes) else name) == "maxmemory-policy":
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


async def warn_unless_noeviction(redis: aioredis.Redis) -> None:
    policy = await redis_eviction_policy(redis)
    if policy is None:
        log.warning("cannot read Redis's maxmemory-policy; it must be noeviction, or nonces may be evicted early")
    elif policy != "noeviction":
        log.error("Redis maxmemory-policy is %s: set noeviction, or nonces may be evicted early (replays)", policy)


async def connect_when_up(
    settings: ServiceSettings, stop: asyncio.Event, who: str, redis: bool, pool_size: int = 2
) -> Connections | None:
    """Open a small pool (and Redis when ``redis``), retrying while the database is not up yet;
    None when stopped first."""
    while not stop.is_set():
        try:
            redis_url = settings.redis_url if redis else None
            return await Connections.open(settings.database_url, redis_url, pool_size=pool_size)
        except StoreUnavailable as exc:
            log.warning("%s: %s", who, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RETRY_S)
    return None
