"""CORS over a real socket (gateway.transports.cors): preflights answered without credentials on every
route family, the headers on answers and on refusals (401, 402, 403, 408, 413, 429), the operator's list,
and ``/mcp`` by its own list. The same answers in a real browser: tests/browser."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from gateway.app.settings import Settings, load_settings
from gateway.base.config import ConfigError
from gateway.transports.cors import ALLOW_HEADERS, EXPOSE_HEADERS, MAX_AGE_S
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.support import RunningGateway, serve_gateway, service_key_settings

APP = "https://app.example.com"
GET_SLOT = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
#: One path of each browser-callable route family (a preflight is answered whether the route exists or not).
PATHS = [
    "/",
    "/rpc",
    "/account/info",
    "/account/api-key",
    "/auth/challenge",
    "/auth/verify",
    "/webhooks",
    "/webhooks/wh_1/replay",
    "/x402/settle",
    "/bulk/balances",
    "/relay/sendBundle",
    "/signals/recent",
    "/health",
    "/pricing",
    "/capabilities",
]


def settings_for(home: Path, database_url: str, redis_url: str, devnode_url: str, **extra: Any) -> Settings:
    return Settings(
        **service_key_settings(home),
        home=home,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode_url,
        **extra,
    )


@pytest.fixture(scope="module")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode_url: str
) -> AsyncIterator[RunningGateway]:
    home = tmp_path_factory.mktemp("cors")
    async with serve_gateway(settings_for(home, database_url, redis_url, devnode_url)) as running:
        yield running


async def funded_key(gateway: RunningGateway, db: asyncpg.Connection) -> str:
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gateway.url)
    await create_account(db, signer.pubkey)
    gateway.app.meter.invalidate(signer.pubkey)
    return key


async def preflight(url: str, origin: str = APP, method: str = "POST", headers: str = "content-type,x-api-key") -> Any:
    request = {"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}
    async with aiohttp.ClientSession() as http, http.options(url, headers=request) as resp:
        await resp.read()
        return resp


async def post(url: str, headers: dict[str, str] | None = None, body: bytes = GET_SLOT) -> Any:
    async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as resp:
        await resp.read()
        return resp


def listed(value: str) -> set[str]:
    return {part.strip().lower() for part in value.split(",")}


def assert_cors(resp: Any, allow_origin: str = "*") -> None:
    assert resp.headers.get("Access-Control-Allow-Origin") == allow_origin, dict(resp.headers)
    exposed = listed(", ".join(resp.headers.getall("Access-Control-Expose-Headers")))  # a browser joins them
    assert {h.lower() for h in EXPOSE_HEADERS} <= exposed
    assert "origin" in listed(", ".join(resp.headers.getall("Vary")))


@pytest.mark.parametrize("path", PATHS)
async def test_a_preflight_is_answered_without_credentials(gateway: RunningGateway, path: str) -> None:
    resp = await preflight(gateway.url + path, headers=",".join(ALLOW_HEADERS))
    assert resp.status == 204
    assert resp.headers["Access-Control-Allow-Origin"] == "*"
    assert {"get", "post", "delete"} <= listed(resp.headers["Access-Control-Allow-Methods"])
    wanted = {"content-type", "x-api-key", "authorization", "x-pubkey", "x-signature", "x-timestamp", "x-nonce"}
    assert wanted | {"payment-signature"} <= listed(resp.headers["Access-Control-Allow-Headers"])
    assert int(resp.headers["Access-Control-Max-Age"]) == MAX_AGE_S
    assert "origin" in listed(resp.headers["Vary"])


async def test_an_answer_carries_the_headers_a_page_reads(gateway: RunningGateway, db: asyncpg.Connection) -> None:
    key = await funded_key(gateway, db)
    resp = await post(gateway.url + "/", {"Origin": APP, "X-Api-Key": key, "Content-Type": "application/json"})
    assert resp.status == 200
    assert_cors(resp)
    assert "X-Credits-Remaining" in resp.headers and "X-Ratelimit-Limit" in resp.headers


async def test_refusals_carry_the_same_headers(gateway: RunningGateway, db: asyncpg.Connection) -> None:
    unknown = await post(gateway.url + "/", {"Origin": APP, "X-Api-Key": "srpc_live_" + "A" * 43})
    assert unknown.status == 401
    assert_cors(unknown)
    anonymous = await post(gateway.url + "/rpc", {"Origin": APP})
    assert anonymous.status == 402 and "PAYMENT-REQUIRED" in anonymous.headers  # which the page may read
    assert_cors(anonymous)
    wallet = WalletSigner(os.urandom(32))
    await create_account(db, wallet.pubkey)
    signed = {"Origin": APP, **wallet.headers("POST", "/", GET_SLOT)}
    assert (await post(gateway.url + "/", signed)).status == 200
    replayed = await post(gateway.url + "/", signed)
    assert replayed.status == 403  # NONCE_REUSED
    assert_cors(replayed)
    too_large = await post(gateway.url + "/auth/challenge", {"Origin": APP}, b"x" * (65 * 1024))
    assert too_large.status == 413
    assert_cors(too_large)
    missing = await post(gateway.url + "/no-such-route", {"Origin": APP})
    assert missing.status == 404
    assert_cors(missing)


async def test_the_body_deadlines_408_carries_them(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str
) -> None:
    settings = settings_for(tmp_path, database_url, redis_url, devnode_url, request_body_timeout_s=1)
    async with serve_gateway(settings, wait_ready=False) as running:
        port = int(running.url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: {APP}\r\nContent-Length: 100\r\n\r\n{{"
        writer.write(head.encode())
        await writer.drain()
        answer = (await asyncio.wait_for(reader.read(), 10)).decode().lower()
        writer.close()
    assert answer.startswith("http/1.1 408")
    assert "access-control-allow-origin: *" in answer and "x-request-id" in answer  # exposed


async def test_a_rate_limited_call_carries_them(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, db: asyncpg.Connection
) -> None:
    settings = settings_for(tmp_path, database_url, redis_url, devnode_url, rate_limit_rps=1)
    async with serve_gateway(settings) as running:
        key = await funded_key(running, db)
        for _ in range(20):  # one call a second is admitted: the second or a later one is refused
            resp = await post(running.url + "/", {"Origin": APP, "X-Api-Key": key})
            if resp.status == 429:
                break
    assert resp.status == 429 and "Retry-After" in resp.headers
    assert_cors(resp)


async def test_a_request_without_origin_gets_no_cors_headers(gateway: RunningGateway) -> None:
    resp = await post(gateway.url + "/")
    assert resp.status == 402
    assert "Access-Control-Allow-Origin" not in resp.headers and "Vary" not in resp.headers  # POSTs: untouched
    async with aiohttp.ClientSession() as http, http.get(gateway.url + "/pricing") as got:
        assert got.status == 200 and "Access-Control-Allow-Origin" not in got.headers
        assert "origin" in listed(got.headers["Vary"])  # a cache must not give it to a page that sent one


async def test_the_operators_list(tmp_path: Path, database_url: str, redis_url: str, devnode_url: str) -> None:
    settings = settings_for(tmp_path, database_url, redis_url, devnode_url, cors_allowed_origins=[APP + "/"])
    async with serve_gateway(settings, wait_ready=False) as running:
        allowed = await preflight(running.url + "/", origin="https://APP.example.com")
        other = await preflight(running.url + "/", origin="https://evil.example.com")
        allowed_answer = await post(running.url + "/", {"Origin": APP})
        other_answer = await post(running.url + "/", {"Origin": "https://evil.example.com"})
    assert allowed.status == 204 and allowed.headers["Access-Control-Allow-Origin"] == "https://APP.example.com"
    assert "Access-Control-Max-Age" in allowed.headers
    assert other.status == 204  # nothing refused here: the browser refuses an answer without the headers
    assert "Access-Control-Allow-Origin" not in other.headers and "Access-Control-Allow-Methods" not in other.headers
    assert "origin" in listed(other.headers["Vary"])
    assert_cors(allowed_answer, APP)
    assert other_answer.status == 402  # served as without CORS: the page cannot read it
    assert "Access-Control-Allow-Origin" not in other_answer.headers
    assert "origin" in listed(other_answer.headers["Vary"])


async def test_mcp_answers_browsers_by_its_own_list(gateway: RunningGateway) -> None:
    resp = await preflight(gateway.url + "/mcp")
    assert resp.status == 204 and "Access-Control-Allow-Origin" not in resp.headers
    refused = await post(gateway.url + "/mcp", {"Origin": APP, "Content-Type": "application/json"}, b"{}")
    assert refused.status == 403  # the DNS-rebinding rule, as before
    assert "Access-Control-Allow-Origin" not in refused.headers


def test_the_setting_takes_origins_only() -> None:
    assert Settings(cors_allowed_origins=[APP, "http://127.0.0.1:5173"]).cors_allowed_origins[0] == APP
    assert Settings().cors_allowed_origins == ["*"]
    for bad in ("app.example.com", "https://app.example.com/path", "https://"):
        with pytest.raises(ConfigError, match="cors_allowed_origins"):
            load_settings(cors_allowed_origins=[bad])
