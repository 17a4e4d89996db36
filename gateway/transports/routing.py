"""Mounting a pipeline handler as a Starlette route: request → :class:`Call` → stages → :class:`Reply`.

The one adapter between Starlette and the pipeline, used by the JSON-RPC, account and deposit routes.
It imports nothing of the app, so any module may mount routes without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import ProxyError
from gateway.pipeline import Call, Handler, Reply, Stage, compose, error_boundary, json_reply

#: JSON-RPC bodies: a batch of 100 signed transactions is ~200 KiB; leave ample room.
RPC_MAX_BODY_BYTES = 5 * 1024 * 1024
#: REST bodies are a few short JSON fields.
REST_MAX_BODY_BYTES = 64 * 1024


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


def to_response(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, headers=reply.headers, media_type="application/json")


def to_call(request: Request, body: bytes, transport: str = "http") -> Call:
    # Read from the ASGI scope: ``request.url`` would build and parse a whole URL on every call.
    scope = request.scope
    return Call(
        transport=transport,
        method=scope["method"],
        path=scope["path"],
        headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
        query=dict(request.query_params) if scope.get("query_string") else {},
        body=body,
    )


def mount(
    path: str,
    methods: str | Sequence[str],
    stages: Sequence[Stage],
    endpoint: Handler,
    max_body: int = REST_MAX_BODY_BYTES,
    transport: str = "http",
) -> Route:
    """A route running ``error_boundary``, then ``stages``, then ``endpoint``.

    ``transport="jsonrpc"`` makes errors that carry a JSON-RPC code render as JSON-RPC bodies.
    """
    handler = compose([error_boundary, *stages], endpoint)

    async def route(request: Request) -> Response:
        try:
            body = await read_body(request, max_body)
        except BodyTooLarge:
            err = ProxyError(413, "PAYLOAD_TOO_LARGE", f"request body exceeds {max_body} bytes")
            return to_response(json_reply(413, err.http_body(None)))
        return to_response(await handler(to_call(request, body, transport)))

    return Route(path, route, methods=[methods] if isinstance(methods, str) else list(methods))
