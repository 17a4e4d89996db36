"""The edge between Ray Serve's HTTP servers and the gateway: what Ray reads from requests and adds
to responses that the gateway must control.

Requests. Ray reads per-request control headers before the gateway sees the request:
``x-request-timeout-seconds`` (cancel the request after that long), ``x-request-disconnect-disabled``,
``serve_multiplexed_model_id``, its session-id header (``x-session-id``) and ``x-request-id`` (taken
as Ray's own request id). They are Serve's, not the API's: a client must not choose when its own
request is cancelled. :class:`ServeEdge` removes them before Ray reads them; the gateway keeps none
(documented in docs/api.md). Cancellation by a client that goes away still happens, and is billed
by the one refund rule (:mod:`gateway.credits.refunds`).

Responses. Ray's ``RequestIdMiddleware`` appends an ``X-Request-ID`` of Ray's to every response. The
gateway sets its own on authenticated responses (the ``requestId`` of error bodies and usage
records), and the API wants none on ``/health``, ``/pricing`` and ``/capabilities``; so Ray's would
be a second, different value, or a header that must be absent. :class:`ServeEdge` removes the last
``x-request-id`` of each response, which is Ray's (its middleware appends exactly one).

The client's address. Behind Ray's HAProxy every request comes from HAProxy's own address. HAProxy,
run through ``gateway-haproxy`` (:mod:`gateway.runtime.haproxy_edge`), sends the address it saw in
``X-Gateway-Client`` with a secret in ``X-Gateway-Edge``; when the secret matches this process's
``GATEWAY_EDGE_SECRET``, :class:`ServeEdge` makes that address the request's peer (``scope["client"]``),
which every transport and per-address limit then uses. Both headers are removed from every request,
so no client can choose its address and no stage sees the secret.

Ray applies the middlewares returned by the callable named in ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``
outside its own and outside the replica's request handling, so this sees each request first and each
response last.
"""

from __future__ import annotations

import hmac
import os

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The value for ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``.
CALLBACK_IMPORT_PATH = "gateway.transports.ray_edge.ray_middlewares"

#: The environment variable holding the secret HAProxy and the replicas share.
EDGE_SECRET_ENV = "GATEWAY_EDGE_SECRET"
#: Set by the gateway's HAProxy rules: the client's address, and the secret that vouches for it.
EDGE_CLIENT_HEADER = "X-Gateway-Client"
EDGE_SECRET_HEADER = "X-Gateway-Edge"
_EDGE_CLIENT = EDGE_CLIENT_HEADER.lower().encode()
_EDGE_SECRET = EDGE_SECRET_HEADER.lower().encode()
_REQUEST_ID = b"x-request-id"
#: Request headers Ray Serve acts on (compared lower-cased, ``-`` and ``_`` alike).
SERVE_CONTROL_HEADERS = frozenset(
    {
        b"x_request_timeout_seconds",
        b"x_request_disconnect_disabled",
        b"serve_multiplexed_model_id",
        b"x_session_id",
        b"x_request_id",
    }
)


class ServeEdge:
    """ASGI middleware: strip Serve's control headers from requests (HTTP and WebSocket), and the last
    ``x-request-id`` from each HTTP response."""

    def __init__(self, app: ASGIApp, edge_secret: str | None = None) -> None:
        self.app = app
        secret = os.environ.get(EDGE_SECRET_ENV, "") if edge_secret is None else edge_secret
        self.edge_secret = secret.encode() if secret else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers, client, secret = edge_headers(scope["headers"])
        scope["headers"] = headers
        if client and self.edge_secret is not None and secret and hmac.compare_digest(secret, self.edge_secret):
            scope["client"] = (client.decode("latin-1"), 0)
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_without_ray_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = drop_last(list(message.get("headers", ())), _REQUEST_ID)
            await send(message)

        await self.app(scope, receive, send_without_ray_id)


def without_control_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in headers if k.lower().replace(b"-", b"_") not in SERVE_CONTROL_HEADERS]


def edge_headers(headers: list[tuple[bytes, bytes]]) -> tuple[list[tuple[bytes, bytes]], bytes | None, bytes | None]:
    """``headers`` without Serve's control headers and the edge's two, and the edge's two values."""
    kept: list[tuple[bytes, bytes]] = []
    client = secret = None
    for name, value in headers:
        lower = name.lower()
        if lower == _EDGE_CLIENT:
            client = value
        elif lower == _EDGE_SECRET:
            secret = value
        elif lower.replace(b"-", b"_") not in SERVE_CONTROL_HEADERS:
            kept.append((name, value))
    return kept, client, secret


def drop_last(headers: list[tuple[bytes, bytes]], name: bytes) -> list[tuple[bytes, bytes]]:
    """``headers`` without the last entry named ``name`` (names compared lower-cased)."""
    for i in range(len(headers) - 1, -1, -1):
        if headers[i][0].lower() == name:
            del headers[i]
            break
    return headers


def ray_middlewares() -> list[Middleware]:
    """Called by Ray Serve when it builds an HTTP server."""
    return [Middleware(ServeEdge)]
