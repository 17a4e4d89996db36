"""The API-key cache is trusted only while its invalidation channel is live (a private redis-server,
the session's PostgreSQL)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis

from gateway.auth.api_keys import ApiKeyStore, hash_api_key
from gateway.auth.store.accounts import ApiKeyRows
from gateway.runtime.embedded import EmbeddedRedis
from gateway.storage.channels import REVOKED_KEYS, Channel
from tests.credits.helpers import new_pubkey


async def _until(condition: Any, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


@dataclass
class Keys:
    store: ApiKeyStore
    channel: Channel
    server: EmbeddedRedis
    secret: bytes


@pytest.fixture
async def keys(tmp_path: Path, database_url: str) -> AsyncIterator[Keys]:
    server = EmbeddedRedis(tmp_path)
    client = aioredis.Redis.from_url(server.start(), socket_timeout=2.0)
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    secret = os.urandom(32)
    channel = Channel(client, REVOKED_KEYS)
    store = ApiKeyStore(ApiKeyRows(pool), channel, secret)
    try:
        await store.start()
        yield Keys(store, channel, server, secret)
    finally:
        await store.stop()
        await client.aclose()
        await pool.close()
        server.stop()


async def test_a_published_revocation_evicts_at_once(keys: Keys) -> None:
    pubkey = new_pubkey()
    key = await keys.store.rotate(pubkey, None)
    assert keys.store.cache_live
    assert keys.store.cached(key) is None  # never looked up here yet
    assert await keys.store.lookup(key) == pubkey
    assert keys.store.cached(key) == pubkey  # now served without an await

    await keys.channel.publish([hash_api_key(keys.secret, key).hex()])  # as another replica's rotation does
    await _until(lambda: keys.store.cached(key) is None)


async def test_cache_goes_dark_while_invalidations_cannot_arrive(keys: Keys) -> None:
    pubkey = new_pubkey()
    key = await keys.store.rotate(pubkey, None)
    assert await keys.store.lookup(key) == pubkey and keys.store.cached(key) == pubkey

    keys.server.stop()
    await _until(lambda: not keys.store.cache_live)
    assert keys.store.cached(key) is None  # messages may be missed while down: nothing cached is trusted
    assert await keys.store.lookup(key) == pubkey  # the database still answers...
    assert keys.store.cached(key) is None  # ...but its answer is not cached while dark

    keys.server.start()
    await _until(lambda: keys.store.cache_live)  # resubscribed: the cache may be used again
    assert await keys.store.lookup(key) == pubkey
    assert keys.store.cached(key) == pubkey


async def test_a_rotation_refuses_the_previous_key(keys: Keys) -> None:
    pubkey = new_pubkey()
    old = await keys.store.rotate(pubkey, None)
    assert await keys.store.lookup(old) == pubkey
    new = await keys.store.rotate(pubkey, None)
    assert keys.store.cached(old) is None and await keys.store.lookup(old) is None
    assert await keys.store.lookup(new) == pubkey
