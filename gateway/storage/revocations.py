"""The Redis channel on which an API-key rotation tells every replica which key hashes it revoked.

Publishing happens after the rotation's transaction commits; every replica follows the channel for
its lifetime and is told when its subscription is live, when a revocation arrives, and when the
subscription is lost (messages published meanwhile are missed, so the caller must distrust what it
cached). The caching policy built on this lives in :mod:`gateway.auth.api_keys`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

import redis.asyncio as aioredis

from gateway.storage.errors import redis_errors

log = logging.getLogger(__name__)

REVOKED_CHANNEL = "gateway:api-keys:revoked"


class RevocationChannel:
    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis

    async def publish(self, digests: Sequence[bytes]) -> None:
        """Announce revoked key hashes; raises ``StoreUnavailable`` when Redis cannot take them."""
        async with redis_errors("the key revocation channel"):
            for digest in digests:
                await self._redis.publish(REVOKED_CHANNEL, digest.hex())

    async def follow(
        self,
        on_live: Callable[[], None],
        on_revoked: Callable[[bytes | None], None],
        on_lost: Callable[[], None],
    ) -> None:
        """Follow the channel until cancelled, resubscribing with backoff after any failure.

        ``on_live`` runs at every (re)subscription, ``on_revoked`` per message (None for a message
        that is not a hex digest: the caller cannot tell which key it meant), ``on_lost`` whenever
        the subscription ends.
        """
        backoff = 0.1
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(REVOKED_CHANNEL)
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is None:
                        continue
                    kind = message.get("type")
                    if kind == "subscribe":  # also seen when redis-py reconnects and resubscribes by itself
                        on_live()
                        backoff = 0.1
                    elif kind == "message":
                        on_revoked(_digest(message.get("data")))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: the caller stops trusting its cache, then we resubscribe
                log.warning("API-key revocation channel lost (%s); retrying in %.1f s", exc, backoff)
            finally:
                on_lost()
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)


def _digest(data: object) -> bytes | None:
    text = data.decode("ascii", "replace") if isinstance(data, bytes) else str(data)
    try:
        return bytes.fromhex(text)
    except ValueError:
        log.warning("malformed API-key revocation message %r", text[:80])
        return None
