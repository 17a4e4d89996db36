"""Fixtures of the access rules' tests: a gateway in front of the devnode (its PubSub and block engine
too), fresh funded wallets with an API key and a session, and requests from a chosen loopback address."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.runtime.ports import free_port
from gateway_client import WalletSigner
from tests.auth.helpers import Answer, create_account, create_api_key, open_session, request, signed
from tests.sending.conftest import sending_settings
from tests.support import RunningGateway, serve_gateway

BODY = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'


def access_settings(home: Path, database_url: str, redis_url: str, devnode: Devnode) -> Settings:
    """Settings naming a port of their own, which the module's gateway serves on (as ``gateway up``'s do): the
    gateway's own origins (http://127.0.0.1, localhost and [::1] at that port) are the ones its tests send."""
    return sending_settings(
        home, database_url, redis_url, devnode.rpc_url, upstream_ws_url=devnode.ws_url, port=free_port()
    )


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode: Devnode) -> Settings:
    """One home (its API-key secret and service keys) for every replica of a module's tests."""
    return access_settings(tmp_path_factory.mktemp("access"), database_url, redis_url, devnode)


@pytest.fixture(scope="module")
async def gateway(settings: Settings) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(settings, port=settings.port) as running:
        yield running


@dataclass
class Owner:
    """A funded account: its wallet, API key and a session token."""

    signer: WalletSigner
    key: str
    token: str
    base: str

    async def put_rules(self, http: aiohttp.ClientSession, rules: dict[str, Any], base: str | None = None) -> Answer:
        """``POST /account/access`` signed by the wallet."""
        return await signed(http, self.signer, "POST", base or self.base, "/account/access", orjson.dumps(rules))

    def credentials(self) -> dict[str, dict[str, str]]:
        """Headers of each credential the rules bind."""
        return {"api_key": {"X-Api-Key": self.key}, "session": {"Authorization": f"Bearer {self.token}"}}

    def wallet(self, method: str, path: str, body: bytes) -> dict[str, str]:
        return self.signer.headers(method, path, body)


async def new_owner(http: aiohttp.ClientSession, gateway: RunningGateway, db: asyncpg.Connection) -> Owner:
    signer = WalletSigner(os.urandom(32))
    key = await create_api_key(http, signer, gateway.url)
    await create_account(db, signer.pubkey)  # credits through the ledger's deposit path
    token = await open_session(http, signer, gateway.url)
    return Owner(signer, key, token, gateway.url)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def owner(http: aiohttp.ClientSession, gateway: RunningGateway, db: asyncpg.Connection) -> Owner:
    return await new_owner(http, gateway, db)


@pytest.fixture
async def other_address() -> AsyncIterator[aiohttp.ClientSession]:
    """A client whose requests come from 127.0.0.2 (the gateway sees that address as the peer)."""
    connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session


async def rpc(http: aiohttp.ClientSession, base: str, headers: dict[str, str], body: bytes = BODY) -> Answer:
    return await request(http, "POST", base + "/", body=body, headers=headers)
