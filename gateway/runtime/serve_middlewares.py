"""The middlewares Ray Serve puts in front of each of its HTTP servers (``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``,
:data:`gateway.transports.ray_edge.CALLBACK_IMPORT_PATH`): :class:`gateway.transports.ray_edge.ServeEdge`, and in
an ingress replica no ``RequestIdMiddleware`` of Ray's. Here, not in the transport, because it touches Ray."""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.types import ASGIApp

from gateway.transports.ray_edge import ServeEdge


class _NoRequestIdMiddleware:
    """Stands in for Ray's ``RequestIdMiddleware``: the app itself, unwrapped."""

    def __new__(cls, app: ASGIApp) -> ASGIApp:  # type: ignore[misc]
        return app


def ray_middlewares() -> list[Middleware]:
    """Called by Ray Serve when it builds an HTTP server (in a replica, just before it wraps the app).

    In an ingress replica, Ray's ``RequestIdMiddleware`` is replaced by the app itself: it would add a
    request id to the scope's headers and an ``X-Request-ID`` to every response, through a wrapper of
    every ``send``, which :class:`ServeEdge` then took out again through a second one. The replica
    makes its own id when the header is absent (its logs keep one). Serve's proxy keeps Ray's (its
    request context reads the header), and :class:`ServeEdge` strips Ray's response header there."""
    from ray.serve import context
    from ray.serve._private import http_util

    if context._get_internal_replica_context() is None:  # type: ignore[no-untyped-call]  # Serve's proxy actor
        return [Middleware(ServeEdge)]
    http_util.RequestIdMiddleware = _NoRequestIdMiddleware  # type: ignore[misc,assignment]
    return [Middleware(ServeEdge, ray_request_ids=False)]
