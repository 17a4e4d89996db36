"""The one-write HTTP protocol (gateway/transports/one_write.py) on a real uvicorn server and real sockets.

A fixed-length answer's head must reach the client with its body, not before it; a streamed answer's head
and ``100 Continue`` must not wait for anything. The first test runs the same app on uvicorn's own
httptools protocol as well, where the head does arrive first: the difference is what the module adds, and
that test fails when a uvicorn upgrade changes the names it relies on. Every in-process gateway test serves
the app through this protocol too (tests/support.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from gateway.runtime.ports import free_port
from gateway.transports.one_write import OneWriteHttp

HOST = "127.0.0.1"
BODY = b'{"jsonrpc":"2.0","id":1,"result":42}'
#: Long enough for a written head to cross loopback many times over; the assertion it guards is that nothing came.
QUIET_S = 0.3


class Held:
    """An app that sends its answer's head, then waits for ``release`` before the body. ``/stream`` answers
    chunked (no Content-Length), ``/fail`` raises after the head, ``/empty`` is a 204; the rest answer BODY."""

    def __init__(self) -> None:
        self.head_sent = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        path = scope["path"]
        if path == "/empty":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        headers = [(b"content-type", b"application/json")]
        if path != "/stream":
            headers.append((b"content-length", b"%d" % len(BODY)))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        self.head_sent.set()
        if path == "/fail":
            raise RuntimeError("the app failed after its head")
        if path == "/hold":
            await self.release.wait()
        await send({"type": "http.response.body", "body": BODY})


@contextlib.asynccontextmanager
async def serving(app: Held, protocol: type | str = OneWriteHttp) -> AsyncIterator[int]:
    port = free_port()
    config = uvicorn.Config(app, host=HOST, port=port, http=protocol, lifespan="off", log_level="critical")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "the server stopped at start"
        await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        await task


async def arrived(reader: asyncio.StreamReader, quiet_s: float = QUIET_S) -> bytes:
    """What the server has written so far: reads until nothing more comes for ``quiet_s``."""
    data = b""
    with contextlib.suppress(TimeoutError):
        while chunk := await asyncio.wait_for(reader.read(65536), quiet_s):
            data += chunk
    return data


@pytest.mark.parametrize(("protocol", "head_first"), [(OneWriteHttp, False), ("httptools", True)])
async def test_a_fixed_length_answers_head_waits_for_its_body(protocol: type | str, head_first: bool) -> None:
    app = Held()
    async with serving(app, protocol) as port:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        await app.head_sent.wait()
        early = await arrived(reader)
        assert early.startswith(b"HTTP/1.1 200 OK\r\n") is head_first
        app.release.set()
        whole = early + await arrived(reader)
        writer.close()
    head, _, body = whole.partition(b"\r\n\r\n")
    assert body == BODY
    assert b"content-length: %d" % len(BODY) in head.lower()


async def test_a_streamed_answers_head_is_written_at_once() -> None:
    """An event stream's client sees its headers before the first event, however long that takes."""
    app = Held()
    async with serving(app) as port:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        await app.head_sent.wait()
        early = await arrived(reader)
        assert early.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"transfer-encoding: chunked" in early.lower()
        writer.close()


async def test_100_continue_is_not_held() -> None:
    """A client that waits for ``100 Continue`` before its body gets it (a held write would hang it)."""
    app = Held()
    async with serving(app) as port:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"{}")
        answer = await asyncio.wait_for(reader.readuntil(BODY), 5)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        writer.close()


async def test_pipelined_requests_are_each_answered_whole_in_order() -> None:
    app = Held()
    async with serving(app) as port:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(
            b"".join(b"%s HTTP/1.1\r\nHost: x\r\n\r\n" % line for line in (b"GET /a", b"HEAD /b", b"GET /empty"))
        )
        first = await asyncio.wait_for(reader.readuntil(BODY), 5)
        second = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)  # HEAD: its head, no body
        third = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        assert second.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"content-length: %d" % len(BODY) in second.lower()
        assert third.startswith(b"HTTP/1.1 204 No Content\r\n")
        assert await arrived(reader) == b""  # nothing more: the HEAD's body was not sent
        writer.close()


async def test_an_app_failing_after_its_head_closes_the_connection() -> None:
    """uvicorn closes a connection whose answer cannot be finished; the held head goes out first, as it
    would have without the protocol, and the client sees the answer cut short."""
    app = Held()
    async with serving(app) as port:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"GET /fail HTTP/1.1\r\nHost: x\r\n\r\n")
        received = await asyncio.wait_for(reader.read(), 5)  # until the server closes
        assert received.startswith(b"HTTP/1.1 200 OK\r\n")
        assert received.endswith(b"\r\n\r\n")
        writer.close()


async def test_an_http_client_gets_every_answer() -> None:
    app = Held()
    connector = aiohttp.TCPConnector(limit=1)  # one kept-alive connection for every request
    async with serving(app) as port, aiohttp.ClientSession(f"http://{HOST}:{port}", connector=connector) as client:
        for _ in range(3):
            async with client.post("/", data=b"x" * 100_000) as answer:
                assert (answer.status, await answer.read()) == (200, BODY)
        async with client.head("/") as answer:
            assert answer.headers["content-length"] == str(len(BODY))
        async with client.get("/empty") as answer:
            assert answer.status == 204
        async with client.get("/stream") as answer:
            assert await answer.read() == BODY
