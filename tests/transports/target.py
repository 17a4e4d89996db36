"""One gateway on the real parts (PostgreSQL, Redis, the devnode) for the bad-input tests, an account of
the module's own (a funded wallet and its API key), and every log record with a traceback or at ERROR
caught while it serves: a handled refusal is never logged as a crash."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import asyncpg

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings


class Crashes(logging.Handler):
    """Log records at ERROR or with a traceback, from any logger (the gateway's, uvicorn's)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or record.exc_info is not None

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[str]:
        """What was logged since the last take, formatted with its traceback."""
        texts = [logging.Formatter().format(record) for record in self.records]
        self.records.clear()
        return texts


@dataclass
class Target:
    url: str
    api_key: str
    signer: WalletSigner
    http: aiohttp.ClientSession
    gateway: RunningGateway
    crashes: Crashes = field(default_factory=Crashes)


def target_settings(home: Path, database_url: str, redis_url: str, devnode: Devnode) -> Settings:
    return Settings.model_validate(
        {
            "home": home,
            **service_key_settings(home),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode.rpc_url,
            "upstream_ws_url": devnode.ws_url,
            "block_engine_url": f"{devnode.rpc_url}/api/v1",
            "ip_limits": TEST_IP_LIMITS,
            "rate_limit_rps": 100_000,  # the fuzz sends fast; its refusals are the inputs', not the pace's
            "webhook_allow_private": True,
        }
    )


async def funded_key(
    gateway: RunningGateway, http: aiohttp.ClientSession, database_url: str, usdc: int = 100_000
) -> tuple[WalletSigner, str]:
    """A new wallet with an account holding ``usdc`` base units' worth of credits, and its API key."""
    signer = WalletSigner(os.urandom(32))
    key = await create_api_key(http, signer, gateway.url)
    db = await asyncpg.connect(database_url)
    try:
        await create_account(db, signer.pubkey, usdc)
    finally:
        await db.close()
    gateway.app.meter.invalidate(signer.pubkey)
    return signer, key


@asynccontextmanager
async def serve_target(
    home: Path, database_url: str, redis_url: str, devnode: Devnode, *, usdc: int = 100_000
) -> AsyncIterator[Target]:
    # Earlier tests' garbage (a closed loop's pending gRPC tasks, unclosed async generators) is logged by
    # asyncio whenever the collector gets to it: collected now, so that none of it is taken for an input's.
    gc.collect()
    crashes = Crashes()
    root = logging.getLogger()
    root.addHandler(crashes)
    try:
        config = target_settings(home, database_url, redis_url, devnode)
        async with serve_gateway(config) as gw, aiohttp.ClientSession() as http:
            signer, key = await funded_key(gw, http, database_url, usdc)
            crashes.take()  # start-up's own records are not the inputs'
            yield Target(gw.url, key, signer, http, gw, crashes)
    finally:
        root.removeHandler(crashes)
