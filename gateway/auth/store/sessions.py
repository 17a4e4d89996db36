"""Session challenges and tokens, in Redis with TTLs so every replica sees them and nothing leaks.

    challenge:{pubkey}:{challenge}  -> 1        PX 300 s, removed by GETDEL on the verify that uses it
    session:{sha256(token)}         -> pubkey   PX 3600 s, slid by GETEX on every use, DEL on logout

The challenge key holds the public key, so only a verify that already proved the signature for that
key can consume it: nobody can burn somebody else's challenge. Tokens are stored as their SHA-256 so
that a Redis dump does not hand out live sessions; the token has 256 random bits, so an unkeyed hash
is enough.
"""

from __future__ import annotations

import hashlib
import math
import secrets

import redis.asyncio as aioredis

from gateway.storage.errors import redis_errors

WHAT = "the session store"
CHALLENGE_TTL_MS = 300_000
TOKEN_TTL_MS = 3_600_000


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


class SessionStore:
    def __init__(
        self, redis: aioredis.Redis, challenge_ttl_ms: int = CHALLENGE_TTL_MS, token_ttl_ms: int = TOKEN_TTL_MS
    ) -> None:
        self._redis = redis
        self.challenge_ttl_ms = challenge_ttl_ms
        self.token_ttl_ms = token_ttl_ms

    @property
    def challenge_expires_in(self) -> int:
        return math.ceil(self.challenge_ttl_ms / 1000)

    @property
    def token_expires_in(self) -> int:
        return math.ceil(self.token_ttl_ms / 1000)

    async def issue_challenge(self, pubkey: str) -> str:
        challenge = secrets.token_hex(32)
        async with redis_errors(WHAT):
            await self._redis.set(f"challenge:{pubkey}:{challenge}", b"1", px=self.challenge_ttl_ms)
        return challenge

    async def consume_challenge(self, pubkey: str, challenge: str) -> bool:
        """True once for a live challenge issued to ``pubkey``; False if expired, used or never issued."""
        async with redis_errors(WHAT):
            found = await self._redis.getdel(f"challenge:{pubkey}:{challenge}")
        return found is not None

    async def issue_token(self, pubkey: str) -> str:
        token = secrets.token_hex(32)
        async with redis_errors(WHAT):
            await self._redis.set(f"session:{token_digest(token)}", pubkey.encode(), px=self.token_ttl_ms)
        return token

    async def resolve(self, token: str) -> str | None:
        """The token's public key, sliding its TTL in the same round trip (GETEX); None if unknown."""
        async with redis_errors(WHAT):
            value = await self._redis.getex(f"session:{token_digest(token)}", px=self.token_ttl_ms)
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    async def live(self, digest: str) -> bool:
        """Whether the session whose token has this digest is still valid (its TTL is not slid)."""
        async with redis_errors(WHAT):
            return bool(await self._redis.exists(f"session:{digest}"))

    async def revoke(self, token: str) -> bool:
        async with redis_errors(WHAT):
            removed = await self._redis.delete(f"session:{token_digest(token)}")
        return bool(removed)
