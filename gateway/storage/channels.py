"""Redis pub/sub channels on which one replica tells all the others that something they cached changed.

    REVOKED_KEYS  an API-key rotation revoked these key hashes (hex)   -> gateway.auth.api_keys
    CREDITED      a deposit credited this account, or its first API     -> gateway.credits.notices (the meter,
                  key created it (base58 public key)                       auth's "no account" cache)
    RECALL        credits leased elsewhere wanted back, and given back     -> gateway.credits.recall

Publishing happens after the change commits; every replica follows the channels for its lifetime and
is told when its subscription is live, when a message arrives, and when the subscription is lost
(messages published meanwhile are missed, so the follower must distrust what it cached).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

import redis.asyncio as aioredis

from gateway.storage.errors import redis_errors

log = logging.getLogger(__name__)

REVOKED_KEYS = "gateway:api-keys:revoked"
CREDITED = "gateway:credits:credited"
RECALL = "gateway:credits:recall"


class Channel:
    def __init__(self, redis: aioredis.Redis, name: str) -> None:
        self._redis = redis
        self.name = name

    async def publish(self, messages: Sequence[str]) -> None:
        """Announce ``messages``; raises ``StoreUnavailable`` when Redis cannot take them."""
        async with redis_errors(f"the {self.name} channel"):
            for message in messages:
                await self._redis.publish(self.name, message)

    async def follow(
        self,
        on_live: Callable[[], None],
        on_message: Callable[[str], None],
        on_lost: Callable[[], None],
    ) -> None:
        """Follow the channel until cancelled, resubscribing with backoff after any failure.

        ``on_live`` runs at every (re)subscription, ``on_message`` per message, ``on_lost`` whenever
        the subscription ends.
        """
        backoff = 0.1
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(self.name)
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is None:
                        continue
                    kind = message.get("type")
                    if kind == "subscribe":  # also seen when redis-py reconnects and resubscribes by itself
                        on_live()
                        backoff = 0.1
                    elif kind == "message":
                        data = message.get("data")
                        on_message(data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: the caller stops trusting its cache, then we resubscribe
                log.warning("channel %s lost (%s); retrying in %.1f s", self.name, exc, backoff)
            finally:
                on_lost()
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
