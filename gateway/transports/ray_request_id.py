"""Keeps the gateway's ``X-Request-Id`` the only one on responses served through Ray Serve.

Ray's HTTP servers (a replica's direct-ingress server and Serve's proxy) wrap every app in their own
``RequestIdMiddleware``, which appends an ``X-Request-ID`` of Ray's to every response. The gateway
sets its own on authenticated responses (it is also the ``requestId`` of error bodies and of usage
records), and the API wants none on ``/health``, ``/pricing`` and ``/capabilities``; so Ray's
would be a second, different value, or a header that must be absent.

Ray applies the middlewares returned by the callable named in ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``
outside its own, so :class:`DropRayRequestId` sees each response after Ray's header was appended and
removes it: always the last ``x-request-id`` of the response, since Ray's middleware appends exactly one.
"""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The value for ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``.
CALLBACK_IMPORT_PATH = "gateway.transports.ray_request_id.ray_middlewares"

_HEADER = b"x-request-id"


class DropRayRequestId:
    """ASGI middleware: remove the last ``x-request-id`` header of each HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_without_ray_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = drop_last(list(message.get("headers", ())), _HEADER)
            await send(message)

        await self.app(scope, receive, send_without_ray_id)


def drop_last(headers: list[tuple[bytes, bytes]], name: bytes) -> list[tuple[bytes, bytes]]:
    """``headers`` without the last entry named ``name`` (names compared lower-cased)."""
    for i in range(len(headers) - 1, -1, -1):
        if headers[i][0].lower() == name:
            del headers[i]
            break
    return headers


def ray_middlewares() -> list[Middleware]:
    """Called by Ray Serve when it builds an HTTP server."""
    return [Middleware(DropRayRequestId)]
