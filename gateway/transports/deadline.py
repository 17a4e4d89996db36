"""A deadline on a request's body: 408 when it has not all arrived ``timeout_s`` after the request began.

Every HTTP request holds one of the replica's request slots (Serve's ``max_ongoing_requests``) from
the moment its headers arrive, and the body is read before any per-address limit or authentication
can run. Without a deadline a caller trickling bodies could hold every slot for free. (Behind the
bundled HAProxy, :mod:`gateway.runtime.haproxy_edge`, and at the replicas' shared port,
:mod:`gateway.runtime.shared_port`, a small body reaches the replica's path whole or not at all; this
deadline is what holds for larger bodies, in ``direct`` mode, and for anything that reaches the replica
otherwise. The shared port says when it hands over a whole body, :data:`BODY_WHOLE`, and such a request
skips this middleware's bookkeeping: about 4 µs a request, measured in process (bench/README.md).)

One ASGI middleware in front of every route, so the JSON-RPC paths, the REST routes and the MCP SDK's
own body reading are all covered alike. On the deadline it answers 408 itself, then tells the app the
client went away (``http.disconnect``) and drops whatever the app still sends.

A timer per request (``asyncio.timeout``) cost 3-4 µs a call, more than the rest of the HTTP
transport; instead a request waiting for its body is listed, and one sweeper task, running only while
the list is not empty, ends those past their deadline once a second (so a deadline is kept to within
a second).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.core.errors import ProxyError

SWEEP_S = 1.0
#: The ASGI scope's key that a server in front of the app sets when it hands the app a request's whole body,
#: having waited for it under a deadline of its own (the replicas' shared port): nothing is left to time.
BODY_WHOLE = "gateway.body_whole"


def timeout_error(timeout_s: float) -> ProxyError:
    return ProxyError(408, "REQUEST_TIMEOUT", f"the request body did not arrive within {timeout_s:g} s")


def timeout_body(timeout_s: float) -> bytes:
    """The replica's 408, without a request id: the body is late before the call (and its id) exists."""
    return orjson.dumps(timeout_error(timeout_s).http_body(None))


@dataclass(slots=True)
class _Reading:
    deadline: float
    task: asyncio.Task[object]
    expired: bool = False


class BodyDeadline:
    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self._body = timeout_body(timeout_s)
        self._reading: dict[int, _Reading] = {}
        self._ids = itertools.count()
        self._sweeper: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or BODY_WHOLE in scope:
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        reading = True  # until the body's last part arrived; later receives (a disconnect) are untimed
        started = answered = False

        async def timed_receive() -> Message:
            nonlocal reading, answered
            if not reading:
                return await receive()
            key, entry = next(self._ids), _Reading(deadline, asyncio.current_task())  # type: ignore[arg-type]
            self._reading[key] = entry
            if self._sweeper is None:
                self._sweeper = loop.create_task(self._sweep())
            try:
                message = await receive()
            except asyncio.CancelledError:
                if not entry.expired:
                    raise
                reading = False
                if not started:
                    answered = True
                    await self._answer(send)
                return {"type": "http.disconnect"}
            finally:
                del self._reading[key]
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

    async def _sweep(self) -> None:
        """End the reads past their deadline, once a second, until none is waiting."""
        loop = asyncio.get_running_loop()
        try:
            while self._reading:
                await asyncio.sleep(SWEEP_S)
                now = loop.time()
                for entry in list(self._reading.values()):
                    if entry.deadline <= now and not entry.expired:
                        entry.expired = True
                        entry.task.cancel()
        finally:
            self._sweeper = None

    async def _answer(self, send: Send) -> None:
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self._body)).encode()),
            (b"connection", b"close"),
        ]
        with contextlib.suppress(OSError, RuntimeError):
            await send({"type": "http.response.start", "status": 408, "headers": headers})
            await send({"type": "http.response.body", "body": self._body})
