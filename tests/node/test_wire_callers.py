"""What one caller of the node client can do to another: read its answer, hold its slots, fill its memory.

Through ``HttpUpstream`` (what the replica calls) over real sockets to a fake node (an asyncio server on
127.0.0.1): the node's misbehaviour is the subject (an interim answer, a stall, large answers held
back), and no real node does it on command.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
import uvloop

from gateway.node.http import HttpUpstream, UpstreamTimeout, UpstreamUnavailable

Handler = Callable[[bytes, asyncio.StreamWriter], Awaitable[None]]
LOOPS = {"asyncio": asyncio.run, "uvloop": uvloop.run}


def answer(result: bytes) -> bytes:
    body = b'{"jsonrpc":"2.0","id":0,"result":%s}' % result
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def serve(handler: Handler) -> tuple[asyncio.Server, str]:
    """A node calling ``handler(request body, writer)`` for each request, one at a time a connection."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().partition(b"content-length: ")[2].partition(b"\r\n")[0] or 0)
                await handler(await reader.readexactly(length), writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


@pytest.mark.parametrize("loop", LOOPS)
def test_an_interim_answer_does_not_hand_a_callers_answer_to_the_next(loop: str) -> None:
    """A gets a 103 at once and its answer 0.3 s later; B calls meanwhile. Each gets its own answer
    (before: A failed on the 103, its connection went back to the pool and B read A's answer on it)."""
    hinted = asyncio.Event()

    async def node(body: bytes, writer: asyncio.StreamWriter) -> None:
        if b'"A"' in body:
            writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </hint>; rel=preload\r\n\r\n")
            await writer.drain()
            hinted.set()
            await asyncio.sleep(0.3)
            writer.write(answer(b'"for A"'))
        else:
            writer.write(answer(b'"for B"'))

    async def scenario() -> tuple[bytes | Exception, bytes]:
        server, url = await serve(node)
        upstream = HttpUpstream(url)
        try:
            a = asyncio.ensure_future(upstream.post(b'{"caller":"A"}', 5.0))
            await hinted.wait()
            await asyncio.sleep(0.05)  # what the client does with the 103 is done
            b = await upstream.post(b'{"caller":"B"}', 5.0)
            (a_answer,) = await asyncio.gather(a, return_exceptions=True)
            return a_answer, b
        finally:
            await upstream.close()
            server.close()

    a, b = LOOPS[loop](scenario())
    assert b == b'{"jsonrpc":"2.0","id":0,"result":"for B"}'
    assert a == b'{"jsonrpc":"2.0","id":0,"result":"for A"}'


@pytest.mark.parametrize("loop", LOOPS)
def test_the_wait_for_a_connection_slot_counts_in_the_timeout(loop: str) -> None:
    """Two slots held by calls to a node that answers after 5 s: a third call with a 0.5 s timeout gives
    up near 0.5 s (before: it waited for a slot with no deadline, then 0.5 s more)."""

    async def node(body: bytes, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5.0 if b"slow" in body else 0)
        writer.write(answer(b'"ok"'))

    async def scenario() -> float:
        server, url = await serve(node)
        upstream = HttpUpstream(url, connections=2)
        held = [asyncio.ensure_future(upstream.post(b'"slow"', 10.0)) for _ in range(2)]
        try:
            await asyncio.sleep(0.1)
            started = time.monotonic()
            with pytest.raises(UpstreamTimeout):
                await upstream.post(b'"quick"', 0.5)
            return time.monotonic() - started
        finally:
            for call in held:
                call.cancel()
            await asyncio.gather(*held, return_exceptions=True)
            await upstream.close()
            server.close()

    waited = LOOPS[loop](scenario())
    assert waited < 2.5, f"gave up after {waited:.2f} s, not near 0.5 s"


def test_the_replicas_answer_bytes_are_bounded_over_every_connection() -> None:
    """A 1 MiB budget, four answers of 330 KiB whose first 300 KiB come before the rest: the fourth does
    not fit beside three, so one call fails as a lost node answer (502's error, not a 500) and the
    three others are whole; nothing stays counted after."""
    first, rest = 300 << 10, 30 << 10
    go = asyncio.Event()

    async def node(body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (first + rest) + b"x" * first)
        await writer.drain()
        await go.wait()
        writer.write(b"y" * rest)

    async def scenario() -> tuple[list[bytes | BaseException], int]:
        server, url = await serve(node)
        upstream = HttpUpstream(url, buffered_answer_bytes=1 << 20)
        try:
            calls = [asyncio.ensure_future(upstream.post(b"{}", 10.0)) for _ in range(4)]
            done, _ = await asyncio.wait(calls, timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
            assert done, "no call failed while four answers were held"
            go.set()
            return await asyncio.gather(*calls, return_exceptions=True), upstream.budget.held
        finally:
            await upstream.close()
            server.close()

    results, held = uvloop.run(scenario())
    failed = [r for r in results if isinstance(r, BaseException)]
    assert len(failed) == 1
    assert isinstance(failed[0], UpstreamUnavailable) and failed[0].sent
    assert str(failed[0]) == "the gateway holds too many node answers at once"
    assert [r for r in results if not isinstance(r, BaseException)] == [b"x" * first + b"y" * rest] * 3
    assert held == 0
