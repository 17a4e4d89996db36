"""/health and the readiness gate: 503 `starting` until a node answers, `degraded` with a fallback.

The single-node settings (``upstream_rpc_url``, ``fallback_rpc_url``) make a pool of two; the primary node
is a loopback port where nothing listens, the fallback the real devnode.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aiohttp
import asyncpg

from gateway.app.settings import Settings
from gateway.runtime.ports import free_port
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.support import serve_gateway, service_key_settings


def settings(home: Path, database_url: str, redis_url: str, **urls: str | None) -> Settings:
    return Settings(
        **service_key_settings(home),
        home=home,
        database_url=database_url,
        redis_url=redis_url,
        health_poll_s=0.2,
        **urls,
    )


async def get(url: str) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return resp.status, await resp.json()


async def test_starting_until_a_node_answers(
    tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    async with serve_gateway(
        settings(tmp_path, database_url, redis_url, upstream_rpc_url=dead), wait_ready=False
    ) as gw:
        await asyncio.sleep(0.5)  # several failed probes
        status, doc = await get(gw.url + "/health")
        assert (status, doc["status"], doc["paid_traffic_ready"]) == (503, "starting", False), doc

        signer = WalletSigner(os.urandom(32))
        async with aiohttp.ClientSession() as http:
            key = await create_api_key(http, signer, gw.url)
            await create_account(db, signer.pubkey)
            body = b'{"jsonrpc":"2.0","id":4,"method":"getSlot"}'
            async with http.post(gw.url + "/", data=body, headers={"X-Api-Key": key}) as resp:
                answer = await resp.json()
        assert resp.status == 503 and answer["error"]["code"] == -32003, answer
        assert answer["error"]["data"]["retry_after_secs"] >= 1 and resp.headers["Retry-After"]
        assert resp.headers["X-Credits-Remaining"] == "10000"  # nothing was charged


async def test_degraded_with_fallback_serves_from_the_fallback(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, db: asyncpg.Connection
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    config = settings(tmp_path, database_url, redis_url, upstream_rpc_url=dead, fallback_rpc_url=devnode_url)
    async with serve_gateway(config) as running:
        status, doc = await get(running.url + "/health")
        assert (status, doc["status"], doc["fallback_active"], doc["agave_healthy"]) == (200, "degraded", True, False)
        assert doc["paid_traffic_ready"] is True and isinstance(doc["solanaSlot"], int)
        signer = WalletSigner(os.urandom(32))
        async with aiohttp.ClientSession() as http:
            key = await create_api_key(http, signer, running.url)
            await create_account(db, signer.pubkey)
            body = b'{"jsonrpc":"2.0","id":4,"method":"getSlot"}'
            async with http.post(running.url + "/", data=body, headers={"X-Api-Key": key}) as resp:
                answer = await resp.json()
        assert resp.status == 200 and isinstance(answer["result"], int), answer
        assert resp.headers["X-Upstream"] == "fallback"  # the node that answered, by its name


async def test_ok_when_the_primary_answers(tmp_path: Path, database_url: str, redis_url: str, devnode_url: str) -> None:
    async with serve_gateway(settings(tmp_path, database_url, redis_url, upstream_rpc_url=devnode_url)) as running:
        status, doc = await get(running.url + "/health")
        assert (status, doc["status"]) == (200, "ok") and "fallback_active" not in doc
        assert set(doc["service_profile"]) == {"auth", "services"}  # type: ignore[arg-type]
        assert isinstance(doc["uptime"], int) and doc["nodeVersion"]
