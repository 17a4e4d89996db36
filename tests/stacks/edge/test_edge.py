"""What one caller can take from the others through the real ingress (``gateway up``: Ray Serve behind
its bundled HAProxy, run through ``gateway-haproxy``): per-address limits tell loopback addresses
apart, forged address headers change nothing, idle sockets past their caps leave HTTP answering,
and a body that never arrives is answered 408 by the edge.

The package's stack (conftest.py), with small caps: 4 sockets per account, 8 per address, 12 per
replica; the ``webhooks`` address group allows a burst of 5 (tests/integration's stack keeps the generous
test limits: its schemathesis run alone would exhaust any small bucket of 127.0.0.1); a body has 2 s
to arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import re
import socket
import time
from contextlib import AsyncExitStack
from typing import Any

import orjson
import pytest
from solana.rpc.async_api import AsyncClient
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gateway_client import solana_client
from tests.integration.service import (
    Customer,
    RunningService,
    funded_customer,
)


def get(service: RunningService, path: str, source: str, headers: dict[str, str] | None = None) -> int:
    """A GET from the loopback address ``source``; its HTTP status."""
    host, port = service.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10, source_address=(source, 0))
    try:
        conn.request("GET", path, headers=headers or {})
        return conn.getresponse().status
    finally:
        conn.close()


def test_per_address_limits_tell_two_loopback_addresses_apart(service: RunningService) -> None:
    statuses = [get(service, "/webhooks", "127.0.0.3") for _ in range(8)]
    assert 429 not in statuses[:5] and statuses[-1] == 429, statuses  # refused for want of credentials, then limited
    assert get(service, "/webhooks", "127.0.0.4") == statuses[0]  # another address has a bucket of its own
    # a caller cannot choose its address with the edge's header or X-Forwarded-For
    forged = {"X-Gateway-Client": "10.9.9.9", "X-Gateway-Edge": "guess", "X-Forwarded-For": "10.9.9.9"}
    assert get(service, "/webhooks", "127.0.0.3", forged) == 429


def test_a_caller_cannot_choose_its_request_id(service: RunningService) -> None:
    """The edge gives every request its id (a replica takes it only with the edge's secret): one a
    client sends under the edge's header, or as X-Request-Id, is not the call's."""
    customer = new_customer(service)
    host, port = service.url.removeprefix("http://").split(":")
    forged = "0" * 32
    headers = {
        **customer.headers,
        "Content-Type": "application/json",
        "X-Gateway-Request-Id": forged,
        "X-Request-Id": forged,
    }
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/", orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"}), headers)
        response = conn.getresponse()
        assert response.status == 200 and "result" in orjson.loads(response.read())
        request_id = response.getheader("X-Request-Id") or ""
    finally:
        conn.close()
    assert re.fullmatch("[0-9a-f]{32}", request_id) and request_id != forged, request_id


def new_customer(service: RunningService) -> Customer:
    return funded_customer(service, 100_000)


async def open_socket(service: RunningService, key: str, source: str) -> ClientConnection:
    url = service.url.replace("http://", "ws://") + "/ws"
    subprotocols: Any = [f"auth.{key}", "solana-rpc"]
    ws = await connect(url, subprotocols=subprotocols, local_addr=(source, 0))
    with contextlib.suppress(ConnectionClosed):  # a socket past a cap may be closed already
        await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"}))
    return ws


async def answered(ws: ClientConnection) -> bool:
    try:
        return "result" in orjson.loads(await asyncio.wait_for(ws.recv(), 10))
    except ConnectionClosed:
        return False


@pytest.mark.asyncio
async def test_idle_sockets_past_their_caps_leave_http_answering_promptly(service: RunningService) -> None:
    greedy, others = await asyncio.to_thread(new_customer, service), []
    for _ in range(3):
        others.append(await asyncio.to_thread(new_customer, service))
    async with AsyncExitStack() as stack:
        sockets: list[ClientConnection] = []
        for _ in range(4):  # the account's whole cap, from one address
            sockets.append(await open_socket(service, greedy.api_key, "127.0.0.5"))
        assert all([await answered(ws) for ws in sockets])
        past = await open_socket(service, greedy.api_key, "127.0.0.5")
        assert not await answered(past)
        assert past.close_code == 4003, (past.close_code, past.close_reason)
        for ws in sockets:
            stack.push_async_callback(ws.close)
        # the address's cap: four more sockets of other accounts, then the upgrade is refused
        for customer in others[:2]:
            for _ in range(2):
                ws = await open_socket(service, customer.api_key, "127.0.0.5")
                stack.push_async_callback(ws.close)
                assert await answered(ws)
        with pytest.raises(InvalidStatus) as refused:
            await open_socket(service, others[2].api_key, "127.0.0.5")
        assert refused.value.response.status_code == 429
        # the replica's cap (12): four more from another address, then 503 whatever the address
        for i in range(4):
            ws = await open_socket(service, others[i % 2].api_key, "127.0.0.6")
            stack.push_async_callback(ws.close)
            assert await answered(ws)
        with pytest.raises(InvalidStatus) as full:
            await open_socket(service, others[2].api_key, "127.0.0.7")
        assert full.value.response.status_code == 503
        # with every socket the caps allow held open, HTTP is answered at once
        started = time.monotonic()
        assert await asyncio.to_thread(get, service, "/health", "127.0.0.1") == 200
        async with solana_client(service.url, api_key=others[2].api_key) as client:
            assert isinstance(client, AsyncClient)
            assert (await client.get_slot()).value > 0
        assert time.monotonic() - started < 3


def test_a_body_that_never_arrives_gets_the_edges_408(service: RunningService) -> None:
    host, port = service.url.removeprefix("http://").split(":")
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"})
    head = (
        "POST / HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(head.encode() + body[:5])  # the rest never comes
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    answer_head, _, answer_body = answer.partition(b"\r\n\r\n")
    error = orjson.loads(answer_body)["error"]
    assert error["code"] == "REQUEST_TIMEOUT"
    assert re.fullmatch("[0-9a-f]{32}", error["requestId"]), error  # to quote, as a replica's answer's
    assert f"\r\nx-request-id: {error['requestId']}\r\n".encode() in answer_head.lower() + b"\r\n"
    assert b"\r\naccess-control-allow-origin: *\r\n" in answer_head.lower() + b"\r\n"  # a page reads it too
    assert time.monotonic() - started < 10
