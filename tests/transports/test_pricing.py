"""``GET /pricing`` is public, so what one caller can make it cost is bounded: the SOL/USD rate it shows
is read from the node (the devnode's pool) once for any number of callers asking at once, and an address
asking too fast gets 429 with ``Retry-After`` (``ip_limits.pricing``).

The node reads are counted by a relay in front of the real devnode, which forwards every request as it
came and notes its method (no stand-in answers anything)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from gateway.app.settings import Settings
from gateway.runtime.ports import free_port
from tests.support import TEST_IP_LIMITS, serve_gateway, service_key_settings

CALLERS = 20


class CountingRelay:
    """Forwards JSON-RPC to the devnode and counts each method it carried."""

    def __init__(self, node_url: str) -> None:
        self.node_url = node_url
        self.url = f"http://127.0.0.1:{free_port()}"
        self.methods: Counter[str] = Counter()
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> CountingRelay:
        app = web.Application()
        app.router.add_post("/", self._relay)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", int(self.url.rsplit(":", 1)[1])).start()
        self._http = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        parsed: Any = orjson.loads(body)
        for one in parsed if isinstance(parsed, list) else [parsed]:
            self.methods[str(one.get("method"))] += 1
        assert self._http is not None
        async with self._http.post(self.node_url, data=body, headers={"Content-Type": "application/json"}) as resp:
            return web.Response(body=await resp.read(), content_type="application/json")


def pricing_settings(home: Path, database_url: str, redis_url: str, node_url: str, **extra: Any) -> Settings:
    return Settings.model_validate(
        {
            **service_key_settings(home),
            "home": home,
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": node_url,
            "ip_limits": TEST_IP_LIMITS,
            **extra,
        }
    )


@pytest.fixture
async def relay(devnode_url: str) -> AsyncIterator[CountingRelay]:
    async with CountingRelay(devnode_url) as running:
        yield running


async def get_pricing(http: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    async with http.get(f"{url}/pricing") as resp:
        return resp.status, await resp.json(), dict(resp.headers)


async def test_concurrent_callers_share_one_read_of_the_rate(
    tmp_path: Path, database_url: str, redis_url: str, relay: CountingRelay
) -> None:
    settings = pricing_settings(tmp_path, database_url, redis_url, relay.url, trade_sol_usd_ttl_s=3_600)
    async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
        before = relay.methods["getMultipleAccounts"]
        answers = await asyncio.gather(*(get_pricing(http, gw.url) for _ in range(CALLERS)))
        reads = relay.methods["getMultipleAccounts"] - before
    assert all(status == 200 for status, _, _ in answers), answers[0]
    assert {doc["trade_builders"]["rate_source"] for _, doc, _ in answers} == {f"pool:{settings.trade_sol_usd_pool}"}
    assert reads == 2, relay.methods  # one rate read: the pool, then its token accounts and mints


async def test_an_address_asking_too_fast_is_limited(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str
) -> None:
    limits = {**TEST_IP_LIMITS, "pricing": {"rps": 0.5, "burst": 3}}
    settings = pricing_settings(tmp_path, database_url, redis_url, devnode_url, ip_limits=limits)
    async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
        answers = [await get_pricing(http, gw.url) for _ in range(4)]
        capabilities = await http.get(f"{gw.url}/capabilities")  # pure documents: not limited
        capabilities.release()
    assert [status for status, _, _ in answers] == [200, 200, 200, 429]
    _, doc, headers = answers[-1]
    assert doc["error"]["code"] == "RATE_LIMITED" and int(headers["Retry-After"]) >= 1, doc
    assert not any("X-Request-Id" in headers for _, _, headers in answers)  # none on /pricing (the interface)
    assert capabilities.status == 200
