"""A gateway on the devnode in this process, for benchmarks of the products that need a real chain
(``bench/landing.py``, ``bench/bulk.py``): embedded PostgreSQL and Redis, the devnode, one
:class:`gateway.app.replica.GatewayApp` on uvicorn (no Ray), and a funded API key."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from bench.metered import create_api_key, fund_account
from devnode.config import DevnodeConfig
from devnode.node import Devnode
from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.base.keys import service_key_addresses
from gateway.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
from gateway.runtime.ports import free_port
from gateway.storage.migrate import migrate_url
from gateway.transports.http import build_http_app
from gateway_client import WalletSigner


@dataclass
class Stores:
    home: Path
    database_url: str
    redis_url: str


@dataclass
class Running:
    url: str
    api_key: str
    app: GatewayApp
    node: Devnode


@contextmanager
def embedded_stores(prefix: str) -> Iterator[Stores]:
    """Embedded PostgreSQL and Redis in a temporary home (started outside any event loop)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as home:
        pg, redis = EmbeddedPostgres(Path(home)), EmbeddedRedis(Path(home), 64)
        try:
            yield Stores(Path(home), pg.start(), redis.start())
        finally:
            redis.stop()
            pg.stop()


@asynccontextmanager
async def gateway_on_devnode(stores: Stores, slot_ms: int, **settings: Any) -> AsyncIterator[Running]:
    """The devnode and a gateway in front of it, with an API key funded with 1,000 USDC of credits."""
    node = Devnode(DevnodeConfig(data_dir=stores.home / "devnode", rpc_port=0, ws_port=0, slot_ms=slot_ms))
    await migrate_url(stores.database_url)
    await node.start()
    try:
        config = Settings(
            **service_key_addresses(stores.home),  # standing in for gateway up
            home=stores.home,
            database_url=stores.database_url,
            redis_url=stores.redis_url,
            upstream_rpc_url=node.rpc_url,
            block_engine_url=f"{node.rpc_url}/api/v1",
            devnode_slot_ms=slot_ms,
            rate_limit_rps=1_000_000,  # measure the product, not the limiter
            concurrency_limit=100_000,
            **settings,
        )
        app = GatewayApp(config)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(build_http_app(app), port=port, log_level="warning"))
        serving = asyncio.create_task(server.serve())
        for _ in range(600):
            if server.started:
                break
            await asyncio.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        secret = os.urandom(32)
        key = await asyncio.to_thread(create_api_key, url, secret)
        await asyncio.to_thread(fund_account, stores.database_url, WalletSigner(secret).pubkey, 1_000_000_000)
        try:
            yield Running(url, key, app, node)
        finally:
            server.should_exit = True
            await serving
    finally:
        await node.stop()


def run_with_stores(prefix: str, main: Callable[[Stores], Coroutine[Any, Any, None]]) -> None:
    with embedded_stores(prefix) as stores:
        asyncio.run(main(stores))
