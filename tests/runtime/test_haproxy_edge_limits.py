"""The edge's per-source and idle bounds, its retries and its own answers, through the real bundled
HAProxy running the patched configuration (of a configuration with Ray's options) in front of a small
asyncio backend that stands in for a replica (it records when HAProxy lets go of its connection, which
is when a replica's request slot is freed, and drops a request as a stopping replica does).

Short limits (a second) keep the tests quick; every wait below is a guard against a hang, never a
measured time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.runtime.haproxy_edge import CORS_ENV, NO_ORIGIN, EdgeLimits, edge_origins, patched_args
from gateway.runtime.ports import free_port
from gateway.transports.cors import OriginPolicy
from tests.runtime.haproxy_proc import GUARD_S, running_haproxy

LIMITS = EdgeLimits(connections_per_source=3, keepalive_s=1, client_s=1, tunnel_s=30)
BIG = 64 * 1024 * 1024  # far more than the sockets' buffers hold


@dataclass
class Backend:
    port: int
    cut_off: asyncio.Event = field(default_factory=asyncio.Event)  # a large answer's connection was dropped
    seen: list[bytes] = field(default_factory=list)  # the methods of requests to /dropped-once, the first reset
    ids: list[bytes] = field(default_factory=list)  # and the request id the edge sent with each


async def _serve(backend: Backend, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            method, path = head.split()[:2]
            if path == b"/dropped-once":
                backend.seen.append(method)
                backend.ids.extend(
                    line.split(b":", 1)[1].strip()
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"x-gateway-request-id:")
                )
                if len(backend.seen) == 1:  # as a stopping replica: the request read, the connection reset
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
            if path == b"/ws":
                writer.write(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
                )
                while data := await reader.read(1024):  # an echo stands in for the socket's frames
                    writer.write(data)
                return
            if path == b"/big":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % BIG)
                chunk = b"x" * 65_536
                try:
                    for _ in range(BIG // len(chunk)):
                        writer.write(chunk)
                        await writer.drain()
                except ConnectionError:
                    backend.cut_off.set()
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        return
    finally:
        writer.close()


@pytest.fixture
async def edge(tmp_path: Path) -> AsyncIterator[tuple[int, Backend]]:
    async with _edge(tmp_path) as running:
        yield running


@contextlib.asynccontextmanager
async def _edge(
    tmp_path: Path, request_timeout_s: float = 10, origins: OriginPolicy = NO_ORIGIN
) -> AsyncIterator[tuple[int, Backend]]:
    backend = Backend(free_port())
    server = await asyncio.start_server(lambda r, w: _serve(backend, r, w), "127.0.0.1", backend.port)
    port = free_port()
    config = tmp_path / "haproxy.cfg"
    ray_500 = tmp_path / "500.http"  # Ray's one page for HAProxy's 502, 503 and 504
    ray_500.write_bytes(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 21\r\n\r\nInternal Server Error")
    config.write_text(
        "global\n    maxconn 100\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 3600s\n"
        "    timeout http-keep-alive 90s\n"  # Ray's template's idle timeouts
        "    option redispatch 1\n    retry-on conn-failure\n"  # and its retries and options
        "    option abortonclose\n    option splice-request\n    option splice-response\n    option http-no-delay\n"
        + "".join(f"    errorfile {status} {ray_500}\n" for status in (502, 503, 504))
        + f"    timeout server 60s\nfrontend http_frontend\n    bind 127.0.0.1:{port}\n"
        "    use_backend stopped if { path /stopped }\n    default_backend replica\n"
        f"backend replica\n    http-reuse always\n    server one 127.0.0.1:{backend.port}\n"
        f"backend stopped\n    server gone 127.0.0.1:{free_port()}\n"  # nothing listens: every replica gone
    )
    args = patched_args(["-db", "-f", str(config)], "s3cret", request_timeout_s, LIMITS, origins)
    try:
        async with running_haproxy(args, port):
            yield port, backend
    finally:
        server.close()


async def _get(port: int, path: bytes = b"/") -> tuple[asyncio.StreamReader, asyncio.StreamWriter | None, bytes]:
    """The answer's head, or b"" when HAProxy closed the connection unanswered (with the streams)."""
    writer = None
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET " + path + b" HTTP/1.1\r\nHost: edge\r\n\r\n")
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD_S)
    except (asyncio.IncompleteReadError, ConnectionError):
        return asyncio.StreamReader(), writer, b""
    return reader, writer, answer


def _close(writer: asyncio.StreamWriter | None) -> None:
    if writer is not None:
        writer.close()


async def test_one_source_holds_at_most_its_connections(edge: tuple[int, Backend]) -> None:
    port, _ = edge
    held = [await _get(port) for _ in range(LIMITS.connections_per_source)]
    assert all(answer.startswith(b"HTTP/1.1 200") for _, _, answer in held)
    _, refused, answer = await _get(port)
    assert answer == b""  # closed at once, unanswered
    _close(refused)
    _close(held[0][1])
    for _ in range(100):  # once HAProxy has seen the close, the source has room again
        _, writer, answer = await _get(port)
        _close(writer)
        if answer:
            break
        await asyncio.sleep(0.05)
    assert answer.startswith(b"HTTP/1.1 200")
    for _, writer, _ in held[1:]:
        _close(writer)


async def test_an_idle_keep_alive_is_closed(edge: tuple[int, Backend]) -> None:
    port, _ = edge
    reader, writer, answer = await _get(port)
    assert answer.startswith(b"HTTP/1.1 200")
    assert await asyncio.wait_for(reader.read(), GUARD_S) == b"ok"  # then end of stream: HAProxy closed it
    _close(writer)


async def test_a_client_that_does_not_read_its_answer_frees_the_replica(edge: tuple[int, Backend]) -> None:
    port, backend = edge
    _, writer, answer = await _get(port, b"/big")  # reads the head, then nothing more
    assert answer.startswith(b"HTTP/1.1 200")
    await asyncio.wait_for(backend.cut_off.wait(), GUARD_S)
    _close(writer)


async def test_an_upgraded_connection_outlives_the_client_timeout(edge: tuple[int, Backend]) -> None:
    port, _ = edge
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET /ws HTTP/1.1\r\nHost: edge\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD_S)
    assert head.startswith(b"HTTP/1.1 101")
    await asyncio.sleep(3 * LIMITS.client_s)  # idle past the client timeout, well within the tunnel's
    writer.write(b"still here")
    assert await asyncio.wait_for(reader.readexactly(10), GUARD_S) == b"still here"
    writer.close()


@pytest.mark.parametrize("reused", [False, True])
@pytest.mark.parametrize(
    ("method", "replayed"), [(b"GET", True), (b"HEAD", True), (b"OPTIONS", True), (b"POST", False), (b"DELETE", False)]
)
async def test_a_request_a_stopping_replica_dropped_is_sent_again_only_when_idempotent(
    edge: tuple[int, Backend], method: bytes, replayed: bool, reused: bool
) -> None:
    """A replica that resets a connection with a request read and unanswered (as a stopping one does, on
    a new connection or on a kept-alive one HAProxy reuses): a GET, HEAD or OPTIONS is sent again and
    answered; anything else (a send, a paid call) is never sent twice, and its client gets HAProxy's
    error or, on a reused connection, a closed one (HAProxy's way there, leaving the client to decide)."""
    port, backend = edge
    if reused:  # leaves HAProxy an idle connection to the replica, which the next request takes
        reader, writer, answer = await _get(port)
        assert answer.startswith(b"HTTP/1.1 200") and await reader.readexactly(2) == b"ok"
        _close(writer)
    body = b'{"jsonrpc":"2.0","id":1,"method":"sendTransaction"}' if method == b"POST" else b""
    head = b" /dropped-once HTTP/1.1\r\nHost: edge\r\nContent-Length: %d\r\n\r\n" % len(body)
    answer = await _ask(port, method + head + body)
    if replayed:
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert backend.seen == [method, method]
        return
    assert backend.seen == [method]  # sent once
    if reused and answer == b"":  # HAProxy's way on a reused connection: closed, for the client to decide
        return
    assert _error(answer)[:2] == (502, "UPSTREAM_ERROR"), answer


def _error(answer: bytes) -> tuple[int, str, dict[bytes, bytes], dict[str, Any]]:
    """An answer's status, error constant, header fields (lower-cased) and error object."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    fields = dict(line.split(b": ", 1) for line in lines[1:])
    error = json.loads(body)["error"]
    return int(lines[0].split()[1]), error["code"], fields, error


async def _ask(port: int, request: bytes) -> bytes:
    """The whole of what HAProxy sends back to ``request`` on a new connection, until it closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        return await asyncio.wait_for(reader.read(), GUARD_S)  # until HAProxy closes
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("setting", "allowed"),
    [
        (["*"], b"*"),
        (["https://other.example", "https://APP.example/"], b"https://app.example"),  # as the policy compares
        (["https://other.example"], None),
        ([], None),
    ],
)
async def test_the_edges_own_answers_are_the_gateways_errors_readable_by_a_page_the_cors_setting_allows(
    tmp_path: Path, setting: list[str], allowed: bytes | None
) -> None:
    """What HAProxy answers itself, the replica never answering: a body that stops coming (408), a
    request a replica dropped (502), no replica to take it (503). Each is the gateway's error, not Ray's
    500 page, with the ``Access-Control-Allow-Origin`` the replica's own would carry, and a request id
    of its own (the one the replica got with the request: a client's is replaced)."""
    origins = edge_origins({CORS_ENV: json.dumps(setting)})
    async with _edge(tmp_path, request_timeout_s=1, origins=origins) as (port, backend):
        origin = b"Origin: https://app.example\r\nContent-Type: application/json\r\n"
        origin += b"X-Gateway-Request-Id: " + b"0" * 32 + b"\r\n"  # a client's, never the request's
        stalled = await _ask(port, b"POST / HTTP/1.1\r\nHost: edge\r\n" + origin + b"Content-Length: 100\r\n\r\n{")
        call = b'{"jsonrpc":"2.0","id":1,"method":"sendTransaction"}'
        request = b"POST %s HTTP/1.1\r\nHost: edge\r\n" + origin + b"Content-Length: %d\r\n\r\n" + call
        dropped = await _ask(port, request % (b"/dropped-once", len(call)))
        refused = await _ask(port, request % (b"/stopped", len(call)))
    answers = [_error(stalled), _error(dropped), _error(refused)]
    assert [(status, code) for status, code, _, _ in answers] == [
        (408, "REQUEST_TIMEOUT"),
        (502, "UPSTREAM_ERROR"),
        (503, "SERVICE_TEMPORARILY_UNAVAILABLE"),
    ]
    assert [error.get("rpcCode") for _, _, _, error in answers] == [None, -32003, -32003]
    assert answers[2][2][b"retry-after"] == b"5" and answers[2][3]["data"] == {"retry_after_secs": 5}
    ids = [error["requestId"] for _, _, _, error in answers]
    assert all(re.fullmatch("[0-9a-f]{32}", i) for i in ids) and len(set(ids)) == 3 and "0" * 32 not in ids, ids
    assert [fields[b"x-request-id"].decode() for _, _, fields, _ in answers] == ids
    assert backend.ids == [ids[1].encode()]  # the dropped request went to the replica with its answer's id
    for _, _, fields, _ in answers:
        assert fields[b"content-type"] == b"application/json"
        assert fields.get(b"access-control-allow-origin") == allowed, fields
        assert (fields.get(b"vary") == b"origin") is bool(setting and "*" not in setting), fields
        if allowed:
            assert b"retry-after" in fields[b"access-control-expose-headers"].split(b", "), fields


#: Ray's server lines (2.60's template and defaults: leastconn, health checks, three layer-4 errors to mark one down).
RAY_CHECKS = "    default-server fastinter 250ms downinter 250ms fall 2 rise 2 inter 5s check\n"
RAY_SERVER = "    server {name} 127.0.0.1:{port} check observe layer4 error-limit 3 on-error mark-down\n"


@pytest.mark.parametrize("method", [b"GET", b"POST"])
async def test_a_request_reaches_the_replica_left_when_the_others_closed_their_ports(
    tmp_path: Path, method: bytes
) -> None:
    """Scale-in behind HAProxy: four replicas close their ports at once (Serve's drain over, HAProxy not yet
    reloaded without them) while the one left is busy with a request. HAProxy balances by leastconn, so the
    closed replicas, idle, are every retry's first choice; the request is answered by the one left, whatever
    its method (a refused connection never reached a replica), not with the edge's 503."""
    held = asyncio.Event()
    release = asyncio.Event()

    async def replica(name: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = re.search(rb"(?i)content-length: *(\d+)", head)
                await reader.readexactly(int(length.group(1)) if length else 0)
                if head.split()[1] == b"/held":
                    held.set()
                    await release.wait()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(name), name))
                await writer.drain()

    servers = [
        await asyncio.start_server(functools.partial(replica, name), "127.0.0.1", 0)
        for name in (b"left", b"gone", b"gone", b"gone", b"gone")
    ]
    port = free_port()
    config = tmp_path / "haproxy.cfg"
    config.write_text(
        "global\n    maxconn 100\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 60s\n"
        "    timeout server 60s\n    option redispatch 1\n    retry-on conn-failure\n    balance leastconn\n"
        f"frontend http_frontend\n    bind 127.0.0.1:{port}\n    default_backend replicas\n"
        # The test's own rule: its held request to the replica that stays (r0).
        f"backend replicas\n    http-reuse always\n    use-server r0 if {{ path /held }}\n{RAY_CHECKS}"
        + "".join(
            RAY_SERVER.format(name=f"r{i}", port=server.sockets[0].getsockname()[1]) for i, server in enumerate(servers)
        )
    )
    args = patched_args(["-db", "-f", str(config)], "s3cret", 10, LIMITS)
    try:
        async with running_haproxy(args, port):
            answer = await _with_one_replica_left(port, method, servers, held)
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"left"), answer
    finally:
        release.set()
        for server in servers:
            server.close()


async def _with_one_replica_left(port: int, method: bytes, servers: list[asyncio.Server], held: asyncio.Event) -> bytes:
    """The answer to ``method`` once the first of ``servers`` is busy with a held request and the others
    have closed their ports."""
    _, busy = await asyncio.open_connection("127.0.0.1", port)
    try:
        busy.write(b"GET /held HTTP/1.1\r\nHost: edge\r\n\r\n")
        await asyncio.wait_for(held.wait(), GUARD_S)  # the replica left is busy: leastconn prefers the others
        for server in servers[1:]:  # which close their ports
            server.close()
            await server.wait_closed()
        body = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}' if method == b"POST" else b""
        head = b" / HTTP/1.1\r\nHost: edge\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
        return await _ask(port, method + head + body)
    finally:
        busy.close()
