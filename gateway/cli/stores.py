"""The running stack's stores, found the way ``gateway up`` sets them: the settings' URLs, else the
embedded ones of the data dir (never started here)."""

from __future__ import annotations

import getpass
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import redis.asyncio as aioredis

from gateway.app.settings import Settings
from gateway.auth.revocations import resumption_message, suspension_message
from gateway.core.upstreams import UpstreamNode
from gateway.credits.recall_messages import OPERATOR, Want, encode
from gateway.runtime.inspect import embedded_database_url, embedded_redis_url
from gateway.storage.channels import RECALL, REVOKED_KEYS, Channel


class StoreNotFound(Exception):
    """The store is not configured and the data dir's embedded one is not running."""


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    url = embedded_database_url(settings.resolved_home)
    if url is None:
        raise StoreNotFound(
            f"PostgreSQL: the embedded database of {settings.resolved_home} is not running "
            "(start the gateway with `gateway up`, or set GATEWAY_DATABASE_URL)"
        )
    return url


def redis_url(settings: Settings) -> str:
    if settings.redis_url:
        return settings.redis_url
    url = embedded_redis_url(settings.resolved_home)
    if url is None:
        raise StoreNotFound(
            f"Redis: the embedded Redis of {settings.resolved_home} is not running "
            "(start the gateway with `gateway up`, or set GATEWAY_REDIS_URL)"
        )
    return url


def chain_node(settings: Settings) -> UpstreamNode:
    """The node to read the chain from: the embedded devnode, or the pool's first node."""
    if settings.embedded_chain:
        return UpstreamNode(name="devnode", rpc_url=f"http://127.0.0.1:{settings.devnode_rpc_port}")
    return settings.pool_nodes()[0]


def default_operator() -> str:
    """``$USER``, else the login name, else empty (then the command asks for ``--operator``)."""
    try:
        return os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):
        return ""


@asynccontextmanager
async def pool(settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(database_url(settings), min_size=1, max_size=2, timeout=10)
    try:
        yield p
    finally:
        await p.close()


async def announce_status(settings: Settings, pubkey: str, suspended: bool) -> None:
    """Tell every replica that ``pubkey`` was suspended (its connections end, its leases stop) or resumed,
    on the channel of revoked credentials (:mod:`gateway.auth.revocations`). Raises when Redis cannot
    take it (then the replicas see it at their next lease and re-check, within 30 s)."""
    client = aioredis.Redis.from_url(redis_url(settings), socket_timeout=5, socket_connect_timeout=5)
    try:
        message = suspension_message(pubkey) if suspended else resumption_message(pubkey)
        await Channel(client, REVOKED_KEYS).publish([message])
    finally:
        await client.aclose()


async def announce_limits(settings: Settings, pubkey: str) -> None:
    """Make every replica take ``pubkey``'s new limits now, in either direction: a replica reads them from
    its credit lease, so they are asked to give back the account's leases (the ``RECALL`` channel's
    ``want``, :mod:`gateway.credits.recall`), and the account's next call there takes a new lease with the
    new limits. Raises when Redis cannot take it (then each applies them at its next lease)."""
    client = aioredis.Redis.from_url(redis_url(settings), socket_timeout=5, socket_connect_timeout=5)
    try:
        await Channel(client, RECALL).publish([encode(Want(OPERATOR, pubkey))])
    finally:
        await client.aclose()
