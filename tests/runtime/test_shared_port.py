"""The shared service port (gateway/runtime/shared_port.py), its listeners in this process on real sockets.

Each listener serves a small ASGI app naming it, as a replica's would answer; the clients are real TCP
connections speaking HTTP/1.1 and the ``websockets`` client. Two listeners share one port as two replicas of
a node do; the per-source cap, the idle keep-alive, the drain (listener closed, ``Connection: close``, the
kernel's new connections to the other listener, in-flight requests finished) are checked on them. The first
test fails when a Ray upgrade changes a replica method :func:`gateway.runtime.shared_port.install` wraps
or a function of Serve's it composes the port's app with.
The whole service in this mode (two replicas in Ray on the port, through ``gateway up``) is
tests/stacks/test_reuseport.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send
from websockets.asyncio.client import connect

from gateway.runtime import lean_ingress, shared_port
from gateway.runtime.ports import free_port
from gateway.runtime.shared_port import SharedPort, SharedPortListener
from gateway.transports.deadline import BODY_WHOLE

HOST = "127.0.0.1"


def test_the_wrapped_replica_methods_are_the_pinned_rays() -> None:
    """If this fails, Ray changed a method the shared port wraps: read the new source, then renew
    :data:`shared_port.WRAPPED` (``python -m gateway.runtime.shared_port``)."""
    assert lean_ingress.digests(shared_port.WRAPPED) == shared_port.WRAPPED


class Named:
    """An app answering its name; ``/slow`` waits until ``release`` is set (if ``holds``); ``/ws`` echoes once."""

    def __init__(self, name: str, holds: bool = True) -> None:
        self.name = name
        self.holds = holds
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.entered = 0  # requests handed to the app (a replica's path, where a request holds a slot)
        self.whole: list[bool] = []  # per request handed over: whether the listener said its body was whole

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.accept"})
            message = await receive()
            if message["type"] == "websocket.receive":
                await send({"type": "websocket.send", "text": f"{self.name}:{message.get('text')}"})
                await receive()  # until the client or the server closes
            return
        if scope["path"] == "/slow" and self.holds:
            self.started.set()
            await self.release.wait()
        self.entered += 1
        self.whole.append(scope.get(BODY_WHOLE, False))
        received = b""
        while True:
            message = await receive()
            received += message.get("body", b"")
            if not message.get("more_body"):
                break
        body = self.name.encode() if not received else b"%s:%d" % (self.name.encode(), len(received))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def serving(port: int, app: ASGIApp, **limits: Any) -> AsyncIterator[SharedPortListener]:
    """A listener on ``port`` serving ``app``, with ``limits`` of :class:`SharedPort`'s, stopped at the end."""
    listener = SharedPortListener(SharedPort(HOST, port, **limits), app)
    await listener.start()
    try:
        yield listener
    finally:
        await listener.stop(5.0)


@contextlib.asynccontextmanager
async def listening(
    port: int, name: str, holds: bool = True, **limits: Any
) -> AsyncIterator[tuple[SharedPortListener, Named]]:
    app = Named(name, holds)
    try:
        async with serving(port, app, **limits) as listener:
            yield listener, app
    finally:
        app.release.set()


async def settled(check: Callable[[], bool]) -> None:
    """Until ``check`` holds, at most 2 s: the server's side of what a client just did (the caller asserts)."""
    for _ in range(100):
        if check():
            return
        await asyncio.sleep(0.02)


class Conn:
    """One HTTP/1.1 connection, requests sent one after the other on it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        return cls(*await asyncio.open_connection(HOST, port))

    async def get(self, path: str = "/") -> tuple[dict[str, str], str]:
        """The answer's headers (lower-cased) and body; raises ConnectionError when the server closed."""
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await self.writer.drain()
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
        lines = head.decode().split("\r\n")[1:-2]
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        body = await self.reader.readexactly(int(headers["content-length"]))
        return headers, body.decode()

    async def closed_by_server(self, within_s: float = 10.0) -> bool:
        """True when the server closes the connection (EOF or reset) within ``within_s``."""
        try:
            return await asyncio.wait_for(self.reader.read(1), within_s) == b""
        except ConnectionError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.writer.close()


def test_gateway_up_warns_when_the_machine_resets_a_stopping_listeners_queue(tmp_path: Path) -> None:
    switch = tmp_path / "tcp_migrate_req"
    switch.write_text("0\n")
    warning = shared_port.migrate_req_warning(switch)
    assert warning is not None and "sysctl -w net.ipv4.tcp_migrate_req=1" in warning
    switch.write_text("1\n")
    assert shared_port.migrate_req_warning(switch) is None
    assert shared_port.migrate_req_warning(tmp_path / "absent") is None  # a kernel without the switch


async def test_two_listeners_share_the_port_and_the_kernel_spreads_connections() -> None:
    port = free_port()
    async with listening(port, "one"), listening(port, "two"):
        conns = [await Conn.open(port) for _ in range(64)]
        names = {(await conn.get())[1] for conn in conns}
        for conn in conns:
            conn.close()
    assert names == {"one", "two"}  # all 64 hashed to one of two listeners: about 1 in 2**63


async def test_a_port_held_without_reuseport_is_a_clear_error() -> None:
    holder = socket.socket()
    holder.bind((HOST, 0))
    holder.listen()
    try:
        listener = SharedPortListener(SharedPort(HOST, holder.getsockname()[1]), Named("x"))
        with pytest.raises(RuntimeError, match="holds the port without SO_REUSEPORT"):
            await listener.start()
    finally:
        holder.close()


async def test_connections_past_the_per_source_cap_are_closed_unread() -> None:
    port = free_port()
    async with listening(port, "one", connections_per_source=3) as (listener, _):
        held = [await Conn.open(port) for _ in range(3)]
        for conn in held:
            assert (await conn.get())[1] == "one"
        extra = await Conn.open(port)
        assert await extra.closed_by_server()
        assert listener.cap.held(HOST) == 3
        held.pop().close()
        await settled(lambda: listener.cap.held(HOST) == 2)  # the server sees the close
        again = await Conn.open(port)
        assert (await again.get())[1] == "one"
        again.close()
        for conn in held:
            conn.close()


async def test_a_websocket_counts_once_against_the_cap_and_is_released_when_it_closes() -> None:
    port = free_port()
    async with listening(port, "one", connections_per_source=2) as (listener, _):
        async with connect(f"ws://{HOST}:{port}/ws") as ws:
            await ws.send("hi")
            assert await ws.recv() == "one:hi"
            assert listener.cap.held(HOST) == 1
            conn = await Conn.open(port)
            assert (await conn.get())[1] == "one"  # the second of two
            refused = await Conn.open(port)
            assert await refused.closed_by_server()
            conn.close()
        await settled(lambda: listener.cap.held(HOST) == 0)
        assert listener.cap.held(HOST) == 0


async def test_a_stopping_listener_closes_its_websockets_1012() -> None:
    port = free_port()
    async with listening(port, "one") as (listener, _), connect(f"ws://{HOST}:{port}/ws") as ws:
        await ws.send("hi")
        assert await ws.recv() == "one:hi"
        await listener.stop(5.0)
        await ws.wait_closed()
        assert ws.close_code == 1012


async def test_an_idle_keep_alive_connection_is_closed_after_keepalive_s() -> None:
    port = free_port()
    async with listening(port, "one", keepalive_s=1):
        conn = await Conn.open(port)
        headers, _ = await conn.get()
        assert headers.get("connection") != "close"
        assert await conn.closed_by_server(within_s=10)


async def test_a_connection_past_rebalance_s_is_told_to_close_so_its_client_is_hashed_again() -> None:
    port = free_port()
    async with listening(port, "one", rebalance_s=0.5):
        conn = await Conn.open(port)
        headers, _ = await conn.get()
        assert headers.get("connection") != "close"
        await asyncio.sleep(0.6)
        headers, _ = await conn.get()
        assert headers.get("connection") == "close"
        assert await conn.closed_by_server()
        fresh = await Conn.open(port)
        assert (await fresh.get())[0].get("connection") != "close"
        fresh.close()


class Large:
    """An app answering ``SIZE`` bytes in parts; ``finished`` once its last write returned (sent, or the
    connection gone), which is when a replica's request gives its slot back."""

    SIZE = 32 * 1024 * 1024
    PART = 256 * 1024

    def __init__(self) -> None:
        self.finished = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        headers = [(b"content-length", b"%d" % self.SIZE)]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for sent in range(0, self.SIZE, self.PART):
            await send(
                {"type": "http.response.body", "body": b"x" * self.PART, "more_body": sent + self.PART < self.SIZE}
            )
        self.finished.set()


async def slow_reader(port: int) -> socket.socket:
    """A plain socket with a small receive buffer (no transport reading for it), having asked for the large
    answer and read none of it."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await loop.sock_connect(sock, (HOST, port))
    await loop.sock_sendall(sock, b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock


async def received(sock: socket.socket) -> bytes:
    """What the socket reads until the server closed the connection (EOF or reset), at most 20 s."""
    loop, parts = asyncio.get_running_loop(), []
    with contextlib.suppress(ConnectionError):
        while chunk := await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 20):
            parts.append(chunk)
    return b"".join(parts)


async def test_a_client_that_stops_reading_its_answer_is_cut_off_and_the_request_ends() -> None:
    """HAProxy's ``timeout client``, kept in the replica: writes paused by a client that does not read are
    timed from the loop's pause, and the connection aborted past ``write_timeout_s`` (1 s here), so the
    app's writes return and its request ends. Without it the app would wait on the client for ever."""
    port = free_port()
    app = Large()
    async with serving(port, app, write_timeout_s=1.0) as listener:
        with await slow_reader(port) as sock:
            await asyncio.wait_for(app.finished.wait(), 15)
            assert listener.stalls.paused == {}
            answer = await received(sock)
        assert answer.startswith(b"HTTP/1.1 200") and len(answer) < Large.SIZE  # a part, then the connection gone


async def test_a_client_that_pauses_shorter_than_the_write_timeout_gets_its_whole_answer() -> None:
    port = free_port()
    app = Large()
    async with serving(port, app, write_timeout_s=5.0) as listener:
        with await slow_reader(port) as sock:
            await settled(lambda: listener.stalls.paused != {})  # the server's buffer full: its writes paused
            assert listener.stalls.paused != {}
            await asyncio.sleep(0.5)  # a pause the client makes, a tenth of the timeout
            loop, answer = asyncio.get_running_loop(), b""

            async def more() -> bytes:
                chunk = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 20)
                assert chunk, "the server closed the connection of a client that was reading"
                return chunk

            while b"\r\n\r\n" not in answer:
                answer += await more()
            head, _, rest = answer.partition(b"\r\n\r\n")
            body = len(rest)
            while body < Large.SIZE:
                body += len(await more())
        assert head.startswith(b"HTTP/1.1 200") and body == Large.SIZE
        await asyncio.wait_for(app.finished.wait(), 15)
        assert listener.stalls.paused == {}


async def test_a_slow_body_is_waited_for_before_the_replica_sees_it_and_408_when_late() -> None:
    port = free_port()
    async with listening(port, "one", body_timeout_s=1.0, cors_allowed_origins=("https://app.example",)) as (_, app):
        conn = await Conn.open(port)
        conn.writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234")
        await conn.writer.drain()
        await asyncio.sleep(0.3)
        assert app.entered == 0  # half a body: no slot taken
        conn.writer.write(b"56789")
        head = await asyncio.wait_for(conn.reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200") and await conn.reader.readexactly(6) == b"one:10"
        assert app.entered == 1

        late = await Conn.open(port)
        late.writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\nContent-Length: 10\r\n\r\n012")
        await late.writer.drain()
        head = await asyncio.wait_for(late.reader.readuntil(b"\r\n\r\n"), 10)
        lines = head.decode().lower().split("\r\n")
        assert lines[0].startswith("http/1.1 408"), head
        assert "access-control-allow-origin: https://app.example" in lines, head
        length = next(int(line.split(":")[1]) for line in lines if line.startswith("content-length"))
        doc = json.loads(await late.reader.readexactly(length))
        assert doc["error"]["code"] == "REQUEST_TIMEOUT", doc
        assert await late.closed_by_server()
        assert app.entered == 1  # the late one never reached it

        big = await Conn.open(port)  # past the buffer: handed on while the rest arrives
        size = shared_port.BUFFER_BYTES + 10
        big.writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size)
        big.writer.write(b"x" * shared_port.BUFFER_BYTES)
        await big.writer.drain()
        await settled(lambda: app.entered == 2)
        assert app.entered == 2
        big.writer.write(b"y" * 10)
        head = await asyncio.wait_for(big.reader.readuntil(b"\r\n\r\n"), 10)
        echoed = f"one:{size}".encode()
        assert head.startswith(b"HTTP/1.1 200") and await big.reader.readexactly(len(echoed)) == echoed
        assert app.whole == [True, False]  # the replica's body deadline skips the first, times the second
        for c in (conn, late, big):
            c.close()


async def test_a_draining_listener_sends_new_connections_to_the_other_and_closes_its_own() -> None:
    port = free_port()
    async with listening(port, "stays", holds=False) as _, listening(port, "drains") as (draining, app):
        conns = [await Conn.open(port) for _ in range(32)]
        held = [conn for conn in conns if (await conn.get())[1] == "drains"]
        assert held
        slow = await Conn.open(port)
        while True:  # a connection of the draining listener, with a request in flight on it
            slow.writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            await slow.writer.drain()
            try:
                await asyncio.wait_for(app.started.wait(), 0.5)
                break
            except TimeoutError:  # the other listener's: it answered at once
                head = await slow.reader.readuntil(b"\r\n\r\n")
                await slow.reader.readexactly(int(head.split(b"content-length: ")[1].split(b"\r\n")[0]))
                slow.close()
                slow = await Conn.open(port)

        draining.stop_accepting()
        news = [await Conn.open(port) for _ in range(32)]
        assert {(await conn.get())[1] for conn in news} == {"stays"}  # the kernel's new connections
        headers, name = await held[0].get()  # a connection it holds is served, and told to go
        assert (name, headers.get("connection")) == ("drains", "close")
        assert await held[0].closed_by_server()

        stopping = asyncio.ensure_future(draining.stop(10.0))
        for conn in held[1:]:  # idle: closed
            assert await conn.closed_by_server()
        assert not stopping.done()  # the request in flight holds it
        app.release.set()
        slow_head = await asyncio.wait_for(slow.reader.readuntil(b"\r\n\r\n"), 10)
        assert slow_head.startswith(b"HTTP/1.1 200")
        await asyncio.wait_for(stopping, 10)
        for conn in [*conns, *news, slow]:
            conn.close()
