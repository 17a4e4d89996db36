"""Per-process connections: one asyncpg pool and one Redis client, opened at start-up, closed at stop.

Every wait on them is bounded: connecting (10 s), each statement (30 s) and each Redis command (5 s),
so a store that hangs becomes :class:`gateway.storage.errors.StoreUnavailable`, not a hung request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import asyncpg
import redis.asyncio as aioredis

from gateway.storage.errors import postgres_errors

CONNECT_TIMEOUT_S = 10.0
STATEMENT_TIMEOUT_S = 30.0
REDIS_TIMEOUT_S = 5.0

#: The database handle the layers above pass to storage functions (they never use it themselves).
Pool: TypeAlias = asyncpg.Pool


@dataclass
class Connections:
    db: asyncpg.Pool | None = None
    redis: aioredis.Redis | None = None

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
        if redis_url:
            client = aioredis.Redis.from_url(
                redis_url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
            )
        return cls(db=db, redis=client)

    async def close(self) -> None:
        if self.db is not None:
            await self.db.close()
        if self.redis is not None:
            await self.redis.aclose()
