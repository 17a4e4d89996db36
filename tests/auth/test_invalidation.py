"""The API-key cache is trusted only while its invalidation channel is live (a private redis-server)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import redis.asyncio as aioredis

from gateway.auth.api_keys import REVOKED_CHANNEL, ApiKeyStore, generate_api_key
from gateway.runtime.embedded import EmbeddedRedis

DIGEST = b"\x01" * 32


async def _until(condition: Any, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def test_cache_goes_dark_while_invalidations_cannot_arrive(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path)
    client = aioredis.Redis.from_url(server.start(), socket_timeout=2.0)
    store = ApiKeyStore(cast(Any, None), client, b"s" * 32)  # the database is not reached in this test
    cache = store._cache
    try:
        await store.start()
        assert store.cache_live
        cache.put(DIGEST, "pubkey", 60)
        await client.publish(REVOKED_CHANNEL, DIGEST.hex())
        await _until(lambda: len(cache) == 0)  # a published revocation evicts

        cache.put(DIGEST, "pubkey", 60)
        server.stop()
        await _until(lambda: not store.cache_live)
        assert len(cache) == 0  # messages may be missed while down: nothing cached survives

        server.start()
        await _until(lambda: store.cache_live)  # resubscribed: the cache may be used again
    finally:
        await store.stop()
        await client.aclose()
        server.stop()


async def test_the_cache_read_without_await_follows_the_same_rules(tmp_path: Path) -> None:
    """``cached`` answers only a live hit for an active key; everything else is left to ``lookup``."""
    server = EmbeddedRedis(tmp_path)
    client = aioredis.Redis.from_url(server.start(), socket_timeout=2.0)
    store = ApiKeyStore(cast(Any, None), client, b"s" * 32)  # the database is not reached in this test
    key = generate_api_key()
    try:
        await store.start()
        assert store.cached(key) is None  # never seen
        digest = store._remember_digest(key)
        assert store.cached(key) is None  # seen, not cached
        store._cache.put(digest, None, 60)
        assert store.cached(key) is None  # cached as "no such key"
        store._cache.put(digest, "owner", 60)
        assert store.cached(key) == "owner"
        await client.publish(REVOKED_CHANNEL, digest.hex())
        await _until(lambda: store.cached(key) is None)  # a revocation is seen at once

        server.stop()
        await _until(lambda: not store.cache_live)
        store._cache.put(digest, "owner", 60)
        assert store.cached(key) is None  # never trusted while invalidations cannot arrive
    finally:
        await store.stop()
        await client.aclose()
        server.stop()
