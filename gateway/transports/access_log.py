"""The access log an operator can turn on (setting ``access_log``, off by default): one line per HTTP
request a replica answers, on the logger ``gateway.access``::

    access 203.0.113.7 POST / 200 1.9 ms request_id=3f2a...

the client's address (as the per-address limits see it: :mod:`gateway.core.client_address`), the
method, the path, the status (0: no answer was started), the time until the app returned, and the
gateway's ``X-Request-Id`` (``-`` on routes without one). Never the query string (``?api-key=``
rides there), a header or a body: no credential reaches the log. The path is the one the client sent,
its control characters escaped. WebSockets are not logged here.

One ASGI middleware, outermost (it sees the 408 of the body deadline too). Off, :func:`with_access_log`
returns the app unchanged, so the hot path has nothing more to do. On, and when nothing else
prints INFO lines (a Ray replica configures no root handler), the lines go to stderr, which Ray
keeps in the replica's worker log and echoes in ``gateway up``'s output.
"""

from __future__ import annotations

import logging
import sys
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.core.client_address import TrustedProxies, client_address

LOGGER = "gateway.access"
MAX_PATH_CHARS = 200
_REQUEST_ID = b"x-request-id"
_FORWARDED_FOR = b"x-forwarded-for"


def with_access_log(app: ASGIApp, enabled: bool, trusted_proxies: list[str]) -> ASGIApp:
    """``app`` behind an :class:`AccessLog` when ``enabled``, else ``app`` itself."""
    if not enabled:
        return app
    return AccessLog(app, TrustedProxies.parse(trusted_proxies), access_logger())


def access_logger() -> logging.Logger:
    """``gateway.access`` at INFO, with a stderr handler of its own unless the process prints log records."""
    logger = logging.getLogger(LOGGER)
    logger.setLevel(logging.INFO)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s access %(message)s"))
        logger.addHandler(handler)
    return logger


class AccessLog:
    def __init__(self, app: ASGIApp, trusted: TrustedProxies, logger: logging.Logger) -> None:
        self.app = app
        self.trusted = trusted
        self.logger = logger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        request_id = "-"

        async def noting_send(message: Message) -> None:
            nonlocal status, request_id
            if message["type"] == "http.response.start":
                status = int(message["status"])
                for name, value in message.get("headers", ()):
                    if name.lower() == _REQUEST_ID:
                        request_id = value.decode("latin-1")
            await send(message)

        try:
            await self.app(scope, receive, noting_send)
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            self.logger.info(
                "%s %s %s %d %.1f ms request_id=%s",
                self.client(scope),
                scope.get("method", "-"),
                printable(scope.get("path", "")),
                status,
                elapsed_ms,
                printable(request_id),
            )

    def client(self, scope: Scope) -> str:
        peer = scope.get("client")
        forwarded = None
        if self.trusted.networks:
            forwarded = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == _FORWARDED_FOR), None)
        return client_address(peer[0] if peer else None, forwarded, self.trusted)


def printable(text: str) -> str:
    """``text`` on one line: control characters escaped, cut to :data:`MAX_PATH_CHARS`."""
    text = text[:MAX_PATH_CHARS]
    if text.isprintable() and " " not in text:
        return text
    return "".join(c if c.isprintable() and c != " " else f"\\x{ord(c):02x}" for c in text)
