"""A gateway in this process in front of the session's devnode (its block engine and TPU included),
a paying caller, and a funded payer on the chain; and a gateway in front of a relay to the devnode that
can fail on purpose (the one stand-in for a failing node: no real node fails on demand offline)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web
from solders.keypair import Keypair

from gateway.app.settings import Settings
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.chain import airdrop
from tests.node.test_upstream_failures import Relay
from tests.sending.helpers import Caller
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings

#: What the read tests' folders (bulk, rpc, fees, history) take from here with a star import.
__all__ = ["FailingRelay", "caller", "caller_at", "charged", "gateway", "payer", "relay", "relayed_caller"]


def sending_settings(home: Path, database_url: str, redis_url: str, devnode_url: str, **extra: object) -> Settings:
    return Settings(
        **service_key_settings(home),
        home=home,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode_url,
        block_engine_url=f"{devnode_url}/api/v1",
        ip_limits=TEST_IP_LIMITS,
        devnode_slot_ms=100,
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
async def gateway(tmp_path: Path, database_url: str, redis_url: str, devnode_url: str) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(sending_settings(tmp_path, database_url, redis_url, devnode_url)) as gw:
        yield gw


@pytest.fixture
async def caller(gateway: RunningGateway, db: asyncpg.Connection) -> AsyncIterator[Caller]:
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gateway.url)
        await create_account(db, signer.pubkey)
        yield Caller(http, gateway.url, signer, key)


@pytest.fixture
async def payer(devnode_url: str) -> Keypair:
    keypair = Keypair()
    await airdrop(devnode_url, keypair.pubkey(), 5_000_000_000)
    return keypair


async def charged(caller: Caller, method: str, params: list[Any]) -> tuple[dict[str, Any], int]:
    """(The JSON-RPC answer, the credits it cost), from X-Credits-Remaining around it."""
    _, _, before = await caller.rpc("getSlot", [])
    _, doc, after = await caller.rpc(method, params)
    return doc, before - after


@asynccontextmanager
async def caller_at(node_url: str, home: Path, database_url: str, redis_url: str, db: Any) -> AsyncIterator[Caller]:
    """A gateway in front of ``node_url``, and a paying caller of it."""
    settings = sending_settings(home, database_url, redis_url, node_url)
    async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
        signer = WalletSigner(os.urandom(32))
        key = await create_api_key(http, signer, gw.url)
        await create_account(db, signer.pubkey)
        yield Caller(http, gw.url, signer, key)


class FailingRelay(Relay):
    """The relay, which can also answer every request whose body holds ``fail_on`` with a JSON-RPC error,
    and keeps every body it was sent (``count`` says how many held a fragment)."""

    fail_on: bytes | None = None

    def __init__(self, node_url: str) -> None:
        super().__init__(node_url)
        self.bodies: list[bytes] = []

    def count(self, fragment: str | bytes) -> int:
        """The requests that reached the node with ``fragment`` in their body."""
        wanted = fragment.encode() if isinstance(fragment, str) else fragment
        return sum(1 for body in self.bodies if wanted in body)

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.bodies.append(body)
        if self.fail_on is not None and self.fail_on in body:
            error = {"code": -32005, "message": "Node is behind by 42 slots"}
            doc = json.loads(body)
            if isinstance(doc, list):
                return web.json_response([{"jsonrpc": "2.0", "id": call["id"], "error": error} for call in doc])
            return web.json_response({"jsonrpc": "2.0", "id": doc["id"], "error": error})
        return await super()._relay(request)


@pytest.fixture
async def relay(devnode_url: str) -> AsyncIterator[FailingRelay]:
    running = FailingRelay(devnode_url)
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def relayed_caller(
    relay: FailingRelay, tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection
) -> AsyncIterator[Caller]:
    async with caller_at(f"http://127.0.0.1:{relay.port}/", tmp_path, database_url, redis_url, db) as caller:
        yield caller
