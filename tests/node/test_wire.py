"""The node client's HTTP/1.1 (gateway/node/wire.py) against a real socket server that misbehaves on
command: kept-alive and closed connections, chunked and unframed answers, answers too large, too slow,
cut off or not HTTP. Every case runs on asyncio's loop and on uvloop's (the replicas run uvloop).

The server is this test's own (a few lines of asyncio): no real node closes, stalls or lies on command.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest
import uvloop

from gateway.node.wire import AnswerTooLarge, WireError, WirePool
from tests.recorded_metrics import recording

Scenario = Callable[["Server"], Awaitable[None]]


@dataclass
class Server:
    """Answers each request by its path: ``/ok`` echoes the body's length, the others misbehave."""

    port: int = 0
    connections: int = 0
    requests: list[tuple[bytes, dict[bytes, bytes], bytes]] = field(default_factory=list)
    _server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *lines = head.decode().split("\r\n")
                headers = {k.lower().encode(): v.encode() for k, _, v in (h.partition(": ") for h in lines if h)}
                body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
                target = line.split(" ")[1].encode()
                self.requests.append((target, headers, body))
                path = target.split(b"?")[0]
                if served and path in (b"/idle-close", b"/idle-half"):  # as a server closing an idle connection
                    if path == b"/idle-half":
                        writer.write(b"HTTP/1.1 200 OK\r\n")  # or as one cut off mid-answer
                        await writer.drain()
                    return
                served += 1
                if not await self._answer(path, body, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    async def _answer(self, path: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        """Writes the answer; False when the connection is to end after it."""
        echo = b'{"len":%d}' % len(body)
        if path in (b"/ok", b"/idle-close", b"/idle-half"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(echo), echo))
        elif path == b"/chunked":
            writer.write(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n')
        elif path == b"/unframed":  # no length: the answer ends with the connection
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + echo)
            await writer.drain()
            return False
        elif path == b"/close":
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(echo), echo))
            await writer.drain()
            return False
        elif path == b"/huge-length":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 1000)
        elif path == b"/huge-chunks":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(20):
                writer.write(b"400\r\n" + b"x" * 1024 + b"\r\n")
            writer.write(b"0\r\n\r\n")
        elif path == b"/silent":
            await asyncio.sleep(30)
        elif path == b"/cut":
            return False
        elif path == b"/garbage":
            writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()
        return True


def both_loops(scenario: Scenario) -> Callable[[str], None]:
    """A test that runs ``scenario`` against a fresh server on the loop named by its parameter."""

    async def main() -> None:
        server = Server()
        await server.start()
        try:
            await asyncio.wait_for(scenario(server), 20)
        finally:
            await server.stop()

    @pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
    def test(loop: str) -> None:
        if loop == "uvloop":
            uvloop.run(main())
        else:
            asyncio.run(main())

    test.__name__ = scenario.__name__
    test.__doc__ = scenario.__doc__
    return test


@both_loops
async def test_a_connection_is_kept_alive_and_bounded_in_number(server: Server) -> None:
    pool = WirePool(server.url("/ok"), connections=4)
    for n in range(30):
        assert await pool.request("POST", b"x" * n, 5) == (200, b'{"len":%d}' % n)
    assert server.connections == 1
    answers = await asyncio.gather(*(pool.request("POST", b"y" * n, 5) for n in range(40)))
    assert answers == [(200, b'{"len":%d}' % n) for n in range(40)]
    assert server.connections <= 4
    target, headers, _ = server.requests[-1]
    assert target == b"/ok" and headers[b"content-type"] == b"application/json"
    await pool.close()


@both_loops
async def test_chunked_and_connection_delimited_answers_are_read_whole(server: Server) -> None:
    chunked, unframed = WirePool(server.url("/chunked")), WirePool(server.url("/unframed"))
    assert await chunked.request("POST", b"{}", 5) == (200, b'{"a":1}')
    assert await unframed.request("POST", b"abc", 5) == (200, b'{"len":3}')
    assert await unframed.request("POST", b"abcd", 5) == (200, b'{"len":4}')  # on a new connection
    assert server.connections == 3
    await chunked.close()
    await unframed.close()


@both_loops
async def test_an_answer_over_the_limit_is_refused_and_its_connection_dropped(server: Server) -> None:
    for path in ("/huge-length", "/huge-chunks"):
        pool = WirePool(server.url(path), limit=10_000)
        with pytest.raises(AnswerTooLarge):
            await pool.request("POST", b"{}", 5)
        await asyncio.sleep(0.05)  # the connection's end reaches the pool
        assert (pool.idle_connections, pool.open_connections) == (0, 0)
    ok = WirePool(server.url("/ok"), limit=10_000)
    assert await ok.request("POST", b"{}", 5) == (200, b'{"len":2}')


@both_loops
async def test_a_silent_node_times_out_and_its_connection_is_not_reused(server: Server) -> None:
    pool = WirePool(server.url("/silent"))
    with pytest.raises(TimeoutError):
        await pool.request("POST", b"{}", 0.3)
    await asyncio.sleep(0.05)
    assert (pool.idle_connections, pool.open_connections) == (0, 0)  # dropped, never reused


@both_loops
async def test_a_connection_the_node_closed_is_not_reused(server: Server) -> None:
    pool = WirePool(server.url("/close"))
    assert await pool.request("POST", b"a", 5) == (200, b'{"len":1}')
    assert await pool.request("POST", b"ab", 5) == (200, b'{"len":2}')
    assert server.connections == 2


@both_loops
async def test_a_connection_idle_longer_than_the_pool_keeps_one_is_not_reused(server: Server) -> None:
    """A server may close an idle connection (uvicorn after 5 s): the pool reopens before it would."""
    pool = WirePool(server.url("/ok"), idle_s=1.0)
    assert await pool.request("POST", b"a", 5) == (200, b'{"len":1}')
    assert await pool.request("POST", b"ab", 5) == (200, b'{"len":2}')
    assert server.connections == 1  # reused while fresh
    await asyncio.sleep(1.1)  # this server keeps it open: only the pool's own rule can drop it
    assert await pool.request("POST", b"abc", 5) == (200, b'{"len":3}')
    assert server.connections == 2
    assert pool.open_connections == 1  # the stale one was closed, not left open beside the new one
    await pool.close()


@both_loops
async def test_a_read_lost_on_a_kept_alive_connection_is_sent_again_once(server: Server) -> None:
    """The node closed the idle connection as the request went out (no byte of an answer came): a
    replayable request is sent once more on a new connection; any other fails as before."""
    pool = WirePool(server.url("/idle-close"))
    with recording() as recorded:
        assert await pool.request("POST", b"a", 5, replayable=True) == (200, b'{"len":1}')
        assert await pool.request("POST", b"ab", 5, replayable=True) == (200, b'{"len":2}')
        assert (len(server.requests), server.connections) == (3, 2)  # the second went out twice
        with pytest.raises(WireError) as lost:
            await pool.request("POST", b"abc", 5)  # not replayable, on the kept-alive connection
    assert lost.value.sent is True
    assert (len(server.requests), server.connections) == (4, 2)  # sent once
    assert recorded.counts[("gateway_upstream_replays_total", ())] == 1
    await pool.close()


@both_loops
async def test_a_request_is_not_sent_again_after_part_of_an_answer_or_on_a_new_connection(server: Server) -> None:
    half = WirePool(server.url("/idle-half"))
    assert await half.request("POST", b"a", 5, replayable=True) == (200, b'{"len":1}')
    with pytest.raises(WireError):  # part of an answer came: the node had the request
        await half.request("POST", b"ab", 5, replayable=True)
    assert len(server.requests) == 2
    with pytest.raises(WireError):  # a new connection lost: not the idle close, not sent again
        await WirePool(server.url("/cut")).request("POST", b"{}", 5, replayable=True)
    assert len(server.requests) == 3
    await half.close()


@both_loops
async def test_transport_failures_say_whether_the_request_was_sent(server: Server) -> None:
    with pytest.raises(WireError) as cut:
        await WirePool(server.url("/cut")).request("POST", b"{}", 5)
    assert cut.value.sent is True
    with pytest.raises(WireError) as garbage:
        await WirePool(server.url("/garbage")).request("POST", b"{}", 5)
    assert garbage.value.sent is True
    await server.stop()
    with pytest.raises(WireError) as refused:
        await WirePool(server.url("/ok")).request("POST", b"{}", 5)
    assert refused.value.sent is False


@both_loops
async def test_a_cancelled_request_drops_its_connection(server: Server) -> None:
    pool = WirePool(server.url("/silent"))
    call = asyncio.ensure_future(pool.request("POST", b"{}", 10))
    await asyncio.sleep(0.2)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.sleep(0.05)
    assert (pool.idle_connections, pool.open_connections) == (0, 0)


@both_loops
async def test_the_urls_query_and_credentials_are_sent(server: Server) -> None:
    url = f"http://user:p%40ss@127.0.0.1:{server.port}/ok?api-key=k1"
    assert await WirePool(url).request("POST", b"{}", 5) == (200, b'{"len":2}')
    target, headers, _ = server.requests[-1]
    assert target == b"/ok?api-key=k1"
    assert headers[b"authorization"] == b"Basic " + base64.b64encode(b"user:p@ss")
    assert headers[b"host"] == f"127.0.0.1:{server.port}".encode()
