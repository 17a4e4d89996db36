"""HTTP/1.1 to one node URL over kept-alive connections: asyncio's transports and httptools' parser.

Why not a maintained client: every call a replica forwards is one POST to the node, and each of them
costs more CPU a call than this module (bench/README.md, "The node client: wire.py against maintained
clients", ``python -m bench.node_client --client``; µs of CPU a call at 64 / one in flight, medians of
5 rounds, the quietest of three runs): this module 14.6 / 22.4-23.3, pyreqwest (Rust's reqwest) 31.5 /
47.2, aiohttp tuned 57.1 / 75.9, httpcore 1,157 / 287. What is written here is only the
request head, the idle connections, a deadline, the size bounds and the replay of a read lost on a
connection the node closed while idle; parsing is httptools (llhttp, the
parser uvicorn reads requests with), stopped at each interim answer's head, which llhttp would read a
body after (:class:`Connection`). tests/node/test_wire_hostile.py holds it to h11's verdicts on
hostile answers; it refuses four that h11 takes (obs-fold, a control character in a header, the same
Content-Length twice, Content-Length with Transfer-Encoding, in an interim answer's head too).

Left out, as the node needs none of it: redirects, cookies, proxies, compression (answers come as
they are), HTTP/2, pipelining (one request a connection at a time). A byte a node sends after an
answer closes the connection; one sent so late that the next request is already on its way cannot be
told from that request's answer, as with any HTTP/1.1 client: the node must not send it.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import re
import ssl
import time
from collections.abc import Mapping
from typing import cast
from urllib.parse import unquote, urlsplit

import httptools

from gateway.base import metrics
from gateway.core.params import whole_number

#: An idle connection older than this is closed rather than reused: a server may close it meanwhile, and
#: a request written as its close is on the way is lost on it. Under the 5 s after which uvicorn, Node.js
#: and Apache close an idle connection (aiohttp's client keeps 15 s, and loses requests so to them).
IDLE_S = 4.0
#: The most bytes of status lines and header fields one answer may have, its interim answers' included
#: (h11's own default is 16 KiB): llhttp sets no bound, and httptools holds a header until it ends.
MAX_HEAD_BYTES = 64 << 10
#: The default of answer bytes all the connections of a client hold at once (docs/configuration.md,
#: ``upstream_buffered_answer_bytes``).
DEFAULT_BUFFERED_BYTES = 256 << 20

_CR_LF = b"\r\n"
_EMPTY_LINES = re.compile(rb"[\r\n]*")


class WireError(Exception):
    """The request failed in transport. ``sent`` is False only when no connection was made."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class Unanswered(WireError):
    """The connection ended before any byte of the answer came: the node may or may not have read the
    request, and wrote nothing back."""

    def __init__(self) -> None:
        super().__init__("the connection to the node was lost", sent=True)


class AnswerTooLarge(Exception):
    """The answer is larger than the pool reads; the connection was dropped with the rest unread."""


class BufferFull(WireError):
    """The answers in flight already hold the client's whole :class:`AnswerBudget`; this one was dropped."""

    def __init__(self) -> None:
        super().__init__("the node answers read at once exceed the gateway's buffer", sent=True)


class _Stop(Exception):
    """Raised in a parser callback to stop llhttp where it is (what to do is in the connection's state)."""


class AnswerBudget:
    """Answer bytes held at once over every pool sharing it (one a client, so a replica's bound):
    without it each of the 512 connections a node URL could hold ``limit`` bytes."""

    def __init__(self, limit: int = DEFAULT_BUFFERED_BYTES) -> None:
        self.limit = limit
        self.held = 0

    def take(self, n: int) -> bool:
        if self.held + n > self.limit:
            return False
        self.held += n
        return True

    def give(self, n: int) -> None:
        self.held -= n


def tls_context(ca_file: str | None = None) -> ssl.SSLContext:
    """The system's CAs (or OpenSSL's ``SSL_CERT_FILE``), and ``ca_file``'s too when given: a node's
    private CA trusted by this client alone, not by the process (docs/configuration.md,
    ``upstream_ca_file``). Raises OSError or ssl.SSLError when the file cannot be read as CAs."""
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


class Target:
    """What every request to one URL shares: where to connect and the request head's fixed part
    (``headers``: the caller's own, such as a provider's key, sent with every request)."""

    def __init__(self, url: str, ca_file: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the node URL must be http:// or https:// with a host")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = tls_context(ca_file) if parts.scheme == "https" else None
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"Host: {parts.netloc.rpartition('@')[2]}"]
        if parts.username is not None:  # credentials in the URL, as aiohttp sent them: Basic auth
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            lines.append("Authorization: Basic " + base64.b64encode(pair).decode())
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        self.path = path
        self._headers = "".join(f"{h}\r\n" for h in lines)

    def head(self, method: str, body: bytes | None) -> bytes:
        if body is None:
            return f"{method} {self.path} HTTP/1.1\r\n{self._headers}\r\n".encode()
        return (
            f"{method} {self.path} HTTP/1.1\r\n{self._headers}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()


class Connection(asyncio.Protocol):
    """One connection: at most one request at a time, its answer read into memory up to ``limit``.

    It goes back to the pool only after one whole final answer (status 200 or more) with no byte
    after it: interim answers (1xx but 101) are skipped (RFC 9110, 15.2); anything after the final
    answer, in the same read or later while idle, closes it, so no byte of one answer is ever read as
    part of the next caller's.

    An interim answer has no content whatever its head says (RFC 9110, 15.2; RFC 9112, 6.3): the byte
    after its head begins the next answer. llhttp would read a body for a 1xx other than 100-103 by its
    Content-Length or chunks, and hand it on as the final answer's, so the parser is stopped at every
    interim head and a fresh one reads from the end of that head (:meth:`_after_interim`)."""

    def __init__(self, pool: WirePool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answer: asyncio.Future[tuple[int, bytes]] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.chunks: list[bytes] = []
        self.size = 0  # body bytes held, taken from the pool's budget
        self.received = 0  # bytes read while the final answer's head is unfinished
        self.fields = 0  # bytes of status lines and header fields of this answer, as parsed
        self.framed = False  # the answer says where it ends (Content-Length or chunked)
        self.headed = False  # the final answer's head is read
        self.keep = False  # the final answer lets the connection be reused
        self.result: tuple[int, bytes] | None = None  # the final answer, once whole
        self.error: Exception | None = None  # why a callback stopped the parser
        self.after = False  # bytes came after the final answer
        self.interim = False  # the parser stopped at the end of an interim answer's head
        self.kept: list[bytes | memoryview] | None = None  # the answer's earlier reads, its head unfinished
        self.closed = False
        self.idle_since = 0.0

    # -- asyncio's calls -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is one in all but its class

    def data_received(self, data: bytes | memoryview) -> None:  # a memoryview: the rest after an interim head
        if self.answer is None:  # nothing asked: a server speaking out of turn is not reused
            self.close()
            return
        if not self.headed:
            self.received += len(data)  # checked below only if the head is still unfinished (as h11 does)
        while True:
            try:
                if len(data) > 1 and data[-1] in _CR_LF:
                    # llhttp skips CR and LF between answers unseen: fed alone, the last byte tells whether
                    # the answer ended before it (then something came after it).
                    view = memoryview(data) if len(data) > 4096 else data  # a small copy costs less than a view
                    self.parser.feed_data(view[:-1])
                    if self.result is None:
                        self.parser.feed_data(data[-1:])
                    else:
                        self.after = True
                else:
                    self.parser.feed_data(data)
            except (httptools.HttpParserError, httptools.HttpParserUpgrade):
                if self.interim:  # what follows the interim head is read anew, as the next answer
                    data = self._after_interim(data)
                    if data:
                        continue
                    return
                if self.result is None:
                    self._fail(self.error or WireError("the node's answer is not HTTP", sent=True))
                    return
                self.after = True  # what follows the answer is not read, whatever it is
            break
        if self.result is not None:
            self._complete()
        elif not self.headed:
            if self.received > MAX_HEAD_BYTES:
                self._fail(WireError("the node's answer head is too large", sent=True))
            elif self.kept is None:  # kept so that an interim head ending in a later read is found from its start
                self.kept = [data]
            else:
                self.kept.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        if self.answer is None:
            return
        if self.result is None and self.headed and not self.framed:  # delimited by the connection's end
            self.result = (self.parser.get_status_code(), self._body())
        if self.result is not None:
            self._complete()
        elif self.received == 0:  # not a byte of this answer came (``received`` counts from the first)
            self._fail(Unanswered())
        else:
            self._fail(WireError("the connection to the node was lost", sent=True))

    # -- httptools' calls ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.result is not None:  # a second answer: not read (data_received marks it)
            raise _Stop()

    def on_status(self, status: bytes) -> None:
        self.fields += len(status) + 15  # the status line's own bytes but the reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields += len(name) + len(value) + 4
        if self.fields > MAX_HEAD_BYTES:  # a head that came whole in one read (data_received counts the rest)
            self._refuse(WireError("the node's answer head is too large", sent=True))
        name = name.lower()
        if name == b"content-length":
            self.framed = True
            # llhttp refuses more than 64 bits' worth but not leading zeros: 5,000 of them would make
            # int() raise inside the parser. whole_number converts only what fits the bound. An interim
            # answer's frames nothing (it has no content): not refused for its size.
            length = whole_number(value.strip(b" \t").decode("latin-1"), self.pool.limit)
            if length is None and self.parser.get_status_code() >= 200:
                self._refuse(AnswerTooLarge())
        elif name == b"transfer-encoding":
            self.framed = True
            if value.strip().lower() != b"chunked":  # nothing decodes another coding here (as h11)
                self._refuse(WireError("the node's answer has a transfer coding other than chunked", sent=True))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 200:
            if status < 100 or status == 101:  # 101 would switch protocols, which was not asked
                self._refuse(WireError(f"the node answered status {status}", sent=True))
            self.interim = True  # no content follows, whatever the head says: stopped here (class docstring)
            raise _Stop()
        self.headed = True

    def on_body(self, body: bytes) -> None:
        n = len(body)
        if self.size + n > self.pool.limit:
            self._refuse(AnswerTooLarge())
        if not self.pool.budget.take(n):
            self._refuse(BufferFull())
        self.size += n
        self.chunks.append(body)

    def on_message_complete(self) -> None:  # of a final answer: an interim one stops at its head
        self.keep = self.parser.should_keep_alive()
        self.result = (self.parser.get_status_code(), self._body())

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

    def _refuse(self, exc: Exception) -> None:
        self.error = exc
        raise _Stop()

    def _after_interim(self, data: bytes | memoryview) -> memoryview:
        """What follows the interim head that ended in ``data`` (the rest of the read, maybe empty), with a
        fresh parser for it: llhttp takes only CRLF line ends, so the head ends at the first empty line
        after its status line (llhttp skips empty lines before a status line: so does this)."""
        if self.kept is not None:  # the head began in an earlier read (``data`` is a whole read then)
            message: bytes = b"".join((*self.kept, data))
            start = 0
            self.kept = None
        elif isinstance(data, memoryview):  # what followed an earlier interim head in this read
            message = cast(bytes, data.obj)  # a read's bytes, of which data is the tail
            start = len(message) - len(data)
        else:
            message, start = data, 0
        skipped = _EMPTY_LINES.match(message, start)  # (it matches even nothing)
        end = message.find(b"\r\n\r\n", skipped.end() if skipped else start)
        if end < 0:  # not expected: llhttp ended the head at such a line
            self._fail(WireError("the node's answer is not HTTP", sent=True))
            return memoryview(b"")
        self.interim = self.framed = False
        self.parser = httptools.HttpResponseParser(self)
        return memoryview(message)[end + 4 :]

    def _body(self) -> bytes:
        return self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)

    def _expire(self) -> None:
        self._fail(TimeoutError())

    def _complete(self) -> None:
        answer, result = self.answer, self.result
        keep = self.keep and not self.closed and not self.after
        self._reset()
        if answer is not None and not answer.done() and result is not None:
            answer.set_result(result)
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
        self.pool.budget.give(self.size)
        self.answer, self.timer, self.chunks, self.size, self.received, self.fields = None, None, [], 0, 0, 0
        self.framed = self.headed = self.keep = self.after = self.interim = False
        self.result = self.error = self.kept = None
        # A fresh parser per answer: the old one may have stopped mid-answer, or after the last one.
        self.parser = httptools.HttpResponseParser(self)


class WirePool:
    """Requests to one URL over at most ``connections`` connections, reusing idle ones.

    One per URL and event loop; :meth:`close` drops every connection, failing requests in flight.
    Pools given the same ``budget`` hold at most its bytes of answers between them.
    """

    def __init__(
        self,
        url: str,
        *,
        connections: int = 512,
        limit: int = 64 << 20,
        budget: AnswerBudget | None = None,
        ca_file: str | None = None,
        idle_s: float = IDLE_S,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.target = Target(url, ca_file, headers)
        self.idle_s = idle_s
        self.limit = limit
        self.budget = budget or AnswerBudget()
        self._slots = asyncio.Semaphore(connections)
        self._idle: collections.deque[Connection] = collections.deque()
        self._open: set[Connection] = set()

    async def request(
        self, method: str, body: bytes | None, timeout_s: float, *, replayable: bool = False
    ) -> tuple[int, bytes]:
        """The answer's status and body (raises :class:`WireError`, :class:`AnswerTooLarge`, TimeoutError).

        ``timeout_s`` counts from the call: the wait for a free connection slot is part of it.
        ``replayable``: the request may reach the node twice with the effect of once (a read). Such a
        request lost on a kept-alive connection before any byte of its answer is sent once more, on a
        new connection: the node closed the idle connection as the request went out (docs/reliability.md)."""
        started = time.monotonic()
        slots = self._slots
        if slots.locked():
            async with asyncio.timeout(timeout_s):
                await slots.acquire()
        else:
            await slots.acquire()  # free: taken without a pass of the loop
        try:
            head = self.target.head(method, body)
            conn = self._reuse(time.monotonic())
            again = replayable and conn is not None  # only a kept-alive connection is sent on once more
            while True:
                if conn is None:
                    conn = await self._connect(timeout_s - (time.monotonic() - started))
                remaining = timeout_s - (time.monotonic() - started)
                if remaining <= 0:
                    self.release(conn)
                    raise TimeoutError()
                answer = conn.send(head, body, remaining)
                try:
                    return await answer
                except asyncio.CancelledError:
                    conn.close()  # nobody waits for the rest of this answer: it is not read
                    raise
                except Unanswered:
                    if not again:
                        raise
                    metrics.UPSTREAM_REPLAYS.inc()
                    conn, again = None, False
        finally:
            slots.release()

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
            if not conn.closed and now - conn.idle_since < self.idle_s:
                return conn
            conn.close()
        return None

    async def _connect(self, timeout_s: float) -> Connection:
        if timeout_s <= 0:
            raise TimeoutError()
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
