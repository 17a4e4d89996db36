"""Several frames of one socket in one write (:mod:`gateway.pubsub.uvicorn_protocol`) and charged as one
batch (:meth:`gateway.pubsub.session.WsSession.next_batch`): the frames still arrive whole and in order,
at a real ``websockets`` client, and billing stays exact."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import aiohttp
import asyncpg
import orjson
import pytest
import uvicorn
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from devnode.node import Devnode
from gateway.pubsub.uvicorn_protocol import SEND_FRAMES, FramesWebSocketProtocol
from gateway.pubsub.ws import UVICORN_WS_OPTIONS
from gateway.runtime.ports import free_port
from gateway.transports.http import build_http_app
from tests.chain import send_sol
from tests.pubsub.conftest import new_caller
from tests.pubsub.test_ws import credits_of, socket
from tests.sending.helpers import Caller
from tests.support import RunningGateway, stopped

pytestmark = pytest.mark.asyncio

SUBSCRIPTIONS = 40  # one node notification: 40 frames for one socket at once (batches of 16, 16, 8)
TRANSFERS = 3


async def test_a_socket_s_batched_notifications_arrive_whole_in_order_and_each_charged_once(
    gateway: RunningGateway, caller: Caller, payer: Keypair, devnode: Devnode
) -> None:
    receiver = Keypair().pubkey()
    params = [str(receiver), {"encoding": "base64", "commitment": "confirmed"}]
    subscribe = [
        {"jsonrpc": "2.0", "id": n, "method": "accountSubscribe", "params": params} for n in range(SUBSCRIPTIONS)
    ]
    before = await credits_of(caller)
    lamports: dict[int, list[int]] = defaultdict(list)
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        await ws.send(orjson.dumps(subscribe))  # one frame: the client's frame rate stays low
        subs: set[int] = set()
        while len(subs) < SUBSCRIPTIONS:
            subs.add(orjson.loads(await asyncio.wait_for(ws.recv(), 10))["result"])
        async with AsyncClient(devnode.rpc_url) as node:
            for n in range(1, TRANSFERS + 1):
                await send_sol(node, payer, receiver, n * 1_000_000)
                for _ in range(SUBSCRIPTIONS):  # each transfer's notifications before the next transfer's
                    note = orjson.loads(await asyncio.wait_for(ws.recv(), 10))  # whole: it parses
                    assert note["method"] == "accountNotification"
                    lamports[note["params"]["subscription"]].append(note["params"]["result"]["value"]["lamports"])
    expected = [sum(range(1, n + 1)) * 1_000_000 for n in range(1, TRANSFERS + 1)]
    assert set(lamports) == subs and all(seen == expected for seen in lamports.values())

    delivered = SUBSCRIPTIONS * TRANSFERS
    # every subscription and every notification 1 credit; the two balance reads 1 each (one before, one after)
    assert await credits_of(caller) == before - SUBSCRIPTIONS - delivered - 1
    entries = await notification_entries(caller, delivered)
    assert sum(e["calls"] for e in entries) == sum(e["credits"] for e in entries) == delivered


async def test_a_batch_that_would_cross_the_minimum_stops_at_the_same_notification_as_one_by_one(
    gateway: RunningGateway, db: asyncpg.Connection, payer: Keypair, devnode: Devnode
) -> None:
    """16 credits, two subscriptions (14 left), two notifications a transfer: 12, 10, then the third
    transfer's pair would leave 8. One at a time, the first of it leaves 9, below the minimum of 10:
    the socket closes 4002 after it, as it did before notifications were charged in batches."""
    receiver = Keypair().pubkey()
    params = [str(receiver), {"encoding": "base64", "commitment": "confirmed"}]
    async with aiohttp.ClientSession() as http:
        poor = await new_caller(http, gateway, db, 16)
        async with socket(gateway, poor.headers["X-Api-Key"]) as ws:
            subscribe = [{"jsonrpc": "2.0", "id": n, "method": "accountSubscribe", "params": params} for n in (1, 2)]
            await ws.send(orjson.dumps(subscribe))
            for _ in subscribe:
                assert "result" in orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            notes, ended = 0, 0
            async with AsyncClient(devnode.rpc_url) as node:
                for n in range(1, 4):
                    await send_sol(node, payer, receiver, n * 1_000_000)
                    for _ in range(2 if n < 3 else 1):
                        got = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
                        assert got["method"] == "accountNotification"
                        notes += 1
            with pytest.raises(ConnectionClosed):  # what follows the last paid notification, then the close
                while True:
                    method = orjson.loads(await asyncio.wait_for(ws.recv(), 10))["method"]
                    notes += method == "accountNotification"
                    ended += method == "subscriptionEnded"
    assert ws.close_code == 4002
    assert (notes, ended) == (5, 2)


async def notification_entries(caller: Caller, delivered: int) -> list[dict[str, Any]]:
    """The connection's ``accountNotification`` history entries, once they add up to ``delivered``
    calls or after the meter's settles had time to (it settles once a second)."""
    entries: list[dict[str, Any]] = []
    for _ in range(50):
        async with caller.http.get(caller.url + "/account/history", headers=caller.headers) as resp:
            entries = [e for e in (await resp.json())["entries"] if e["method"] == "accountNotification"]
        if sum(e["calls"] for e in entries) >= delivered:
            break
        await asyncio.sleep(0.1)
    return entries


# -- the protocol itself, under a bare ASGI app ------------------------------------------------------

TEXTS = [b"first", "caf\u00e9 \u2713".encode(), b"x" * 200, b"y" * 70_000, b"{}", b"last"]  # 7-, 16- and 64-bit lengths


class CountingProtocol(FramesWebSocketProtocol):
    """The protocol with its socket writes counted (an observer only: every write goes through)."""

    writes: ClassVar[list[int]] = []

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        write = transport.write

        def counted(data: bytes) -> None:
            CountingProtocol.writes.append(len(data))
            write(data)

        self.transport = _Writing(transport, counted)  # type: ignore[assignment]  # uvloop's transport takes no new attributes


class _Writing:
    def __init__(self, transport: Any, write: Any) -> None:
        self._transport, self.write = transport, write

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


async def frames_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "websocket"
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    offered = SEND_FRAMES in scope["extensions"]
    await send({"type": "websocket.send", "text": f"offered {offered}"})
    CountingProtocol.writes.clear()
    await send({"type": SEND_FRAMES, "texts": TEXTS})
    await receive()  # the client's close


@asynccontextmanager
async def bare_server(**options: Any) -> AsyncIterator[str]:
    port = free_port()
    config = uvicorn.Config(frames_app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **options)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield f"ws://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        await stopped(task)


@pytest.mark.parametrize("deflate", [False, True])
async def test_several_frames_in_one_message_are_one_write_and_arrive_whole_in_order(deflate: bool) -> None:
    options = {**UVICORN_WS_OPTIONS, "ws": CountingProtocol, "ws_max_size": 2**20}
    async with bare_server(**options) as url, connect(url, compression="deflate" if deflate else None) as ws:
        assert await asyncio.wait_for(ws.recv(), 10) == "offered True"
        received = [await asyncio.wait_for(ws.recv(decode=False), 10) for _ in TEXTS]
        assert received == TEXTS
        assert len(CountingProtocol.writes) == 1  # the six frames' bytes in one transport write
        assert (ws.protocol.extensions != []) is deflate


async def test_the_gateway_serves_ws_under_a_server_without_the_message(
    gateway: RunningGateway, caller: Caller
) -> None:
    """Under uvicorn's own protocol (no ``SEND_FRAMES`` in the scope) the writer sends one frame a
    message: a slot subscription still gets its answer and notifications."""
    port = free_port()
    app = gateway.app  # the fixture's app (started): served a second time by a plain uvicorn
    options = {**UVICORN_WS_OPTIONS, "ws": "websockets-sansio"}
    config = uvicorn.Config(
        build_http_app(app),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        **options,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        plain = RunningGateway(app, f"http://127.0.0.1:{port}")
        async with socket(plain, caller.headers["X-Api-Key"]) as ws:
            await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "slotSubscribe"}))
            answer = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            note = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
        assert isinstance(answer["result"], int)
        assert note["method"] == "slotNotification" and note["params"]["subscription"] == answer["result"]
    finally:
        server.should_exit = True
        await stopped(task)
