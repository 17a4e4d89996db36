"""A deadline on a request's body: 408 when it has not all arrived ``timeout_s`` after the request began.

Every HTTP request holds one of the replica's request slots (Serve's ``max_ongoing_requests``) from
the moment its headers arrive, and the body is read before any per-address limit or authentication
can run. Without a deadline a caller trickling bodies could hold every slot for free. (Behind the
bundled HAProxy a body reaches the replica whole or not at all, :mod:`gateway.runtime.haproxy_edge`;
this deadline is what holds in ``direct`` mode and for anything that reaches the replica otherwise.)

One ASGI middleware in front of every route, so the JSON-RPC paths, the REST routes and the MCP SDK's
own body reading are all covered alike. On the deadline it answers 408 itself, then tells the app the
client went away (``http.disconnect``) and drops whatever the app still sends.
"""

from __future__ import annotations

import asyncio
import contextlib

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.core.errors import ProxyError


def timeout_body(timeout_s: float) -> bytes:
    message = f"the request body did not arrive within {timeout_s:g} s"
    return orjson.dumps(ProxyError(408, "REQUEST_TIMEOUT", message).http_body(None))


class BodyDeadline:
    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self._body = timeout_body(timeout_s)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        reading = True  # until the body's last part arrived; later receives (a disconnect) are untimed
        started = answered = False

        async def timed_receive() -> Message:
            nonlocal reading, answered
            if not reading:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                reading = False
                if not started:
                    answered = True
                    await self._answer(send)
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                reading = False
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if answered:
                return  # the 408 went out: the app's own answer has no connection to go to
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, timed_receive, guarded_send)
        except Exception:
            if not answered:
                raise  # the app's own failure; after a 408, only the disconnect it was told of

    async def _answer(self, send: Send) -> None:
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self._body)).encode()),
            (b"connection", b"close"),
        ]
        with contextlib.suppress(OSError, RuntimeError):
            await send({"type": "http.response.start", "status": 408, "headers": headers})
            await send({"type": "http.response.body", "body": self._body})
