"""The edge between Ray Serve's HTTP servers and the gateway: what Ray reads from requests and adds
to responses that the gateway must control.

Requests. Ray reads per-request control headers before the gateway sees the request:
``x-request-timeout-seconds`` (cancel the request after that long), ``x-request-disconnect-disabled``,
``serve_multiplexed_model_id``, its session-id header (``x-session-id``) and ``x-request-id`` (taken
as Ray's own request id). They are Serve's, not the API's: a client must not choose when its own
request is cancelled. :class:`ServeEdge` removes them before Ray reads them; the gateway keeps none
(documented in docs/api.md). It then marks each HTTP request ``x-request-disconnect-disabled: ?1``
itself (:data:`DISCONNECT_DISABLED`): a call whose client goes away runs to its end, billed by the one
refund rule (:mod:`gateway.credits.refunds`) as any call that may have reached the node.

Responses. Ray's ``RequestIdMiddleware`` appends an ``X-Request-ID`` of Ray's to every response. The
gateway sets its own on authenticated responses (the ``requestId`` of error bodies and usage
records), and the API wants none on ``/health``, ``/pricing`` and ``/capabilities``; so Ray's would
be a second, different value, or a header that must be absent. In an ingress replica (direct
ingress, behind HAProxy) Ray's middleware is not installed at all
(:func:`gateway.runtime.serve_middlewares.ray_middlewares`), which
saves two wrappers of every ``send``; elsewhere (Serve's own proxy) :class:`ServeEdge` removes the
last ``x-request-id`` of each response, which is Ray's (its middleware appends exactly one).

The client's address. Behind Ray's HAProxy every request comes from HAProxy's own address. HAProxy,
run through ``gateway-haproxy`` (:mod:`gateway.runtime.haproxy_edge`), sends the address it saw in
``X-Gateway-Client`` with a secret in ``X-Gateway-Edge``; when the secret matches this process's
``GATEWAY_EDGE_SECRET``, :class:`ServeEdge` makes that address the request's peer (``scope["client"]``),
which every transport and per-address limit then uses. With the same secret, the id HAProxy gave the
request (``X-Gateway-Request-Id``; its own answers, a 502 or 504 when the replica's is lost or late,
carry it) becomes the HTTP call's ``X-Request-Id`` (:data:`gateway.pipeline.http.EDGE_REQUEST_ID`), so a
client quoting an edge's answer names the call the replica logged and billed. The three headers are
removed from every request, so no client can choose its address or its request id and no stage sees the
secret.

Ray applies the middlewares returned by the callable named in ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``
outside its own and outside the replica's request handling, so this sees each request first and each
response last.
"""

from __future__ import annotations

import hmac
import itertools
import os
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.pipeline.http import EDGE_REQUEST_ID

#: The value for ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``.
CALLBACK_IMPORT_PATH = "gateway.runtime.serve_middlewares.ray_middlewares"

#: The environment variable holding the secret HAProxy and the replicas share.
EDGE_SECRET_ENV = "GATEWAY_EDGE_SECRET"
#: Set by the gateway's HAProxy rules: the client's address, and the secret that vouches for it.
EDGE_CLIENT_HEADER = "X-Gateway-Client"
EDGE_SECRET_HEADER = "X-Gateway-Edge"
#: Set by the gateway's HAProxy rules too: the request's id, as HAProxy's own answers to it carry it.
EDGE_REQUEST_ID_HEADER = "X-Gateway-Request-Id"
_EDGE_CLIENT = EDGE_CLIENT_HEADER.lower().encode()
_EDGE_SECRET = EDGE_SECRET_HEADER.lower().encode()
_EDGE_REQUEST_ID = EDGE_REQUEST_ID_HEADER.lower().encode()
#: The edge's ids are the gateway's shape: 32 hex digits.
_REQUEST_ID_SHAPE = re.compile(rb"[0-9a-f]{32}")
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


#: Every spelling of :data:`SERVE_CONTROL_HEADERS` (``-`` or ``_`` at each separator), so that a header
#: name is looked up as it came, lower-cased, without rewriting it first.
_CONTROL_SPELLINGS = frozenset(
    parts[0] + b"".join(sep + part for sep, part in zip(seps, parts[1:], strict=True))
    for parts in (name.split(b"_") for name in SERVE_CONTROL_HEADERS)
    for seps in itertools.product((b"-", b"_"), repeat=len(parts) - 1)
)
#: Added to every HTTP request, after the client's own are removed: Serve then runs the request's app
#: directly instead of in a task of its own beside a second task watching for the client's disconnect
#: (two tasks and an ``asyncio.wait`` per request). A call whose client leaves runs to its end and is
#: billed by the one refund rule as when it was answered (docs/api.md, Billing and refunds).
DISCONNECT_DISABLED = (b"x-request-disconnect-disabled", b"?1")


class ServeEdge:
    """ASGI middleware: strip Serve's control headers from requests (HTTP and WebSocket), add
    :data:`DISCONNECT_DISABLED` to HTTP requests, and strip the last ``x-request-id`` from each HTTP response."""

    def __init__(self, app: ASGIApp, edge_secret: str | None = None, ray_request_ids: bool = True) -> None:
        self.app = app
        self.ray_request_ids = ray_request_ids  # False: Ray's RequestIdMiddleware is not in front of the app
        secret = os.environ.get(EDGE_SECRET_ENV, "") if edge_secret is None else edge_secret
        self.edge_secret = secret.encode() if secret else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers, client, secret, request_id = edge_headers(scope["headers"])
        scope["headers"] = headers
        if self.edge_secret is not None and secret and hmac.compare_digest(secret, self.edge_secret):
            if client:
                scope["client"] = (client.decode("latin-1"), 0)
            if request_id and _REQUEST_ID_SHAPE.fullmatch(request_id):
                scope[EDGE_REQUEST_ID] = request_id.decode()
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers.append(DISCONNECT_DISABLED)
        if not self.ray_request_ids:
            await self.app(scope, receive, send)
            return

        async def send_without_ray_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = drop_last(list(message.get("headers", ())), _REQUEST_ID)
            await send(message)

        await self.app(scope, receive, send_without_ray_id)


def without_control_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in headers if k.lower() not in _CONTROL_SPELLINGS]


def edge_headers(
    headers: list[tuple[bytes, bytes]],
) -> tuple[list[tuple[bytes, bytes]], bytes | None, bytes | None, bytes | None]:
    """``headers`` without Serve's control headers and the edge's three, and the edge's three values
    (the client's address, the secret, the request id)."""
    kept: list[tuple[bytes, bytes]] = []
    client = secret = request_id = None
    for name, value in headers:
        lower = name.lower()
        if lower == _EDGE_CLIENT:
            client = value
        elif lower == _EDGE_SECRET:
            secret = value
        elif lower == _EDGE_REQUEST_ID:
            request_id = value
        elif lower not in _CONTROL_SPELLINGS:
            kept.append((name, value))
    return kept, client, secret, request_id


def drop_last(headers: list[tuple[bytes, bytes]], name: bytes) -> list[tuple[bytes, bytes]]:
    """``headers`` without the last entry named ``name`` (names compared lower-cased)."""
    for i in range(len(headers) - 1, -1, -1):
        if headers[i][0].lower() == name:
            del headers[i]
            break
    return headers
