"""Adapters between HTTP and the pipeline: request → :class:`Call` → stages → :class:`Reply` →
response.

:func:`mount` makes a Starlette route of a pipeline (the account and deposit routes).
:class:`RpcFirst` serves the JSON-RPC paths straight from the ASGI messages, in front of Starlette:
those carry nearly all traffic, and Starlette's per-request machinery (middleware stack, router,
``Request``, ``Response``) was a large share of what the whole pipeline cost per call in one process
(``bench.pipeline_cpu``, ``asgi-`` rows; figures in bench/README.md). :class:`WebSocketFirst` does
the same for ``/ws``, for its frames' sake. Everything else still goes through Starlette. This module
imports nothing of the app, so any module may mount routes without an import cycle.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.core.credentials import http_credentials
from gateway.core.errors import ProxyError
from gateway.pipeline.stages import (
    Call,
    Handler,
    Reply,
    ReplyStyle,
    Stage,
    compose,
    error_boundary,
    json_reply,
    new_request_id,
)

#: JSON-RPC bodies: a batch of 100 signed transactions is ~200 KiB; leave ample room.
RPC_MAX_BODY_BYTES = 5 * 1024 * 1024
#: REST bodies are a few short JSON fields.
REST_MAX_BODY_BYTES = 64 * 1024
#: The ASGI scope's key for the request id the edge gave the request (set by
#: :class:`gateway.transports.ray_edge.ServeEdge` only when the edge's secret vouches for it): the call's.
EDGE_REQUEST_ID = "gateway.edge_request_id"


class BodyTooLarge(Exception):
    pass


async def read_body(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def too_large_reply(limit: int) -> Reply:
    """413 for a body over ``limit`` bytes (read before any stage runs, so it carries no request id)."""
    err = ProxyError(413, "PAYLOAD_TOO_LARGE", f"request body exceeds {limit} bytes")
    return json_reply(413, err.http_body(None))


def to_response(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, headers=reply.headers, media_type="application/json")


def http_call(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    query: Mapping[str, str] | None = None,
    style: ReplyStyle = ReplyStyle.REST,
    client: str | None = None,
    request_id: str | None = None,
) -> Call:
    """A call as the HTTP transport builds it; ``headers`` has lower-case names; ``request_id`` the
    edge's, else a new one."""
    query = query or {}
    credentials = http_credentials(headers, query)
    request_id = request_id or new_request_id()
    return Call(
        method, path, headers, query, body, credentials=credentials, client=client, style=style, request_id=request_id
    )


def call_from_scope(scope: Scope, body: bytes, style: ReplyStyle = ReplyStyle.REST) -> Call:
    # From the ASGI scope: ``request.url`` would build and parse a whole URL on every call.
    query_string: bytes = scope.get("query_string", b"")
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    query = dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)) if query_string else {}
    peer = scope.get("client")
    client = peer[0] if peer else None
    return http_call(scope["method"], scope["path"], headers, body, query, style, client, scope.get(EDGE_REQUEST_ID))


def mount(
    path: str,
    methods: str | Sequence[str],
    stages: Sequence[Stage],
    endpoint: Handler,
    max_body: int = REST_MAX_BODY_BYTES,
    style: ReplyStyle = ReplyStyle.REST,
) -> Route:
    """A route running ``error_boundary``, then ``stages``, then ``endpoint``."""
    handler = compose([error_boundary, *stages], endpoint)

    async def route(request: Request) -> Response:
        try:
            body = await read_body(request, max_body)
        except BodyTooLarge:
            return to_response(too_large_reply(max_body))
        return to_response(await handler(call_from_scope(request.scope, body, style)))

    return Route(path, route, methods=[methods] if isinstance(methods, str) else list(methods))


def route_path(scope: Scope) -> str:
    """The path below the app's mount point (``root_path``), as Starlette's router matches it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


class RpcFirst:
    """ASGI app: ``POST`` to one of ``paths`` runs ``pipeline`` on the raw ASGI messages; every other
    request (and the lifespan) goes to ``app``, which should also declare those routes so that other
    methods get its 405.

    ``pipeline`` is whole, error boundary included (``GatewayApp.rpc``): it answers every failure itself.
    """

    def __init__(
        self,
        app: ASGIApp,
        paths: Collection[str],
        pipeline: Handler,
        max_body: int = RPC_MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.paths = frozenset(paths)
        self.pipeline = pipeline
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or route_path(scope) not in self.paths:
            await self.app(scope, receive, send)
            return
        try:
            body = await receive_body(receive, self.max_body)
        except BodyTooLarge:
            await send_reply(send, too_large_reply(self.max_body))
            return
        if body is None:
            return  # the client went away before sending its whole body: nothing to answer
        await send_reply(send, await self.pipeline(call_from_scope(scope, body, ReplyStyle.JSONRPC)))


class WebSocketFirst:
    """ASGI app: a WebSocket at ``path`` goes straight to ``endpoint``; everything else to ``app``.

    Starlette's exception middleware hands the apps it serves a ``send`` wrapped in a coroutine of its
    own, and ``/ws`` sends every notification frame through it: 14% of the gateway's CPU in a busy
    fan-out (``bench.ws_fanout --profile``; bench/README.md). ``endpoint`` answers its own failures
    (close codes), so the middleware has nothing to catch.
    """

    def __init__(self, app: ASGIApp, path: str, endpoint: ASGIApp) -> None:
        self.app = app
        self.path = path
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and route_path(scope) == self.path:
            await self.endpoint(scope, receive, send)
        else:
            await self.app(scope, receive, send)


async def receive_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None when the client disconnected first; over ``limit`` raises."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk: bytes = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


#: Header names as sent (lower-case bytes) by the name the pipeline used. Names are this code's own,
#: never a client's, so the map stays small; the bound only guards against a future mistake.
_WIRE_NAMES: dict[str, bytes] = {}
_WIRE_NAMES_MAX = 256


def _wire_name(name: str) -> bytes:
    wire = name.lower().encode("latin-1")
    if len(_WIRE_NAMES) < _WIRE_NAMES_MAX:
        _WIRE_NAMES[name] = wire
    return wire


async def send_reply(send: Send, reply: Reply) -> None:
    """The reply as ``to_response`` would render it: lower-case names, ``application/json`` by default."""
    headers = [(b"content-length", str(len(reply.body)).encode())]
    typed = False
    for name, value in reply.headers.items():
        wire = _WIRE_NAMES.get(name) or _wire_name(name)
        typed = typed or wire == b"content-type"
        headers.append((wire, value.encode("latin-1")))
    if not typed:
        headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})
