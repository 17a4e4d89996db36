"""The cluster's record of its service keys in Redis, so a process serving other addresses is visible.

``gateway up`` writes the record (:func:`record_cluster_keys`) before it starts anything, with the
addresses it hands every process. Each serving process compares its own with it at start-up
(:func:`compare_cluster_keys`; it writes the record when there is none, e.g. replicas started by hand)
and ``/health`` shows the difference as ``keys.mismatch``.
"""

from __future__ import annotations

import json
import logging

import redis.asyncio as aioredis

from gateway.storage.errors import REDIS_UNAVAILABLE

log = logging.getLogger(__name__)

CLUSTER_KEYS = "gateway:service-keys"

Addresses = dict[str, str | None]  # deposit_address, fee_payer_address


async def record_cluster_keys(redis: aioredis.Redis, addresses: Addresses) -> None:
    """The addresses every process of this cluster serves (``gateway up``'s, replacing any earlier record)."""
    await redis.set(CLUSTER_KEYS, json.dumps(addresses, sort_keys=True))


async def record_cluster_keys_at(redis_url: str, addresses: Addresses) -> None:
    client = aioredis.Redis.from_url(redis_url)
    try:
        await record_cluster_keys(client, addresses)
    finally:
        await client.aclose()


async def compare_cluster_keys(redis: aioredis.Redis, mine: Addresses) -> str | None:
    """How this process's addresses differ from the cluster's record, None when they agree (a message
    too when the record cannot be read). With no record yet, this process's addresses become it."""
    try:
        await redis.set(CLUSTER_KEYS, json.dumps(mine, sort_keys=True), nx=True)
        raw = await redis.get(CLUSTER_KEYS)
    except REDIS_UNAVAILABLE as exc:
        log.warning("cannot compare the service keys with the cluster's record: %s", exc)
        return f"not compared: the cluster's record in Redis could not be read ({exc})"
    try:
        theirs = json.loads(raw) if raw is not None else {}
    except ValueError:
        theirs = {}
    if not isinstance(theirs, dict):
        theirs = {}
    differences = [
        f"{name} is {mine[name]} here but {theirs.get(name)} in the cluster's record"
        for name in sorted(mine)
        if mine[name] != theirs.get(name)
    ]
    if differences:
        message = "; ".join(differences) + " (written by gateway up, or by the first process to start)"
        log.error("service keys disagree with the cluster: %s", message)
        return message
    return None
