"""The webhook tests' fixtures: a gateway in this process in front of the session's devnode, with the
real PostgreSQL and Redis and ``webhook_allow_private`` on (test receivers listen on 127.0.0.1), and
account holders (with credits) calling ``/webhooks``; a database of each module's own for tests that
run dispatchers (``delivery_dsn``, ``pool``), and a real receiver."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest
from aiohttp import web

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway_client import WalletSigner
from tests.auth.helpers import Answer, create_api_key, request
from tests.credits.helpers import fund
from tests.databases import drop_database, fresh_database
from tests.sending.conftest import sending_settings
from tests.support import RunningGateway, serve_gateway
from tests.webhooks.support import Receiver

__all__ = [
    "WebhookClient",
    "delivery_dsn",
    "gateway",
    "gateway_here",
    "http",
    "other",
    "owner",
    "pool",
    "receiver",
    "webhook_settings",
]
#: Credits a new account holder starts with: creating a webhook needs a positive balance.
STARTING_CREDITS = 10_000


def webhook_settings(home: Path, database_url: str, redis_url: str, devnode: Devnode, **extra: Any) -> Settings:
    """The tests' gateway settings: the devnode (PubSub included), private receivers allowed."""
    extra.setdefault("webhook_allow_private", True)
    return sending_settings(home, database_url, redis_url, devnode.rpc_url, upstream_ws_url=devnode.ws_url, **extra)


@pytest.fixture
async def gateway(tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(webhook_settings(tmp_path, database_url, redis_url, devnode)) as gw:
        yield gw


@pytest.fixture
async def gateway_here(
    tmp_path: Path, delivery_dsn: str, redis_url: str, devnode: Devnode
) -> AsyncIterator[RunningGateway]:
    """A gateway on the module's own database (``delivery_dsn``): its routes and the test's dispatchers
    or watches see the same webhooks."""
    async with serve_gateway(webhook_settings(tmp_path, delivery_dsn, redis_url, devnode)) as gw:
        yield gw


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


class WebhookClient:
    """An account holder (a new wallet with an API key, so an account) calling the webhook routes."""

    def __init__(self, http: aiohttp.ClientSession, url: str, signer: WalletSigner, api_key: str) -> None:
        self.http = http
        self.url = url
        self.signer = signer
        self.pubkey = signer.pubkey
        self.headers = {"X-Api-Key": api_key}

    @classmethod
    async def new(
        cls, http: aiohttp.ClientSession, gateway: RunningGateway, credits: int = STARTING_CREDITS
    ) -> WebhookClient:
        """A new account holder with ``credits`` deposited (0: none)."""
        signer = WalletSigner(os.urandom(32))
        client = cls(http, gateway.url, signer, await create_api_key(http, signer, gateway.url))
        if credits:
            assert gateway.app.conn.db is not None
            await fund(gateway.app.conn.db, client.pubkey, credits)
        return client

    async def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Answer:
        data = raw if raw is not None else b"" if body is None else orjson.dumps(body)
        return await request(self.http, method, self.url + path, body=data, headers=self.headers)

    async def create(self, **fields: Any) -> Answer:
        return await self.call("POST", "/webhooks", fields)

    async def created(self, **fields: Any) -> dict[str, Any]:
        """Create, expecting 201; the answer's document."""
        answer = await self.create(**fields)
        assert answer.status == 201, answer
        document: dict[str, Any] = answer.json
        return document

    async def listed(self) -> list[dict[str, Any]]:
        answer = await self.call("GET", "/webhooks")
        assert answer.status == 200, answer
        hooks: list[dict[str, Any]] = answer.json["webhooks"]
        return hooks

    async def action(self, webhook_id: int | str, action: str, body: Any = None) -> Answer:
        """``POST /webhooks/{id}/{action}`` (rotate-secret, replay, resume) with ``{}`` by default."""
        return await self.call("POST", f"/webhooks/{webhook_id}/{action}", {} if body is None else body)

    async def delete(self, webhook_id: int | str) -> Answer:
        return await self.call("DELETE", f"/webhooks/{webhook_id}")


@pytest.fixture
async def owner(gateway: RunningGateway, http: aiohttp.ClientSession) -> WebhookClient:
    return await WebhookClient.new(http, gateway)


@pytest.fixture
async def other(gateway: RunningGateway, http: aiohttp.ClientSession) -> WebhookClient:
    """A second account holder of the same gateway."""
    return await WebhookClient.new(http, gateway)


# -- a database of the module's own, for tests that run dispatchers -----------------------------------


@pytest.fixture(scope="module")
async def delivery_dsn(database_url: str) -> AsyncIterator[str]:
    dsn = await fresh_database(database_url, "delivery")
    yield dsn
    await drop_database(dsn)


@pytest.fixture
async def pool(delivery_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(delivery_dsn, min_size=1, max_size=8)
    # What an earlier test left waiting must not be delivered by this one's dispatchers.
    await pool.execute("UPDATE delivery_jobs SET status = 'cancelled' WHERE status IN ('pending', 'delivering')")
    yield pool
    await pool.close()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    app = web.Application()
    app.router.add_post("/hook", rec.handle)
    app.router.add_post("/elsewhere", rec.elsewhere)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    rec.url = f"http://127.0.0.1:{port}/hook"
    yield rec
    for gate in rec.hold.values():
        gate.set()
    await runner.cleanup()
