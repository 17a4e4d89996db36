"""HTTP/1.1 to one node URL over kept-alive connections: asyncio's transports and httptools' parser.

Why not aiohttp: every call a replica forwards is one POST to the node, and aiohttp spent about three
times the CPU of this module on each (bench/README.md, issue 42: 98-112 µs against 29-37 µs a call
at 64 in flight, one process, the same server), a quarter of a metered replica's time. Its cost is
its own machinery (a task per request to write the body on Python 3.11, the response and stream
objects, the timer context), none of which a fixed JSON-RPC POST needs. What is written here is only
the request head, the idle connections, a deadline and a size bound; parsing is httptools (llhttp, the
parser uvicorn reads requests with).

Left out, as the node needs none of it: redirects, cookies, proxies, compression (answers come as
they are), HTTP/2, pipelining (one request a connection at a time).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import ssl
import time
from typing import cast
from urllib.parse import unquote, urlsplit

import httptools

#: An idle connection older than this is closed rather than reused (aiohttp's default keep-alive
#: timeout): a server may have closed it meanwhile, and the request would then be lost on it.
IDLE_S = 15.0


class WireError(Exception):
    """The request failed in transport. ``sent`` is False only when no connection was made."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class AnswerTooLarge(Exception):
    """The answer is larger than the pool reads; the connection was dropped with the rest unread."""


class Target:
    """What every request to one URL shares: where to connect and the request head's fixed part."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the node URL must be http:// or https:// with a host")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = [f"Host: {parts.netloc.rpartition('@')[2]}"]
        if parts.username is not None:  # credentials in the URL, as aiohttp sent them: Basic auth
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            headers.append("Authorization: Basic " + base64.b64encode(pair).decode())
        self.path = path
        self._headers = "".join(f"{h}\r\n" for h in headers)

    def head(self, method: str, body: bytes | None) -> bytes:
        if body is None:
            return f"{method} {self.path} HTTP/1.1\r\n{self._headers}\r\n".encode()
        return (
            f"{method} {self.path} HTTP/1.1\r\n{self._headers}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()


class Connection(asyncio.Protocol):
    """One connection: at most one request at a time, its answer read into memory up to ``limit``."""

    def __init__(self, pool: WirePool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answer: asyncio.Future[tuple[int, bytes]] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.framed = False  # the answer says where it ends (Content-Length or chunked)
        self.closed = False
        self.idle_since = 0.0

    # -- asyncio's calls -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is one in all but its class

    def data_received(self, data: bytes) -> None:
        if self.answer is None:  # nothing asked: a server speaking out of turn is not reused
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail(WireError("the node's answer is not HTTP", sent=True))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        if self.answer is not None and self.parser.get_status_code() and not self.framed:
            self._complete()  # an answer delimited by the connection's end is whole now
        else:
            self._fail(WireError("the connection to the node was lost", sent=True))

    # -- httptools' calls ----------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length":
            self.framed = True
            if value.strip().isdigit() and int(value) > self.pool.limit:
                self._fail(AnswerTooLarge())
        elif name == b"transfer-encoding":
            self.framed = True

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.size > self.pool.limit:
            self._fail(AnswerTooLarge())
        else:
            self.chunks.append(body)

    def on_message_complete(self) -> None:
        self._complete()

    # -- the pool's calls ----------------------------------------------------------------------

    def send(self, head: bytes, body: bytes | None, timeout_s: float) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self.answer = answer = loop.create_future()
        self.timer = loop.call_later(timeout_s, self._expire)
        self.transport.write(head if body is None else head + body)
        return answer

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()  # nothing unread is waited for

    # -- inside --------------------------------------------------------------------------------

    def _expire(self) -> None:
        self._fail(TimeoutError())

    def _complete(self) -> None:
        answer, status = self.answer, self.parser.get_status_code()
        body = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        keep = not self.closed and self.parser.should_keep_alive()
        self._reset()
        if answer is not None and not answer.done():
            answer.set_result((status, body))
        if keep:
            self.pool.release(self)
        else:
            self.close()

    def _fail(self, exc: Exception) -> None:
        answer = self.answer
        self._reset()
        self.close()  # a connection with an answer half read is never reused
        if answer is not None and not answer.done():
            answer.set_exception(exc)

    def _reset(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.answer, self.timer, self.chunks, self.size, self.framed = None, None, [], 0, False
        # A fresh parser per answer: the old one would still report the last answer's status, and an
        # answer cut before its headers would be taken for a whole one delimited by the connection's end.
        self.parser = httptools.HttpResponseParser(self)


class WirePool:
    """Requests to one URL over at most ``connections`` connections, reusing idle ones.

    One per URL and event loop; :meth:`close` drops every connection, failing requests in flight.
    """

    def __init__(self, url: str, *, connections: int = 512, limit: int = 64 << 20) -> None:
        self.target = Target(url)
        self.limit = limit
        self._slots = asyncio.Semaphore(connections)
        self._idle: collections.deque[Connection] = collections.deque()
        self._open: set[Connection] = set()

    async def request(self, method: str, body: bytes | None, timeout_s: float) -> tuple[int, bytes]:
        """The answer's status and body (raises :class:`WireError`, :class:`AnswerTooLarge`, TimeoutError)."""
        async with self._slots:
            started = time.monotonic()
            conn = self._reuse(started) or await self._connect(timeout_s)
            remaining = timeout_s - (time.monotonic() - started)
            if remaining <= 0:
                self.release(conn)
                raise TimeoutError()
            answer = conn.send(self.target.head(method, body), body, remaining)
            try:
                return await answer
            except asyncio.CancelledError:
                conn.close()  # nobody waits for the rest of this answer: it is not read
                raise

    @property
    def open_connections(self) -> int:
        return len(self._open)

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    def release(self, conn: Connection) -> None:
        if conn.closed:
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def forget(self, conn: Connection) -> None:
        self._open.discard(conn)
        with contextlib.suppress(ValueError):
            self._idle.remove(conn)

    async def close(self) -> None:
        for conn in list(self._open):
            conn.close()
        self._idle.clear()

    def _reuse(self, now: float) -> Connection | None:
        while self._idle:
            conn = self._idle.pop()  # the newest: the likeliest still open at the server
            if not conn.closed and now - conn.idle_since < IDLE_S:
                return conn
            conn.close()
        return None

    async def _connect(self, timeout_s: float) -> Connection:
        loop = asyncio.get_running_loop()
        target = self.target
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: Connection(self), target.host, target.port, ssl=target.ssl),
                timeout_s,
            )
        except TimeoutError:
            raise  # an OSError too, but the caller's deadline passed: a timeout, not a refusal
        except (OSError, ssl.SSLError) as exc:
            raise WireError(f"could not connect: {type(exc).__name__}", sent=False) from exc
        self._open.add(conn)
        return conn
