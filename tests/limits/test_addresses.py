"""Per-address limits of the account and session routes, through HTTP.

These routes are not billed, so the limits are what bounds the work an unpaying caller can cause.
The buckets refill slowly here (0.01/s), so a slow machine cannot refill one mid-test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.app.settings import Settings
from gateway_client import WalletSigner
from tests.auth.helpers import request, signed
from tests.support import RunningGateway, serve_gateway, service_key_settings


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


BURST = 8
SLOW = {"rps": 0.01, "burst": BURST}


def settings(tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, **extra: Any) -> Settings:
    urls = {"database_url": database_url, "redis_url": redis_url, "upstream_rpc_url": devnode_url}
    limits = {"session": SLOW, "account_create": SLOW}
    return Settings.model_validate(
        {"home": tmp_path, **service_key_settings(tmp_path), **urls, "ip_limits": limits, **extra}
    )


async def challenge(http: aiohttp.ClientSession, gw: RunningGateway, forwarded_for: str | None = None) -> int:
    body = orjson.dumps({"pubkey": WalletSigner(bytes(32)).pubkey})
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    answer = await request(http, "POST", gw.url + "/auth/challenge", body=body, headers=headers)
    if answer.status == 429:
        assert answer.code == "RATE_LIMITED" and int(answer.headers["retry-after"]) >= 1, answer
        assert answer.json["error"]["data"]["retry_after_secs"] >= 1
    return answer.status


async def test_challenges_beyond_the_burst_are_429(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, http: aiohttp.ClientSession
) -> None:
    burst = BURST
    async with serve_gateway(settings(tmp_path, database_url, redis_url, devnode_url)) as gw:
        statuses = [await challenge(http, gw) for _ in range(burst + 5)]
        assert statuses[:burst] == [200] * burst and set(statuses[burst:]) == {429}
        # a forwarded address from an untrusted peer changes nothing: it is the caller's own claim
        assert await challenge(http, gw, forwarded_for="203.0.113.9") == 429
        # other groups have buckets of their own
        assert (await request(http, "GET", gw.url + "/account/info")).status == 402


async def test_account_creation_is_bounded_per_address(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, http: aiohttp.ClientSession
) -> None:
    burst = BURST
    async with serve_gateway(settings(tmp_path, database_url, redis_url, devnode_url)) as gw:
        statuses = []
        for n in range(burst + 2):
            answer = await signed(http, WalletSigner(bytes([n + 1]) * 32), "POST", gw.url, "/account/api-key", b"{}")
            statuses.append(answer.status)
        assert statuses == [200] * burst + [429, 429]


async def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_bucket(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, http: aiohttp.ClientSession
) -> None:
    burst = BURST
    config = settings(tmp_path, database_url, redis_url, devnode_url, trusted_proxies=["127.0.0.1/32"])
    async with serve_gateway(config) as gw:
        assert [await challenge(http, gw, "203.0.113.5") for _ in range(burst)] == [200] * burst
        assert await challenge(http, gw, "203.0.113.5") == 429
        # spoofed entries left of the proxy's own are not believed: still 203.0.113.5
        assert await challenge(http, gw, "198.51.100.1, 203.0.113.5") == 429
        assert await challenge(http, gw, "203.0.113.6") == 200


def test_the_defaults_are_the_documented_numbers() -> None:
    limits = Settings().ip_limits
    assert {name: (limit.rps, limit.burst) for name, limit in limits.items()} == {
        "session": (5, 30),
        "account_create": (0.2, 10),
        "account_read": (10, 50),
        "deposit_confirm": (1, 10),
        "webhooks": (5, 30),
        "x402_settle": (0.1, 5),
        "signals": (5, 30),
        "pricing": (5, 30),
        "auth_failures": (1, 100),
    }
