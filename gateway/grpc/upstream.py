"""The process's one subscription to the node's geyser endpoint, shared by every client stream.

:class:`UpstreamGeyser` keeps one ``Subscribe`` stream open to ``upstream_grpc_url`` (the devnode's
geyser server in the embedded default), asking for the union of what the process's streams want
(:meth:`geyser_proto.fanout.Fanout.wanted`, at processed: commitment is applied here) and handing
every update to the fan-out. When the streams' filters change it sends the new union on the same
stream, as the public server allows (a request replaces the filters), coalescing the changes of one
loop turn into one request. A dropped stream is opened again with the current union after a short
backoff; the client streams stay open meanwhile and simply receive nothing.

:meth:`UpstreamGeyser.sync` pings the upstream on the same stream and waits for the pong: every
request sent before it has been applied, so a client's filters are live upstream once its own ping is
answered (the gateway answers a client ping only after that).

The unary calls are forwarded on the same channel (:meth:`UpstreamGeyser.unary`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse

import grpc

from geyser_proto import geyser_pb2
from geyser_proto.fanout import Fanout

log = logging.getLogger(__name__)

SERVICE = "/geyser.Geyser/"
UNARY_TIMEOUT_S = 10.0
#: Updates of up to this size are accepted (an account's data is up to 10 MiB).
MAX_MESSAGE_BYTES = 64 * 2**20
_PING_IDS = 2**31 - 1


def grpc_target(url: str) -> tuple[str, bool]:
    """``host:port`` to dial and whether TLS is used: ``https://`` is TLS (port 443 by default), ``http://``
    plaintext (port 80 by default), as Yellowstone clients take an endpoint."""
    parsed = urlparse(url)
    secure = parsed.scheme == "https"
    port = parsed.port or (443 if secure else 80)
    host = parsed.hostname or "127.0.0.1"
    return (f"[{host}]:{port}" if ":" in host else f"{host}:{port}"), secure


class UpstreamGeyser:
    def __init__(self, url: str, fanout: Fanout, *, token: str | None = None, retry_s: float = 1.0) -> None:
        self.url = url
        self.fanout = fanout
        self.retry_s = retry_s
        target, secure = grpc_target(url)
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.keepalive_time_ms", 20_000),
            ("grpc.keepalive_timeout_ms", 10_000),
        ]
        if secure:
            self.channel = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options=options)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=options)
        self.metadata: tuple[tuple[str, str], ...] = (("x-token", token),) if token else ()
        self.connected = False
        self.updates = 0  # received from upstream
        self.requests = 0  # filter requests sent upstream
        self._subscribe = self.channel.stream_stream(
            SERVICE + "Subscribe",
            request_serializer=geyser_pb2.SubscribeRequest.SerializeToString,
            response_deserializer=geyser_pb2.SubscribeUpdate.FromString,
        )
        self._outgoing: asyncio.Queue[geyser_pb2.SubscribeRequest] = asyncio.Queue()
        self._sent_version = -1
        self._refresh_scheduled = False
        self._ping_ids = itertools.count(1)
        self._pongs: dict[int, asyncio.Future[None]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="upstream-geyser")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.channel.close()

    # -- the one subscription ---------------------------------------------------------------------

    def refresh(self) -> None:
        """The streams' filters changed: send the new union upstream (once per loop turn)."""
        if not self._refresh_scheduled:
            self._refresh_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._refresh_scheduled = False
        if self.fanout.version != self._sent_version:
            self._sent_version = self.fanout.version
            self._outgoing.put_nowait(self.fanout.wanted())
            self.requests += 1

    async def sync(self, timeout_s: float = 5.0) -> bool:
        """Wait until the upstream has applied every request sent so far (a ping answered on the stream);
        False if it did not answer in time (not connected, or slow)."""
        self._flush()
        ping_id = next(self._ping_ids) % _PING_IDS
        pong = self._pongs[ping_id] = asyncio.get_running_loop().create_future()
        self._outgoing.put_nowait(geyser_pb2.SubscribeRequest(ping=geyser_pb2.SubscribeRequestPing(id=ping_id)))
        try:
            await asyncio.wait_for(pong, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._pongs.pop(ping_id, None)

    @staticmethod
    async def _requests(
        queue: asyncio.Queue[geyser_pb2.SubscribeRequest],
    ) -> AsyncIterator[geyser_pb2.SubscribeRequest]:
        while True:
            yield await queue.get()

    async def _run(self) -> None:
        while True:
            self._outgoing = asyncio.Queue()
            self._sent_version = -1
            self._flush()  # the current union opens the stream
            try:
                call = self._subscribe(self._requests(self._outgoing), metadata=self.metadata)
                async for update in call:
                    self.connected = True
                    self._on_update(update)
                log.warning("upstream geyser %s ended the stream; reconnecting", self.url)
            except grpc.aio.AioRpcError as exc:
                log.warning("upstream geyser %s: %s %s; reconnecting", self.url, exc.code().name, exc.details())
            except Exception:
                log.exception("upstream geyser %s failed; reconnecting", self.url)
            self.connected = False
            await asyncio.sleep(self.retry_s)

    def _on_update(self, update: geyser_pb2.SubscribeUpdate) -> None:
        self.updates += 1
        kind = update.WhichOneof("update_oneof")
        if kind == "pong":
            pong = self._pongs.get(update.pong.id)
            if pong is not None and not pong.done():
                pong.set_result(None)
        elif kind != "ping":
            self.fanout.publish(update)

    # -- unary calls --------------------------------------------------------------------------------

    async def unary(self, rpc: str, request: Any, response_type: Any) -> Any:
        """Forward one unary call; raises :class:`grpc.aio.AioRpcError` as the upstream answered."""
        method = self.channel.unary_unary(
            SERVICE + rpc,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response_type.FromString,
        )
        return await method(request, metadata=self.metadata, timeout=UNARY_TIMEOUT_S)
