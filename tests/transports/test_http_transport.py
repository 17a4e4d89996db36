"""The HTTP transport over a real socket: JSON-RPC ``POST``s served from the raw ASGI messages
(``RpcFirst``), ``/ws`` straight by its transport (``WebSocketFirst``), everything else by Starlette,
with one way of answering either."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import asyncpg
import orjson
import pytest
from solana.rpc.async_api import AsyncClient
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from gateway.app.settings import Settings
from gateway.pipeline.http import RPC_MAX_BODY_BYTES, route_path
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.support import RunningGateway, serve_gateway, service_key_settings

GET_SLOT = b'{"jsonrpc":"2.0","id":7,"method":"getSlot"}'


@pytest.fixture
async def gateway(tmp_path: Path, database_url: str, redis_url: str, devnode_url: str) -> AsyncIterator[RunningGateway]:
    settings = Settings(
        **service_key_settings(tmp_path),
        home=tmp_path,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode_url,
    )
    async with serve_gateway(settings) as running:
        yield running


@pytest.fixture
async def api_key(gateway: RunningGateway, db: asyncpg.Connection) -> str:
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gateway.url)
    await create_account(db, signer.pubkey)
    gateway.app.meter.invalidate(signer.pubkey)
    return key


async def test_a_solana_client_is_served_on_both_paths(gateway: RunningGateway, api_key: str) -> None:
    for path in ("/", "/rpc"):
        async with AsyncClient(gateway.url + path, extra_headers={"X-Api-Key": api_key}) as client:
            slot = (await client.get_slot()).value
        assert isinstance(slot, int) and slot >= 0


async def test_response_headers_and_body(gateway: RunningGateway, api_key: str) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(gateway.url + "/", data=GET_SLOT, headers={"X-Api-Key": api_key}) as resp,
    ):
        body = await resp.read()
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "application/json"
    assert int(resp.headers["Content-Length"]) == len(body)
    assert resp.headers.getall("X-Request-Id") and len(resp.headers.getall("X-Request-Id")) == 1
    assert int(resp.headers["X-Credits-Remaining"]) == 10_000 - 1
    assert int(resp.headers["X-Ratelimit-Limit"]) > 0 and "X-Ratelimit-Reset" in resp.headers


async def test_a_body_sent_in_chunks_is_read_whole(gateway: RunningGateway, api_key: str) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(GET_SLOT), 5):
            yield GET_SLOT[i : i + 5]

    async with (
        aiohttp.ClientSession() as http,
        http.post(gateway.url + "/rpc", data=chunks(), headers={"X-Api-Key": api_key}) as resp,
    ):
        answer = await resp.json()
    assert resp.status == 200 and answer["id"] == 7 and isinstance(answer["result"], int), answer


async def test_other_methods_on_the_rpc_paths_are_405(gateway: RunningGateway) -> None:
    async with aiohttp.ClientSession() as http:
        for path in ("/", "/rpc"):
            async with http.get(gateway.url + path) as resp:
                answer = await resp.json()
            assert (resp.status, answer["error"]["code"]) == (405, "METHOD_NOT_ALLOWED"), answer


async def test_an_oversized_body_is_413_before_auth(gateway: RunningGateway) -> None:
    body = b" " * (RPC_MAX_BODY_BYTES + 1)
    async with aiohttp.ClientSession() as http, http.post(gateway.url + "/", data=body) as resp:
        answer = await resp.json()
    assert (resp.status, answer["error"]["code"]) == (413, "PAYLOAD_TOO_LARGE"), answer


async def test_the_api_key_query_parameter_is_read(gateway: RunningGateway, api_key: str) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(gateway.url + "/", data=GET_SLOT, params={"api-key": api_key, "empty": ""}) as resp,
    ):
        assert resp.status == 200, await resp.text()


async def test_websockets_are_served_at_ws_alone(gateway: RunningGateway, api_key: str) -> None:
    base = gateway.url.replace("http://", "ws://")
    async with connect(base + "/ws", subprotocols=[f"auth.{api_key}", "solana-rpc"]) as ws:  # type: ignore[list-item]
        await ws.send('{"jsonrpc":"2.0","id":3,"method":"noSuchSubscribe"}')  # answered by the /ws session
        answer = orjson.loads(await ws.recv())
    assert answer["id"] == 3 and answer["error"]["code"] == -32601, answer
    with pytest.raises(InvalidStatus) as refused:  # Starlette's: no WebSocket route there
        async with connect(base + "/ws/x", subprotocols=[f"auth.{api_key}", "solana-rpc"]):  # type: ignore[list-item]
            pass
    assert refused.value.response.status_code == 403
    async with aiohttp.ClientSession() as http, http.get(gateway.url + "/ws") as resp:  # not a WebSocket
        body = await resp.json()
    assert resp.status == 404 and body["error"]["code"] == "NOT_FOUND"


def test_route_path_is_below_the_mount_point() -> None:
    assert route_path({"path": "/rpc"}) == "/rpc"
    assert route_path({"path": "/unmetered/", "root_path": "/unmetered"}) == "/"
    assert route_path({"path": "/unmetered", "root_path": "/unmetered"}) == "/"
    assert route_path({"path": "/unmetered/rpc", "root_path": "/unmetered"}) == "/rpc"
    assert route_path({"path": "/unmeteredrpc", "root_path": "/unmetered"}) == "/unmeteredrpc"
