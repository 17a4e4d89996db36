"""No credential in the edge's log: the real bundled HAProxy runs the configuration Ray Serve's own
template renders (its ``log`` target pointed at a UDP listener of this test rather than syslog's port
514), patched by ``gateway-haproxy``, in front of a small asyncio backend that stands in for a replica.
Requests that succeed, that the edge or the replica answers with an error, and that the client
abandons each carry credentials of their own in every place a client puts them (``?api-key=``,
``X-Api-Key``, ``Authorization: Bearer``, ``X-Signature``, a ``/ws`` subprotocol ``auth.<key>``, the
user part of an absolute URI): the listener gets a line for each error and abort, with its status,
termination state and request id, and neither those lines nor any file the edge wrote holds a
credential.

Every wait below is a guard against a hang, never a measured time.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray.serve._private.haproxy import (  # the template and renderer Ray itself runs
    BackendConfig,
    HAProxyApi,
    HAProxyConfig,
    ServerConfig,
)
from ray.serve.config import HTTPOptions

from gateway.runtime.haproxy_edge import patched_args
from gateway.runtime.ports import free_port
from tests.runtime.haproxy_proc import GUARD_S, running_haproxy

BODY_TIMEOUT_S = 1.0  # the edge's 408 comes this long after a body stops


class Syslog(asyncio.DatagramProtocol):
    """What a syslog daemon on the edge's log address would receive."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.arrived = asyncio.Event()

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        self.lines.append(data)
        self.arrived.set()


async def _replica(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Stands in for a replica: ``/fail`` answers 500, ``/dropped`` is reset unanswered (a stopping
    replica), ``/slow`` never answers, anything else 200."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split()[1].split(b"?")[0]
            length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            if length:
                await reader.readexactly(int(length[1]))
            if path == b"/dropped":
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if path == b"/slow":
                await reader.read()  # until HAProxy lets go of it
                return
            status = b"500 Internal Server Error" if path == b"/fail" else b"200 OK"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        return
    finally:
        writer.close()


def ray_config(home: Path, edge_port: int, log_port: int, replica_port: int) -> Path:
    """The configuration Ray's HAProxy manager writes for the gateway's app at ``/`` (as ``gateway up``
    sets Ray: one thread, no metrics socket), with a second app at ``/stopped`` whose replica is gone,
    and its log target on this test's listener."""
    error_page = home / "500.http"  # Ray writes its one page for HAProxy's 502, 503 and 504
    error_page.write_bytes(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 21\r\n\r\nInternal Server Error")
    config = HAProxyConfig(
        log_target=f"127.0.0.1:{log_port}",
        http_options=HTTPOptions(host="127.0.0.1", port=edge_port),
        socket_path=str(home / "admin.sock"),
        server_state_base=str(home),
        server_state_file=str(home / "server-state"),
        nbthread=1,
        metrics_enabled=False,
        stats_port=free_port(),
        metrics_port=free_port(),
        error_file_path=str(error_page),
        has_received_routes=True,
        has_received_servers=True,
    )
    backends = {
        "gateway": BackendConfig(
            name="gateway",
            path_prefix="/",
            app_name="gateway",
            servers=[ServerConfig("one", "127.0.0.1", replica_port)],
        ),
        "stopped": BackendConfig(
            name="stopped",
            path_prefix="/stopped",
            app_name="stopped",
            servers=[ServerConfig("gone", "127.0.0.1", free_port())],  # nothing listens: every replica gone
        ),
    }
    path = home / "haproxy.cfg"
    HAProxyApi(config, backends, str(path))._generate_config_file_internal()
    return path


@contextlib.asynccontextmanager
async def _edge(home: Path) -> AsyncIterator[tuple[int, Syslog]]:
    loop = asyncio.get_running_loop()
    transport, syslog = await loop.create_datagram_endpoint(Syslog, local_addr=("127.0.0.1", 0))
    log_port = transport.get_extra_info("sockname")[1]
    server = await asyncio.start_server(_replica, "127.0.0.1", 0)
    port = free_port()
    config = ray_config(home, port, log_port, server.sockets[0].getsockname()[1])
    args = patched_args(["-db", "-f", str(config)], "s3cret", BODY_TIMEOUT_S)
    # As Ray's manager does, HAProxy's own output is kept in files (here under the data dir).
    try:
        with (home / "haproxy.stdout.log").open("wb") as out, (home / "haproxy.stderr.log").open("wb") as err:
            async with running_haproxy(args, port, out, err, tries=200):
                yield port, syslog
    finally:
        server.close()
        transport.close()


@dataclass
class Credentials:
    """One request's credentials, each random, each where a client may send it."""

    query_key: str = field(default_factory=lambda: "srpc_live_" + secrets.token_urlsafe(32))
    header_key: str = field(default_factory=lambda: "srpc_live_" + secrets.token_urlsafe(32))
    session: str = field(default_factory=lambda: secrets.token_hex(32))
    signature: str = field(default_factory=lambda: secrets.token_hex(44))

    def all(self) -> list[str]:
        return [self.query_key, self.header_key, self.session, self.signature]

    def head(self, method: str, path: str, extra: str = "") -> bytes:
        return (
            f"{method} {path}?api-key={self.query_key}&x=1 HTTP/1.1\r\nHost: edge\r\nX-Api-Key: {self.header_key}\r\n"
            f"Authorization: Bearer {self.session}\r\nX-Pubkey: 11111111111111111111111111111111\r\n"
            f"X-Signature: {self.signature}\r\nX-Timestamp: 1\r\nX-Nonce: n-1\r\n{extra}"
        ).encode()


async def _ask(port: int, request: bytes) -> bytes:
    """All HAProxy sends back to ``request`` on a connection of its own, until it closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        return await asyncio.wait_for(reader.read(), GUARD_S)
    finally:
        writer.close()


async def _abandon(port: int, request: bytes) -> None:
    """Sends ``request`` and goes away unanswered, as a client that gives up (or crashes)."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    await asyncio.sleep(0.3)  # the edge has read it (and passed it on, when whole)
    writer.close()


def _files(home: Path) -> list[tuple[str, bytes]]:
    """Every file under ``home`` (the edge's configuration, answers, state and output), with its bytes."""
    return [(str(path), path.read_bytes()) for path in home.rglob("*") if path.is_file()]


def _line_pattern(state: bytes, request: bytes) -> bytes:
    """A log line with ``state`` and ``request``'s method and path, whatever precedes the path (an absolute
    URI's scheme and host) and whether or not a query string follows it."""
    method, path, _ = request.strip(b'"').split(b" ")
    return state + b'.*"' + re.escape(method) + rb" \S*?" + re.escape(path) + rb"[ ?]"


def _status_and_id(answer: bytes) -> tuple[int, str]:
    head = answer.partition(b"\r\n\r\n")[0].decode()
    found = re.search(r"(?im)^x-request-id: *(\S+)", head)
    return int(head.split()[1]), found[1] if found else ""


async def test_no_credential_reaches_the_edges_log_or_its_files(tmp_path: Path) -> None:
    sent: list[Credentials] = []

    def credentials() -> Credentials:
        sent.append(Credentials())
        return sent[-1]

    async with _edge(tmp_path) as (port, syslog):
        answers: dict[str, bytes] = {}
        close = "Connection: close\r\n\r\n"
        # HAProxy's own errors, a success (not logged: dontlog-normal), the replica's error, and aborts.
        # The 502 first, so that it goes to the replica on a new connection (on a reused one HAProxy
        # closes the client's connection unanswered instead).
        body = b'{"jsonrpc":"2.0","id":1,"method":"sendTransaction"}'
        dropped = credentials().head("POST", "/dropped", f"Content-Length: {len(body)}\r\n{close}") + body
        answers["502"] = await _ask(port, dropped)
        answers["ok"] = await _ask(port, credentials().head("GET", "/", close))
        answers["408"] = await _ask(port, credentials().head("POST", "/", "Content-Length: 100\r\n\r\n{"))
        answers["503"] = await _ask(port, credentials().head("GET", "/stopped", close))
        answers["500"] = await _ask(port, credentials().head("GET", "/fail", close))
        # An absolute URI with credentials in its user part, and a /ws upgrade's subprotocol.
        user = credentials()
        absolute = user.head("GET", f"http://u:{user.query_key}@edge/stopped/abs", close)
        answers["503 absolute"] = await _ask(port, absolute)
        ws = credentials()
        upgrade = (
            "Connection: Upgrade, close\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            f"Sec-WebSocket-Protocol: auth.{ws.header_key}, solana-rpc\r\n\r\n"
        )
        answers["503 ws"] = await _ask(port, ws.head("GET", "/stopped/ws", upgrade))
        answers["400"] = await _ask(port, credentials().head("GET", "/bad path", close))
        await _abandon(port, credentials().head("GET", "/slow", "\r\n"))  # waiting for its answer
        await _abandon(port, credentials().head("POST", "/", "Content-Length: 100\r\n\r\n{"))  # mid-body

        statuses = {name: _status_and_id(answer)[0] for name, answer in answers.items()}
        assert statuses == {
            "ok": 200,
            "408": 408,
            "502": 502,
            "503": 503,
            "500": 500,
            "503 absolute": 503,
            "503 ws": 503,
            "400": 400,
        }
        # Each error and abort is logged with its status or termination state and its request line (the
        # path alone), HAProxy's own answers with their request id: name -> (state, request line).
        expected = {
            "408": (rb" 408 .* cR-- ", b'"POST / HTTP/1.1"'),
            "502": (rb" 502 ", b'"POST /dropped HTTP/1.1"'),
            "503": (rb" 503 .* SC-- ", b'"GET /stopped HTTP/1.1"'),
            "500": (rb" 500 ", b'"GET /fail HTTP/1.1"'),
            "503 absolute": (rb" 503 ", b'"GET /stopped/abs HTTP/1.1"'),
            "503 ws": (rb" 503 ", b'"GET /stopped/ws HTTP/1.1"'),
            "400": (rb" 400 .* PR-- ", b'"<BADREQ> <BADREQ> <BADREQ>"'),
            "abandoned waiting": (rb" C[DH]-- ", b'"GET /slow HTTP/1.1"'),
            "abandoned mid-body": (rb" CR-- ", b'"POST / HTTP/1.1"'),
        }
        patterns = {name: _line_pattern(state, request) for name, (state, request) in expected.items()}

        def found() -> dict[str, bytes]:
            return {
                name: line for name, pattern in patterns.items() for line in syslog.lines if re.search(pattern, line)
            }

        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(GUARD_S):
                while True:
                    syslog.arrived.clear()
                    if len(found()) == len(expected):
                        break
                    await syslog.arrived.wait()
    logged = found()
    leaks = [
        (where, secret)
        for where, text in [
            *((f"datagram {line!r}", line) for line in syslog.lines),
            *_files(tmp_path),
        ]
        for credentials_ in sent
        for secret in credentials_.all()
        if secret.encode() in text
    ]
    assert not leaks, leaks
    assert logged.keys() == expected.keys(), syslog.lines  # so that the above cannot pass on no log at all
    for name in ("408", "502", "503", "503 ws"):
        request_id = _status_and_id(answers[name])[1]
        assert re.fullmatch("[0-9a-f]{32}", request_id), answers[name]
        assert request_id.encode() in logged[name], (answers[name], logged[name])
    assert not any(b'"GET / HTTP/1.1"' in line for line in syslog.lines)  # a success is not logged
    for name, line in logged.items():  # the request line as the client sent it, less query string and host
        assert line.endswith(b" " + expected[name][1] + b" " + line.rsplit(b" ", 1)[1]), (name, line)
