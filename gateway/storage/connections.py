"""Per-replica connections: one asyncpg pool and one Redis client, opened at start-up, closed at stop."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import redis.asyncio as aioredis


@dataclass
class Connections:
    db: asyncpg.Pool | None = None
    redis: aioredis.Redis | None = None

    @classmethod
    async def open(cls, database_url: str | None, redis_url: str | None, pool_size: int = 10) -> Connections:
        db = await asyncpg.create_pool(database_url, min_size=1, max_size=pool_size) if database_url else None
        client = aioredis.Redis.from_url(redis_url, socket_timeout=5.0) if redis_url else None
        return cls(db=db, redis=client)

    async def close(self) -> None:
        if self.db is not None:
            await self.db.close()
        if self.redis is not None:
            await self.redis.aclose()
