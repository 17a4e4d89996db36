"""The set of (pubkey, nonce) pairs already accepted, shared by every replica through Redis.

``SET nonce:{pubkey}:{nonce} 1 NX EX 180``: one atomic round trip that both checks and records, so
two replicas racing on the same replay cannot both win. Redis (append-only file) keeps the set across
gateway restarts.

Why 180 s: a signed request passes the timestamp check while server time is within ±60 s of its
timestamp, i.e. during a 120 s span. A nonce first accepted at the start of that span must still be
remembered at its end: 120 s. Another 60 s covers clock skew between replicas (each checks the window
against its own clock). After that the pair may be forgotten: a replay of the old request would fail
the timestamp window anyway, so the set stays bounded to about three minutes of traffic.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from gateway.storage.errors import redis_errors

NONCE_TTL_S = 180


class NonceStore:
    def __init__(self, redis: aioredis.Redis, ttl_s: int = NONCE_TTL_S) -> None:
        self._redis = redis
        self.ttl_s = ttl_s

    async def claim(self, pubkey: str, nonce: str) -> bool:
        """Record the pair; False if it was already recorded (a replay).

        Fails closed: if Redis cannot be reached this raises ``StoreUnavailable`` (the request gets 503),
        because accepting it unrecorded would open a replay window.
        """
        async with redis_errors("the nonce store"):
            created = await self._redis.set(f"nonce:{pubkey}:{nonce}", b"1", nx=True, ex=self.ttl_s)
        return bool(created)
