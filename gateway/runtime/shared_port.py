"""The service port shared by the ingress replicas of a node (``ingress_mode = "reuseport"``).

Each ingress replica listens on ``host:port`` itself, with ``SO_REUSEPORT``: the kernel spreads new
connections over the node's replicas, and no HAProxy process sits between a client and a replica. It costs
the machine less a request than HAProxy's hop (docs/performance.md, "HAProxy's hop, by the figures"); what
the hop did moves here, or is given up (docs/architecture.md, "Ingress modes"):

- at most ``connections_per_source`` open connections from one address, per replica (:class:`SourceCap`):
  past it a new connection is closed before it is read. The kernel hashes each connection to one replica,
  so one address can hold at most that many times the node's replicas;
- an idle keep-alive connection closed after ``keepalive_s`` (uvicorn's ``timeout_keep_alive``);
- a connection older than ``rebalance_s`` answered ``Connection: close``: the kernel chooses a replica for a
  connection, not a request, so without it a client's kept-alive connections would stay on the replicas
  there were when it connected, and a replica added by autoscaling would get only new clients;
- a request's body waited for here, outside the replica's request slots, until it is whole (or 64 KiB), at
  most ``request_body_timeout_s``; past that the 408 the replica gives, with its CORS headers. A slow
  sender holds a connection of its source's cap, never a request slot (HAProxy's ``http-buffer-request``);
- a client that stops reading its answer cut off after ``write_timeout_s`` (HAProxy's ``timeout client``,
  :class:`WriteStalls`): its connection is aborted, so the request's writes end and its slot is given back;
- the request id, the client's address (the peer's: no edge secret is needed) and the gateway's error shape
  are the replica's own already (gateway/transports);
- the drain (:func:`install`): when Serve stops a replica, its listener closes at once, so the kernel gives
  new connections to the node's other replicas; for ``drain_s`` every answer on a connection it still holds
  says ``Connection: close``, so a client moves with its next request; then idle connections close,
  WebSockets close 1012, and the requests in flight finish. Nothing retries for a client: a connection the
  kernel had queued on the listener at the instant it closed is reset, unless the node runs
  ``net.ipv4.tcp_migrate_req = 1`` (Linux 5.14), which hands it to another replica (docs/operations.md).

Not carried over from HAProxy: a GET dropped by a stopping replica retried on another.

Hand-written: Serve starts one HTTP server a replica, on a port of its own choosing and without
``SO_REUSEPORT`` (``Replica._maybe_start_direct_ingress_servers``), and has no drain step to hook. The port
serves what Serve's own port serves: the replica's direct-ingress path (the lean one) behind the middlewares
Serve puts in front of it, the gateway's edge among them, composed by Serve's own functions. The two replica
methods this wraps and those functions are held to the pinned Ray's source by digest (:data:`WRAPPED`), as
:mod:`gateway.runtime.lean_ingress` does, and :func:`install` leaves Serve alone when one differs (the
replica then refuses to start, saying so).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.runtime.lean_ingress import changed, digests
from gateway.transports.cors import Cors, OriginPolicy
from gateway.transports.deadline import BODY_WHOLE, timeout_body

log = logging.getLogger(__name__)

#: The replica methods :func:`install` wraps and Serve's functions it composes the port's app with, with the
#: first 16 hex digits of the SHA-256 of their source in the pinned Ray (``python -m
#: gateway.runtime.shared_port`` prints them).
WRAPPED: dict[str, str] = {
    "replica.Replica._maybe_start_direct_ingress_servers": "f5aa371c33943dda",
    "replica.Replica._drain_ongoing_requests": "097ff231acfb2b07",
    "http_util._apply_middlewares": "bc0efbc6a1a69396",
    "http_util.configure_http_middlewares": "ac3c0014732829ce",
    "http_util.configure_http_options_with_defaults": "cc425aa32c68ec18",
}
#: The answer header that tells a client to take its next request elsewhere.
_CLOSE = (b"connection", b"close")
#: A request body is held here until it is whole or this large (HAProxy's buffer is 16 KiB; the gateway's
#: routes other than JSON-RPC take at most 64 KiB).
BUFFER_BYTES = 64 * 1024


@dataclass(frozen=True)
class SharedPort:
    """Where the replicas listen and what one source may hold there."""

    host: str
    port: int
    connections_per_source: int = 256
    keepalive_s: float = 10.0
    #: A connection this old is answered ``Connection: close``: its client's next connection is hashed again,
    #: over the replicas there are now (HAProxy balanced each request; the kernel balances connections).
    rebalance_s: float = 5.0
    #: How long a request's body may take to arrive before the replica's path sees it (``request_body_timeout_s``).
    body_timeout_s: float = 10.0
    #: How long an answer's writes may stay paused by a client that does not read them (``client_s`` of the edge).
    write_timeout_s: float = 30.0
    #: Whose pages may read this listener's own 408 (``cors_allowed_origins``), as they read the replica's.
    cors_allowed_origins: tuple[str, ...] = ("*",)


class SourceCap:
    """Open connections by peer address, at most ``cap`` each, and when each opened. A connection is counted
    by its transport, so that the HTTP protocol and, after an upgrade, the WebSocket protocol of one
    connection count once."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._open: dict[str, set[asyncio.BaseTransport]] = {}
        #: When each open connection was accepted (the loop's clock), by its peer's (address, port).
        self.opened: dict[tuple[str, int], float] = {}

    def admit(self, transport: asyncio.BaseTransport) -> bool:
        address, port = _peer(transport)
        held = self._open.setdefault(address, set())
        if len(held) >= self.cap:
            return False
        held.add(transport)
        self.opened[(address, port)] = asyncio.get_running_loop().time()
        return True

    def release(self, transport: asyncio.BaseTransport) -> None:
        address, port = _peer(transport)
        self.opened.pop((address, port), None)
        held = self._open.get(address)
        if held is not None:
            held.discard(transport)
            if not held:
                del self._open[address]

    def held(self, address: str) -> int:
        return len(self._open.get(address, ()))


class WriteStalls:
    """The connections whose writes are paused, since when; those paused ``timeout_s`` are aborted.

    The event loop pauses a protocol's writes only when its transport's buffer passes the high-water mark,
    that is when a client is not reading what it was sent, and resumes them when the buffer drains: so a
    client that reads costs nothing here (a timer on every write would have cost more than HAProxy's hop).
    One sweeper task, running only while a connection is paused, checks once every ``sweep_s``; so a stall
    is cut off within ``timeout_s + sweep_s``. Aborting the transport is uvicorn's disconnect: the
    request's pending and later writes return, the app finishes and its request slot is given back.
    """

    def __init__(self, timeout_s: float, sweep_s: float = 1.0) -> None:
        self.timeout_s = timeout_s
        self.sweep_s = sweep_s
        self.paused: dict[asyncio.BaseTransport, float] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def pause(self, transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        self.paused.setdefault(transport, loop.time())
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep())

    def resume(self, transport: asyncio.BaseTransport) -> None:
        self.paused.pop(transport, None)

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.paused:
                await asyncio.sleep(self.sweep_s)
                now = loop.time()
                for transport, since in list(self.paused.items()):
                    if now - since >= self.timeout_s:
                        del self.paused[transport]
                        transport.abort()  # type: ignore[attr-defined]
        finally:
            self._sweeper = None


def _peer(transport: asyncio.BaseTransport) -> tuple[str, int]:
    peer = transport.get_extra_info("peername")
    return (str(peer[0]), int(peer[1])) if peer else ("", 0)


def capped(
    http: type[asyncio.Protocol], ws: type[asyncio.Protocol] | None, cap: SourceCap, stalls: WriteStalls
) -> tuple[type, type | None]:
    """uvicorn's HTTP and WebSocket protocol classes, counting connections in ``cap``: a connection past
    the cap is aborted before uvicorn sees it. An upgraded connection's HTTP protocol is never told it was
    lost (uvicorn hands the transport to the WebSocket protocol), so both release it. An HTTP connection's
    paused writes are timed by ``stalls``; a WebSocket that does not read is the ``/ws`` session's to close
    (1013 past its bounded queue, gateway/pubsub/session.py)."""

    class CappedHttp(http):  # type: ignore[valid-type,misc]
        _gateway_admitted = False

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if not cap.admit(transport):
                transport.abort()  # type: ignore[attr-defined]
                return
            self._gateway_admitted = True
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            if not self._gateway_admitted:
                return
            cap.release(self.transport)
            stalls.resume(self.transport)
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            stalls.pause(self.transport)
            super().pause_writing()

        def resume_writing(self) -> None:
            stalls.resume(self.transport)
            super().resume_writing()

    if ws is None:
        return CappedHttp, None

    class CappedWs(ws):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self._gateway_transport = transport
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            cap.release(self._gateway_transport)
            super().connection_lost(exc)

    return CappedHttp, CappedWs


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` that the node's other replicas may bind too."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RuntimeError(
            f"cannot listen on {host}:{port} beside the other replicas ({exc.strerror}): another program "
            "holds the port without SO_REUSEPORT"
        ) from exc
    return sock


def _whole(last: Message) -> bool:
    """Whether ``last`` ends a body that arrived whole (a disconnect ends none)."""
    return last["type"] == "http.request" and not last.get("more_body")


class SharedPortListener:
    """One replica's server on the shared port, serving ``app`` (the replica's direct-ingress path)."""

    def __init__(self, shared: SharedPort, app: ASGIApp) -> None:
        self.shared = shared
        self.cap = SourceCap(shared.connections_per_source)
        self.stalls = WriteStalls(shared.write_timeout_s)
        self.draining = False
        self._app = app
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        #: The replica's 408 for a body that did not arrive, with the CORS headers the replica's answers carry.
        self._late = Cors(self._late_answer, OriginPolicy.parse(shared.cors_allowed_origins))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        opened = self.cap.opened.get(scope["client"], math.inf)
        if self.draining or loop.time() - opened > self.shared.rebalance_s:
            send = _closing(send)
        first = await receive()  # a body sent with its headers is here already
        if not first.get("more_body"):
            if _whole(first):  # the replica's deadline has nothing to time
                scope[BODY_WHOLE] = True
            await self._app(scope, _replay([first], receive), send)
            return
        # Still arriving: wait for it here, where it holds no request slot of the replica's (Serve's count
        # starts in the replica's path), as HAProxy's http-buffer-request did; past BUFFER_BYTES it goes on.
        received, size = [first], len(first.get("body", b""))
        try:
            async with asyncio.timeout(self.shared.body_timeout_s):
                while received[-1].get("more_body") and size < BUFFER_BYTES:
                    received.append(await receive())
                    size += len(received[-1].get("body", b""))
        except TimeoutError:
            await self._late(scope, receive, send)
            return
        if _whole(received[-1]):
            scope[BODY_WHOLE] = True
        await self._app(scope, _replay(received, receive), send)

    async def _late_answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = timeout_body(self.shared.body_timeout_s)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), _CLOSE]
        await send({"type": "http.response.start", "status": 408, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def start(self) -> None:
        sock = reuse_port_socket(self.shared.host, self.shared.port)
        config = uvicorn.Config(  # uvicorn.Config as patched in the replica: the gateway's WebSocket options
            self,
            timeout_keep_alive=max(1, round(self.shared.keepalive_s)),
            lifespan="off",
            access_log=False,
            log_config=None,
            proxy_headers=False,  # the peer is the client; no forwarded address is believed here
            server_header=False,
            date_header=False,
        )
        config.load()
        config.http_protocol_class, config.ws_protocol_class = capped(
            config.http_protocol_class, config.ws_protocol_class, self.cap, self.stalls
        )
        server = uvicorn.Server(config)
        server.capture_signals = _no_signals  # type: ignore[method-assign]  # the replica's process owns them
        self._server = server
        self._task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
        while not server.started:  # bound and listening, or failed
            if self._task.done():
                self._task.result()
                raise RuntimeError(f"the server on {self.shared.host}:{self.shared.port} stopped at start")
            await asyncio.sleep(0.01)

    def stop_accepting(self) -> None:
        """Close the listening socket (new connections go to the node's other replicas) and answer every
        later request with ``Connection: close``; the connections held stay open."""
        self.draining = True
        if self._server is not None:
            for server in self._server.servers:
                server.close()

    async def stop(self, timeout_s: float) -> None:
        """Close idle connections and WebSockets (1012), let requests in flight finish, at most ``timeout_s``."""
        self.stop_accepting()
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
        except TimeoutError:
            log.warning("shared port: requests still open after %.1f s; closing them", timeout_s)
            self._server.force_exit = True
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._task, 1.0)


def _replay(received: list[Message], receive: Receive) -> Receive:
    """``receive`` with the messages already taken from it given first."""
    pending = iter(received)

    async def replayed() -> Message:
        for message in pending:
            return message
        return await receive()

    return replayed


def _closing(send: Send) -> Send:
    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
        await send(message)

    return closing


@contextlib.contextmanager
def _no_signals() -> Iterator[None]:
    yield


#: Linux's switch that hands a closed listener's queued connections to another listener of its port.
MIGRATE_REQ = Path("/proc/sys/net/ipv4/tcp_migrate_req")


def migrate_req_warning(switch: Path = MIGRATE_REQ) -> str | None:
    """What ``gateway up`` says when this machine resets, rather than hands over, the connections queued on a
    stopping replica's listener (docs/operations.md); None when it hands them over or has no such switch."""
    try:
        value = switch.read_text().strip()
    except OSError:
        return None  # not Linux 5.14+: nothing to set
    if value != "0":
        return None
    return (
        "ingress_mode reuseport: net.ipv4.tcp_migrate_req is 0, so a connection queued on a replica's listener "
        "as it stops (a scale-in, a redeploy) is reset; `sysctl -w net.ipv4.tcp_migrate_req=1` hands it to "
        "another replica (docs/operations.md)"
    )


#: This process's shared port, set by :func:`install`; its listener, once Serve has started the replica.
_shared: SharedPort | None = None
_listener: SharedPortListener | None = None


def install(shared: SharedPort) -> bool:
    """Make this process's ingress replica also listen on ``shared`` and drain it as the module says.
    Called in the replica's constructor, before Serve starts its servers. Idempotent. False, and nothing
    changed, when Serve's replica differs from the one this was written against."""
    global _shared
    from ray.serve._private import replica

    _shared = shared
    cls = replica.Replica
    if getattr(cls._maybe_start_direct_ingress_servers, "gateway_original", None) is not None:
        return True
    differing = changed(WRAPPED)
    if differing:
        log.error("shared port: not served, Serve's replica differs in %s", ", ".join(differing))
        return False
    cls._maybe_start_direct_ingress_servers = _wrap_start(cls._maybe_start_direct_ingress_servers)  # type: ignore[method-assign]
    cls._drain_ongoing_requests = _wrap_drain(cls._drain_ongoing_requests)  # type: ignore[method-assign]
    return True


def _wrap_start(original: Callable[..., Any]) -> Callable[..., Any]:
    async def start(self: Any) -> None:
        global _listener
        await original(self)
        if _shared is not None and self._ingress and _listener is None:
            server = SharedPortListener(_shared, _as_serve_serves(self))
            await server.start()
            _listener = server

    start.gateway_original = original  # type: ignore[attr-defined]
    return start


def _as_serve_serves(replica: Any) -> ASGIApp:
    """The replica's direct-ingress path behind the middlewares Serve puts in front of its own port (the
    gateway's edge, :class:`gateway.transports.ray_edge.ServeEdge`, among them: it strips Serve's control
    headers from a client's request and marks the request for the lean path), composed by Serve's code."""
    from ray.serve._private.http_util import (
        _apply_middlewares,
        configure_http_middlewares,
        configure_http_options_with_defaults,
    )
    from ray.serve.config import HTTPOptions

    options = configure_http_middlewares(
        configure_http_options_with_defaults(HTTPOptions(**replica._http_options.model_dump()))
    )
    app: ASGIApp = _apply_middlewares(replica._direct_ingress_asgi, options.middlewares)
    return app


def _wrap_drain(original: Callable[..., Any]) -> Callable[..., Any]:
    async def drain(self: Any, min_draining_period_s: float = 0.0, check_immediately: bool = False) -> None:
        server = _listener
        if server is None or not self._shutting_down:
            await original(self, min_draining_period_s, check_immediately)
            return
        server.stop_accepting()
        await asyncio.sleep(min_draining_period_s)  # the connections held are told to close meanwhile
        budget = self._deployment_config.graceful_shutdown_timeout_s - min_draining_period_s
        stopped = asyncio.ensure_future(server.stop(max(0.0, budget)))
        await original(self, 0.0, True)  # Serve's count of requests in flight, this port's among them
        await stopped

    drain.gateway_original = original  # type: ignore[attr-defined]
    return drain


if __name__ == "__main__":
    for name, digest in digests(WRAPPED).items():
        print(f'    "{name}": "{digest}",')
