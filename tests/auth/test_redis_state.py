"""The Redis side of replay protection on a private redis-server: a memory bound that fails closed
instead of evicting nonces, no replay window after a restart that lost writes, and concurrent claims
sent together yet decided one by one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.auth.store.nonces import Claim, NonceStore
from gateway.auth.store.sessions import SessionStore
from gateway.runtime.embedded import EmbeddedRedis
from gateway.storage.connections import Connections, redis_eviction_policy
from gateway.storage.errors import StoreUnavailable


@contextlib.asynccontextmanager
async def private_redis(tmp_path: Path, max_memory_mb: int = 256) -> AsyncIterator[tuple[EmbeddedRedis, Connections]]:
    """A redis-server of the test's own and the gateway's connections to it."""
    server = EmbeddedRedis(tmp_path, max_memory_mb=max_memory_mb)
    conn = await Connections.open(None, server.start())
    assert conn.redis is not None
    try:
        yield server, conn
    finally:
        await conn.close()
        server.stop()


async def test_a_full_redis_refuses_new_keys_and_evicts_no_nonce(tmp_path: Path) -> None:
    async with private_redis(tmp_path, max_memory_mb=3) as (_, conn):
        assert conn.redis is not None
        assert await redis_eviction_policy(conn.redis) == "noeviction"
        nonces = NonceStore(conn.redis, conn.redis_connects)
        signed_at = int(time.time())
        assert await nonces.claim("early", "n", signed_at) is Claim.ACCEPTED
        sessions = SessionStore(conn.redis)
        with pytest.raises(StoreUnavailable, match="the session store"):
            for _ in range(100_000):  # an unauthenticated flood of challenges, until Redis is full
                await sessions.issue_challenge(os.urandom(16).hex())
        with pytest.raises(StoreUnavailable, match="the nonce store"):  # fails closed: 503, never unrecorded
            await nonces.claim("late", "n", signed_at)
        late = [nonces.claim("late", f"n{i}", signed_at) for i in range(3)]  # a pass's claims: one script call
        refused = await asyncio.gather(*late, return_exceptions=True)
        assert all(isinstance(each, StoreUnavailable) for each in refused), refused
        assert await conn.redis.exists(*(f"nonce:late:n{i}" for i in range(3))) == 0  # all or none recorded
        assert await conn.redis.exists("nonce:early:n") == 1  # nothing was evicted to make room


async def test_a_restart_that_lost_a_nonce_does_not_reopen_its_replay(tmp_path: Path) -> None:
    async with private_redis(tmp_path) as (server, conn):
        assert conn.redis is not None
        nonces = NonceStore(conn.redis, conn.redis_connects)
        signed_at = int(time.time()) - 30  # a client whose clock lags: fine with the instance first met
        assert await nonces.claim("pk", "n1", signed_at) is Claim.ACCEPTED

        await asyncio.to_thread(server.stop)
        await asyncio.to_thread(server.start)
        await conn.redis.delete("nonce:pk:n1")  # what a crash can lose: the last second of writes
        assert await nonces.claim("pk", "n1", signed_at) is Claim.BEFORE_RESTART  # the replay is refused
        assert nonces.started_at >= time.time() - 5
        assert await nonces.claim("pk", "n2", int(time.time()) + 2) is Claim.ACCEPTED  # signed afterwards: fine


async def test_claims_of_one_loop_pass_share_a_round_trip_and_are_decided_one_by_one(tmp_path: Path) -> None:
    async with private_redis(tmp_path) as (_, conn):
        assert conn.redis is not None
        nonces = NonceStore(conn.redis, conn.redis_connects)
        signed_at = int(time.time())
        for warm in ("w1", "w2"):  # the store looks at the instance until no new connection opened since
            await nonces.claim("pk", warm, signed_at)
        opened = conn.redis_connects()
        pairs = [("pk", f"n{i}") for i in range(56)] + [("pk", "twice")] * 8 + [("other", "n0")]
        claims = await asyncio.gather(*(nonces.claim(pk, nonce, signed_at) for pk, nonce in pairs))
        assert claims.count(Claim.REPLAYED) == 7  # the same pair 8 times in one command: accepted once
        assert claims.count(Claim.ACCEPTED) == len(pairs) - 7
        assert conn.redis_connects() - opened <= 1  # one command, not a connection per claim
        assert await nonces.claim("pk", "n3", signed_at) is Claim.REPLAYED  # recorded, in the next pass too


async def test_a_pass_of_claims_after_redis_forgot_the_script_is_still_decided(tmp_path: Path) -> None:
    """A restarted Redis (or SCRIPT FLUSH) no longer knows the claims' script: the call loads it again."""
    async with private_redis(tmp_path) as (_, conn):
        assert conn.redis is not None
        nonces = NonceStore(conn.redis, conn.redis_connects)
        signed_at = int(time.time())
        for warm in ("w1", "w2"):  # until no new connection opened: a claim that first asks INFO may lose its pass
            await nonces.claim("pk", warm, signed_at)
        first = await asyncio.gather(*(nonces.claim("pk", f"a{i}", signed_at) for i in range(4)))
        await conn.redis.script_flush()
        again = await asyncio.gather(*(nonces.claim("pk", nonce, signed_at) for nonce in ("a0", "b0", "b0")))
        assert first == [Claim.ACCEPTED] * 4
        assert again == [Claim.REPLAYED, Claim.ACCEPTED, Claim.REPLAYED]
        assert await conn.redis.ttl("nonce:pk:b0") > 170  # recorded with the store's expiry
