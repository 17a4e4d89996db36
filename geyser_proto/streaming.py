"""The server side of the Geyser service under ``grpc.aio``, shared by the devnode and the gateway.

- :func:`service_handler`: every rpc of the service, from an object's coroutines of the same names;
  the rpcs it lacks answer ``UNIMPLEMENTED`` with a message naming them. ``Subscribe`` writes
  updates already encoded (bytes: the fan-out encodes each update once for all streams).
- :class:`Outbound`: one stream's bounded queue of encoded updates. The fan-out fills it without
  blocking; :meth:`Outbound.run` drains it into the call and sends a ping update when nothing was
  written for a while (the public server's keepalive, which also finds dead clients). A queue over
  its bound ends the stream with ``RESOURCE_EXHAUSTED``: a client that cannot keep up is cut off, it
  never slows the others nor grows memory without bound.
- :func:`read_requests`: the client's side of the stream: each request replaces the filters, a
  request with ``ping`` set is answered with a pong and changes nothing (as the public server does);
  a large one is compiled in a worker thread, so the event loop keeps serving the other streams.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from geyser_proto import geyser_pb2
from geyser_proto.filters import DEFAULT_LIMITS, FilterError, FilterLimits, Filters, Unsupported, compile_request

SERVICE = "geyser.Geyser"
#: A request larger than this is compiled off the event loop (its size is bounded first: FilterLimits).
OFF_LOOP_BYTES = 64 * 1024
SUBSCRIBE = "Subscribe"


def service_handler(impl: object, server_name: str) -> grpc.GenericRpcHandler:
    """The ``geyser.Geyser`` service: ``impl``'s coroutine for each rpc it defines, UNIMPLEMENTED for the rest."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    service = geyser_pb2.DESCRIPTOR.services_by_name["Geyser"]
    for method in service.methods:
        request = getattr(geyser_pb2, method.input_type.name)
        response = getattr(geyser_pb2, method.output_type.name)
        behavior = getattr(impl, method.name, None) or _unimplemented(method.name, server_name)
        factory = _FACTORIES[(method.client_streaming, method.server_streaming)]
        serializer = None if method.name == SUBSCRIBE else response.SerializeToString
        handlers[method.name] = factory(
            behavior, request_deserializer=request.FromString, response_serializer=serializer
        )
    return grpc.method_handlers_generic_handler(SERVICE, handlers)


_FACTORIES: dict[tuple[bool, bool], Callable[..., grpc.RpcMethodHandler]] = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def _unimplemented(rpc: str, server_name: str) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[None]]:
    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{rpc} is not implemented by {server_name}")

    return refuse


def _now_update(**fields: Any) -> geyser_pb2.SubscribeUpdate:
    update = geyser_pb2.SubscribeUpdate(**fields)
    update.created_at.GetCurrentTime()
    return update


def ping_update() -> bytes:
    return _now_update(ping=geyser_pb2.SubscribeUpdatePing()).SerializeToString()


def pong_update(ping_id: int) -> bytes:
    return _now_update(pong=geyser_pb2.SubscribeUpdatePong(id=ping_id)).SerializeToString()


class Outbound:
    """One stream's queue of encoded updates: bounded in count and bytes; the first :meth:`end` wins."""

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.written = 0  # updates written to the call (pings included)
        self._queue: deque[bytes] = deque()
        self._bytes = 0
        self._wake = asyncio.Event()
        self._wrote = asyncio.Event()  # set at each write (and at the end): room() waits on it
        self._ended: tuple[grpc.StatusCode, str] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._last_write = 0.0

    @property
    def ended(self) -> tuple[grpc.StatusCode, str] | None:
        return self._ended

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def queued_bytes(self) -> int:
        return self._bytes

    async def room(self, messages: int, nbytes: int) -> None:
        """Wait until at most ``messages`` updates and ``nbytes`` bytes wait, or the stream ended: a producer
        that may not outrun the client (a replay) fills the queue no further than that."""
        while self._ended is None and (len(self._queue) > messages or self._bytes > nbytes):
            self._wrote.clear()
            await self._wrote.wait()

    def deliver(self, data: bytes) -> None:
        if self._ended is not None:
            return
        self._queue.append(data)
        self._bytes += len(data)
        if len(self._queue) > self.max_messages or self._bytes > self.max_bytes:
            self.end(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the client is not reading its updates fast enough: more than {self.max_messages} updates or "
                f"{self.max_bytes} bytes waiting; the stream is closed (read faster or subscribe to less)",
            )
            return
        self._wake.set()

    def end(self, code: grpc.StatusCode, details: str) -> None:
        """End the stream with this status (OK: end it normally); what is queued is dropped."""
        if self._ended is not None:
            return
        self._ended = (code, details)
        self._queue.clear()
        self._bytes = 0
        self._wrote.set()
        if self._writer is not None:
            self._writer.cancel()  # a write blocked on a client that does not read ends too

    async def run(
        self, context: grpc.aio.ServicerContext, ping_interval_s: float, on_end: Callable[[], None] | None = None
    ) -> None:
        """Write the queue into the call until :meth:`end`, call ``on_end``, then end the call with that
        status. Cancelled when the client goes away (grpc cancels the handler).

        ``on_end`` runs before the status is sent because sending it can wait: the status follows the
        updates already written, which a client that does not read never takes."""
        if self._ended is None:
            writer = self._writer = asyncio.create_task(self._write(context, ping_interval_s))
            try:
                await asyncio.wait({writer})
            finally:
                if not writer.done():
                    writer.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await writer
                elif not writer.cancelled():
                    writer.exception()  # taken: a write that failed as the client went away is no news
            if not writer.cancelled() and writer.exception() is not None:
                raise writer.exception()  # type: ignore[misc]
        if on_end is not None:
            on_end()
        code, details = self._ended or (grpc.StatusCode.OK, "")
        if code != grpc.StatusCode.OK:
            await context.abort(code, details)

    async def _write(self, context: grpc.aio.ServicerContext, ping_interval_s: float) -> None:
        keepalive = asyncio.create_task(self._keepalive(ping_interval_s))
        queue, loop = self._queue, asyncio.get_running_loop()
        try:
            while True:
                while not queue:
                    self._wake.clear()
                    await self._wake.wait()
                data = queue.popleft()
                self._bytes -= len(data)
                await context.write(data)
                self.written += 1
                self._wrote.set()
                self._last_write = loop.time()
        finally:
            keepalive.cancel()

    async def _keepalive(self, interval_s: float) -> None:
        """A ping update whenever nothing was written for ``interval_s`` (one timer per interval, not one
        per update: the writer's wait has no timeout)."""
        loop = asyncio.get_running_loop()
        self._last_write = loop.time()
        while True:
            await asyncio.sleep(max(0.0, self._last_write + interval_s - loop.time()))
            if loop.time() - self._last_write >= interval_s and not self._queue:
                self._last_write = loop.time()
                self.deliver(ping_update())


async def read_requests(
    requests: AsyncIterator[geyser_pb2.SubscribeRequest],
    out: Outbound,
    on_filters: Callable[[Filters], None],
    on_ping: Callable[[int], Awaitable[None]] | None = None,
    limits: FilterLimits = DEFAULT_LIMITS,
) -> None:
    """Apply the client's requests until it half-closes (the stream stays open) or one is refused."""
    async for request in requests:
        if request.HasField("ping"):
            if on_ping is None:
                out.deliver(pong_update(request.ping.id))
            else:
                await on_ping(request.ping.id)
            continue
        try:
            if request.ByteSize() > OFF_LOOP_BYTES:  # up to 10,000 keys: milliseconds the other streams need
                filters = await asyncio.to_thread(compile_request, request, limits)
            else:
                filters = compile_request(request, limits)
        except Unsupported as exc:
            out.end(grpc.StatusCode.UNIMPLEMENTED, str(exc))
            return
        except FilterError as exc:
            out.end(grpc.StatusCode.INVALID_ARGUMENT, f"failed to create filter: {exc}")
            return
        on_filters(filters)
