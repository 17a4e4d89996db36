"""What one caller can hold open on ``/ws``, and how long a revoked credential keeps a socket: real
``websockets`` clients against in-process gateways on the real PostgreSQL, Redis and devnode.

Two gateways on the same stores stand for two replicas: a key rotated or a session logged out on one
must close the sockets the other holds (the Redis channel between them is the real one).
"""

from __future__ import annotations

import asyncio
import socket as stdlib_socket
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from devnode.node import Devnode
from gateway.app.settings import Settings
from tests.auth.helpers import create_api_key, open_session, request
from tests.pubsub.conftest import new_caller
from tests.pubsub.test_ws import ask, close_code, ws_url
from tests.sending.conftest import sending_settings
from tests.sending.helpers import Caller
from tests.support import RunningGateway, serve_gateway

pytestmark = pytest.mark.asyncio


@pytest.fixture
def settings(tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode) -> Settings:
    return sending_settings(
        tmp_path,
        database_url,
        redis_url,
        devnode.rpc_url,
        upstream_ws_url=devnode.ws_url,
        ws_max_connections=6,
        ws_max_connections_per_address=4,
        ws_max_connections_per_account=3,
        max_ongoing_requests=6 + 256,
        request_body_timeout_s=1.0,
    )


@pytest.fixture
async def gateway(settings: Settings) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(settings) as gw:
        yield gw


@asynccontextmanager
async def opened(gateway: RunningGateway, key: str, source: str = "127.0.0.1") -> AsyncIterator[ClientConnection]:
    subprotocols: Any = [f"auth.{key}", "solana-rpc"]
    async with connect(ws_url(gateway), subprotocols=subprotocols, local_addr=(source, 0)) as ws:
        yield ws


@asynccontextmanager
async def admitted(gateway: RunningGateway, key: str, source: str = "127.0.0.1") -> AsyncIterator[ClientConnection]:
    """A socket the gateway has authenticated and counted (it answered a call)."""
    async with opened(gateway, key, source) as ws:
        assert isinstance((await ask(ws, "getSlot"))["result"], int)
        yield ws


async def callers(gateway: RunningGateway, http: aiohttp.ClientSession, db: asyncpg.Connection, n: int) -> list[Caller]:
    return [await new_caller(http, gateway, db, 10_000) for _ in range(n)]


async def test_an_account_past_its_cap_is_closed_4003_and_others_still_connect(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http, AsyncExitStack() as stack:
        greedy, other = await callers(gateway, http, db, 2)
        for _ in range(3):
            await stack.enter_async_context(admitted(gateway, greedy.headers["X-Api-Key"]))
        async with opened(gateway, greedy.headers["X-Api-Key"]) as fourth:
            code, reason = await close_code(fourth)
        assert code == 4003, (code, reason)
        assert "3 open WebSockets per account" in (reason or "")
        async with opened(gateway, other.headers["X-Api-Key"]) as ws:
            assert isinstance((await ask(ws, "getSlot"))["result"], int)


async def test_an_address_past_its_cap_is_refused_429_before_authentication(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http, AsyncExitStack() as stack:
        accounts = await callers(gateway, http, db, 3)
        for caller in (accounts[0], accounts[0], accounts[1], accounts[1]):
            await stack.enter_async_context(admitted(gateway, caller.headers["X-Api-Key"]))
        with pytest.raises(InvalidStatus) as refused:
            await stack.enter_async_context(opened(gateway, accounts[2].headers["X-Api-Key"]))
        response = refused.value.response
        assert response.status_code == 429
        assert response.headers["Retry-After"] == "30"
        assert orjson.loads(response.body)["error"]["code"] == "RATE_LIMITED"
        with pytest.raises(InvalidStatus) as unauthenticated:  # no credentials at all: refused the same way
            await stack.enter_async_context(connect(ws_url(gateway)))
        assert unauthenticated.value.response.status_code == 429
        # another address still gets in, and an HTTP call is answered at once
        async with opened(gateway, accounts[2].headers["X-Api-Key"], source="127.0.0.2") as ws:
            assert isinstance((await ask(ws, "getSlot"))["result"], int)
        started = time.monotonic()
        _, _, remaining = await accounts[2].rpc("getSlot", [])
        assert remaining > 0 and time.monotonic() - started < 2


async def test_a_full_replica_refuses_the_upgrade_503_and_still_answers_http(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http, AsyncExitStack() as stack:
        accounts = await callers(gateway, http, db, 4)
        sources = ["127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"]
        for caller, source in zip([a for a in accounts[:3] for _ in range(2)], sources, strict=True):
            await stack.enter_async_context(admitted(gateway, caller.headers["X-Api-Key"], source))
        with pytest.raises(InvalidStatus) as refused:
            await stack.enter_async_context(opened(gateway, accounts[3].headers["X-Api-Key"], "127.0.0.4"))
        assert refused.value.response.status_code == 503
        assert refused.value.response.headers["Retry-After"] == "30"
        health = await request(http, "GET", gateway.url + "/health")
        assert health.status == 200
        _, answer, _ = await accounts[3].rpc("getSlot", [])
        assert isinstance(answer["result"], int)


async def test_closed_sockets_give_their_room_back(gateway: RunningGateway, db: asyncpg.Connection) -> None:
    async with aiohttp.ClientSession() as http:
        (caller,) = await callers(gateway, http, db, 1)
        for _ in range(5):  # more than the account's cap, one after another
            async with opened(gateway, caller.headers["X-Api-Key"]) as ws:
                assert isinstance((await ask(ws, "getSlot"))["result"], int)
        await asyncio.sleep(0.1)
        async with (
            opened(gateway, caller.headers["X-Api-Key"]) as ws,
            opened(gateway, caller.headers["X-Api-Key"]) as second,
        ):
            for each in (ws, second):  # the account's whole cap is free again
                assert isinstance((await ask(each, "getSlot"))["result"], int)


async def test_a_backlog_of_calls_past_the_bound_closes_4003(gateway: RunningGateway, db: asyncpg.Connection) -> None:
    async with aiohttp.ClientSession() as http:
        (caller,) = await callers(gateway, http, db, 1)
        async with opened(gateway, caller.headers["X-Api-Key"]) as ws:
            # three batches of 100 slow calls: more than 256 calls waiting for answers
            batch = [{"jsonrpc": "2.0", "id": i, "method": "getBlockHeight"} for i in range(100)]
            for _ in range(3):
                await ws.send(orjson.dumps(batch))
            code, reason = await close_code(ws)
        assert code == 4003, (code, reason)
        assert "calls waiting" in (reason or "")


# -- revoked credentials ---------------------------------------------------------------------


@pytest.fixture
async def replica_b(settings: Settings) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(settings) as gw:
        yield gw


async def test_the_account_and_address_caps_hold_over_every_replica(
    gateway: RunningGateway, replica_b: RunningGateway, db: asyncpg.Connection
) -> None:
    """The caps are the service's, counted at Redis (gateway.storage.seats), not a share per replica:
    sockets on either replica count against the same account and the same address."""
    async with aiohttp.ClientSession() as http, AsyncExitStack() as stack:
        greedy, other = await callers(gateway, http, db, 2)
        key = greedy.headers["X-Api-Key"]
        for replica in (gateway, replica_b, replica_b):
            await stack.enter_async_context(admitted(replica, key))
        async with opened(gateway, key) as fourth:
            code, reason = await close_code(fourth)
        assert (code, "3 open WebSockets per account" in (reason or "")) == (4003, True), (code, reason)
        await stack.enter_async_context(admitted(gateway, other.headers["X-Api-Key"]))  # the address's 4th
        with pytest.raises(InvalidStatus) as refused:
            await stack.enter_async_context(opened(replica_b, other.headers["X-Api-Key"]))
        assert refused.value.response.status_code == 429
    # closed sockets gave their seats back: a replica gives a socket's seats back at Redis when its side of
    # the socket ends, a moment after the close handshake the client waits for (so within a bound, not at once)
    assert await answered_again(replica_b, key, within_s=10.0)


async def answered_again(gateway: RunningGateway, key: str, within_s: float) -> bool:
    """Whether a socket opened with ``key`` is answered within ``within_s`` (refused at a cap until then)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            async with opened(gateway, key) as again:
                return isinstance((await ask(again, "getSlot"))["result"], int)
        except (InvalidStatus, ConnectionClosed) as refused:  # 429 at the address's cap, 4003 at the account's
            if isinstance(refused, InvalidStatus) and refused.response.status_code != 429:
                raise
            if isinstance(refused, ConnectionClosed) and (refused.rcvd is None or refused.rcvd.code != 4003):
                raise
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)


async def test_a_rotated_key_closes_its_open_sockets_on_every_replica_1008(
    gateway: RunningGateway, replica_b: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        (caller,) = await callers(gateway, http, db, 1)
        async with (
            opened(gateway, caller.headers["X-Api-Key"]) as on_a,
            opened(replica_b, caller.headers["X-Api-Key"]) as on_b,
        ):
            assert isinstance((await ask(on_a, "getSlot"))["result"], int)
            started = time.monotonic()
            await create_api_key(http, caller.signer, gateway.url)  # rotated through replica A
            for ws in (on_a, on_b):
                code, reason = await close_code(ws)
                assert code == 1008, (code, reason)
                assert "revoked" in (reason or "")
            assert time.monotonic() - started < 3


async def test_a_logout_closes_the_sessions_sockets_on_every_replica_1008(
    gateway: RunningGateway, replica_b: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        (caller,) = await callers(gateway, http, db, 1)
        token = await open_session(http, caller.signer, gateway.url)
        headers = {"Authorization": f"Bearer {token}"}
        other = await open_session(http, caller.signer, gateway.url)  # another session of the same wallet
        async with (
            connect(ws_url(gateway), additional_headers=headers) as on_a,
            connect(ws_url(replica_b), additional_headers=headers) as on_b,
            connect(ws_url(replica_b), additional_headers={"Authorization": f"Bearer {other}"}) as kept,
        ):
            assert isinstance((await ask(on_b, "getSlot"))["result"], int)
            logout = await request(http, "POST", gateway.url + "/auth/logout", body=b"{}", headers=headers)
            assert logout.status == 200, logout
            for ws in (on_a, on_b):
                code, reason = await close_code(ws)
                assert code == 1008, (code, reason)
                assert "logged out" in (reason or "")
            assert isinstance((await ask(kept, "getSlot"))["result"], int)


async def test_a_revocation_missed_while_the_channel_was_down_is_found_by_the_recheck(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        (caller,) = await callers(gateway, http, db, 1)
        async with opened(gateway, caller.headers["X-Api-Key"]) as ws:
            assert isinstance((await ask(ws, "getSlot"))["result"], int)
            revocations = gateway.app.auth.revocations
            assert revocations.held == 1
            # the key revoked in PostgreSQL without a message on the channel, as if it had been missed
            await db.execute(
                "UPDATE api_keys SET revoked_at = now() WHERE pubkey = $1 AND revoked_at IS NULL", caller.signer.pubkey
            )
            revocations.resync()  # what the key store does when its channel comes back
            code, _ = await close_code(ws)
            assert code == 1008
            assert revocations.held == 0


async def test_wallet_signed_sockets_hold_no_revocable_credential(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        (caller,) = await callers(gateway, http, db, 1)
        headers = caller.signer.headers("GET", "/ws", b"")
        async with connect(ws_url(gateway), additional_headers=headers) as ws:
            assert isinstance((await ask(ws, "getSlot"))["result"], int)
            assert gateway.app.auth.revocations.held == 0


# -- slow bodies -----------------------------------------------------------------------------


async def test_a_body_that_does_not_arrive_in_time_gets_408_and_others_are_served(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    port = int(gateway.url.rsplit(":", 1)[1])
    slow = await asyncio.to_thread(_start_slow_body, port)
    try:
        async with aiohttp.ClientSession() as http:
            (caller,) = await callers(gateway, http, db, 1)
            _, answer, _ = await caller.rpc("getSlot", [])  # served while the slow body trickles
            assert isinstance(answer["result"], int)
        started = time.monotonic()
        head = await asyncio.to_thread(_read_answer, slow)
        assert head.startswith(b"HTTP/1.1 408"), head[:200]
        assert b'"REQUEST_TIMEOUT"' in head
        assert time.monotonic() - started < 3
    finally:
        slow.close()


def _start_slow_body(port: int) -> stdlib_socket.socket:
    conn = stdlib_socket.create_connection(("127.0.0.1", port), timeout=10)
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"})
    head = f"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    conn.sendall(head.encode() + body[:5])  # the rest never comes
    return conn


def _read_answer(conn: stdlib_socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


async def test_pricing_shows_the_configured_socket_caps(gateway: RunningGateway) -> None:
    async with aiohttp.ClientSession() as http:
        pricing = await request(http, "GET", gateway.url + "/pricing")
    websocket = pricing.json["websocket"]
    assert (websocket["max_connections_per_account"], websocket["max_connections_per_address"]) == (3, 4)
