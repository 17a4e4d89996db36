"""The process's one subscription to the node's geyser endpoint, shared by every client stream.

:class:`UpstreamGeyser` keeps one ``Subscribe`` stream open to ``upstream_grpc_url`` (the devnode's
geyser server in the embedded default), asking for the union of what the process's streams want
(:func:`geyser_proto.fanout.union_request`, at processed: commitment is applied here) and handing
every update to the fan-out. When the streams' filters change it sends the new union on the same
stream, as the public server allows (a request replaces the filters), coalescing the changes of one
loop turn into one request. A dropped stream is opened again with the current union after a short
backoff; the client streams stay open meanwhile and simply receive nothing.

Each filter request is followed by a ping on the same stream: its pong says the node took the request
(:attr:`UpstreamGeyser.accepted`, each stream's filters it has), and :meth:`UpstreamGeyser.sync` waits
for that for one stream, so a client's filters are live upstream once its own ping is answered (the
gateway answers a client ping only after that).

A request the node refuses as such (``INVALID_ARGUMENT`` and the like, :data:`REFUSED`) is never sent
again: the filter budget (:mod:`gateway.grpc.budget`) keeps the union within what the node is known to
accept, and when it refuses anyway, the streams whose filters changed since its last pong are the
suspects. One suspect: that stream ends with the node's status and the subscription opens again at once
without it. Several: the subscription opens again with what the node took, then sends one stream's
change at a time (the one that waited longest), each with its own pong, until none is left, so the next
refusal names one stream. The other streams keep their filters throughout and miss only the moment of
reopening.

With a replay log (:mod:`gateway.grpc.replay`) the subscription asks for the node's whole feed instead of
the union, and each update goes into the log, as the node's bytes, before the fan-out; the log is emptied
when the subscription reopens, as what came meanwhile is lost.

The unary calls are forwarded on the same channel (:meth:`UpstreamGeyser.unary`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import grpc

from gateway import metrics
from gateway.stopping import cancel_and_wait
from geyser_proto import geyser_pb2
from geyser_proto.fanout import Fanout, Member, union_request
from geyser_proto.filters import EMPTY, AccountFilter, Filters, TransactionFilter
from geyser_proto.streaming import Outbound

log = logging.getLogger(__name__)


class FeedLog(Protocol):
    """What keeps the node's recent feed (:class:`gateway.grpc.replay.ReplayLog`): every update, as the
    node's bytes, before the fan-out; emptied when the subscription reopens."""

    def append(self, raw: bytes, update: geyser_pb2.SubscribeUpdate) -> None: ...

    def reset(self) -> None: ...


def whole_feed() -> geyser_pb2.SubscribeRequest:
    """The upstream request of a process that keeps a log: every slot status, account, transaction and block
    meta, at processed (the streams' own filters are applied here, as they always are)."""
    everything = Filters(
        accounts=(("all", AccountFilter()),), transactions=(("all", TransactionFilter()),), blocks_meta=("all",)
    )
    return union_request([everything])


SERVICE = "/geyser.Geyser/"
UNARY_TIMEOUT_S = 10.0
#: Updates of up to this size are accepted (an account's data is up to 10 MiB).
MAX_MESSAGE_BYTES = 64 * 2**20
_PING_IDS = 2**31 - 1
#: The node's answers to a request it will never take: sending the same one again is refused again.
REFUSED = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
    }
)


def grpc_target(url: str) -> tuple[str, bool]:
    """``host:port`` to dial and whether TLS is used: ``https://`` is TLS (port 443 by default), ``http://``
    plaintext (port 80 by default), as Yellowstone clients take an endpoint."""
    parsed = urlparse(url)
    secure = parsed.scheme == "https"
    port = parsed.port or (443 if secure else 80)
    host = parsed.hostname or "127.0.0.1"
    return (f"[{host}]:{port}" if ":" in host else f"{host}:{port}"), secure


def root_certificates(ca_file: str) -> bytes:
    """The system's CA bundle and ``ca_file``'s CAs, as gRPC's ``root_certificates`` (which replace its own
    roots rather than add to them). Raises OSError when ``ca_file`` cannot be read."""
    ca = Path(ca_file).read_bytes()
    paths = ssl.get_default_verify_paths()
    system = next((Path(p) for p in (paths.cafile, paths.openssl_cafile) if p and Path(p).is_file()), None)
    return (system.read_bytes() + b"\n" if system is not None else b"") + ca


class UpstreamGeyser:
    def __init__(
        self,
        url: str,
        fanout: Fanout,
        *,
        token: str | None = None,
        retry_s: float = 1.0,
        log: FeedLog | None = None,
        ca_file: str | None = None,
        name: str = "geyser",
    ) -> None:
        """``ca_file``: CAs trusted for a TLS node beside the system's (``upstream_ca_file``); ``name``: the
        node's name in the pool, which the log says (its URL may hold a provider's key)."""
        self.url = url
        self.name = name
        self.fanout = fanout
        self.log = log
        self.retry_s = retry_s
        target, secure = grpc_target(url)
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.keepalive_time_ms", 20_000),
            ("grpc.keepalive_timeout_ms", 10_000),
        ]
        if secure:
            credentials = grpc.ssl_channel_credentials(root_certificates(ca_file) if ca_file else None)
            self.channel = grpc.aio.secure_channel(target, credentials, options=options)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=options)
        self.metadata: tuple[tuple[str, str], ...] = (("x-token", token),) if token else ()
        self.connected = False
        self.updates = 0  # received from upstream
        self.requests = 0  # filter requests sent upstream
        self.refused = 0  # client streams ended because the node refused their filters
        #: Each stream's filters as the node last took them (its last pong), on any subscription so far.
        self.accepted: dict[Member, Filters] = {}
        self._subscribe = self.channel.stream_stream(
            SERVICE + "Subscribe",
            request_serializer=geyser_pb2.SubscribeRequest.SerializeToString,
            response_deserializer=None,  # the node's bytes: parsed in _on_update, kept as they are by the log
        )
        self._outgoing: asyncio.Queue[geyser_pb2.SubscribeRequest] = asyncio.Queue()
        self._sent_version = -1
        self._refresh_scheduled = False
        self._ping_ids = itertools.count(1)
        self._inflight: dict[int, dict[Member, Filters]] = {}  # ping id -> the filters of the request before it
        self._acked = False  # the node took a request on the current subscription
        self._acks = asyncio.Event()  # replaced by a new one at each pong: waiters hold the one they saw
        self._careful = False  # one stream's change per request (after a refusal with several suspects)
        self._turns: dict[Member, int] = {}  # careful mode: when each stream's change was last sent alone
        self._turn = itertools.count(1)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="upstream-geyser")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.channel.close()

    # -- the one subscription ---------------------------------------------------------------------

    def refresh(self) -> None:
        """The streams' filters changed: send the new union upstream (once per loop turn)."""
        if not self._refresh_scheduled:
            self._refresh_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    @property
    def careful(self) -> bool:
        """Whether changes go one stream at a time (after a refusal with several suspects)."""
        return self._careful

    def _flush(self) -> None:
        self._refresh_scheduled = False
        if self._careful:
            self._probe()
        elif self.fanout.version != self._sent_version:
            self._sent_version = self.fanout.version
            self._send({member: member.filters for member in self.fanout.members})

    def _probe(self) -> None:
        """Careful mode: what the node took, plus one stream's change, once the previous one was answered."""
        if self._inflight:
            return
        members = self.fanout.members
        took = {member: filters for member, filters in self.accepted.items() if member in members}
        if not self._acked:
            self._send(took)  # a new subscription opens with nothing the node has not taken
            return
        changed = [member for member in members if member.filters != took.get(member, EMPTY)]
        if not changed:
            self._careful, self._sent_version = False, -1
            self._turns.clear()
            self._flush()
            return
        probe = min(changed, key=lambda member: self._turns.get(member, 0))
        self._turns[probe] = next(self._turn)
        self._send({**took, probe: probe.filters})

    def _send(self, target: dict[Member, Filters]) -> None:
        ping_id = next(self._ping_ids) % _PING_IDS
        self._inflight[ping_id] = target
        self._outgoing.put_nowait(union_request(target.values()) if self.log is None else whole_feed())
        self._outgoing.put_nowait(geyser_pb2.SubscribeRequest(ping=geyser_pb2.SubscribeRequestPing(id=ping_id)))
        self.requests += 1

    def _took(self, ping_id: int) -> None:
        """A pong: the node took the request before it, and every one sent earlier (it applies them in order)."""
        if ping_id not in self._inflight:
            return
        while True:
            sent = next(iter(self._inflight))
            target = self._inflight.pop(sent)
            if sent == ping_id:
                break
        self.accepted = {member: filters for member, filters in target.items() if member.alive}
        self._acked = True
        self._wake()
        if self._careful:
            self._probe()

    def live(self, member: Member) -> bool:
        """Whether the node has this stream's current filters on the open subscription."""
        return self._acked and self.accepted.get(member, EMPTY) == member.filters

    async def sync(self, member: Member, timeout_s: float = 5.0) -> bool:
        """Wait until the node has ``member``'s current filters (or the stream ended); False if that did
        not happen in time (not connected, slow, or its change still waiting its turn)."""
        self._flush()
        try:
            async with asyncio.timeout(timeout_s):
                while member.alive and not self.live(member):
                    await self._acks.wait()
        except TimeoutError:
            return False
        return self.live(member)

    def _wake(self) -> None:
        acks, self._acks = self._acks, asyncio.Event()
        acks.set()

    @staticmethod
    async def _requests(
        queue: asyncio.Queue[geyser_pb2.SubscribeRequest],
    ) -> AsyncIterator[geyser_pb2.SubscribeRequest]:
        while True:
            yield await queue.get()

    async def _run(self) -> None:
        while True:
            self._outgoing = asyncio.Queue()
            self._inflight.clear()
            self._acked, self._sent_version = False, -1
            if self.log is not None:
                self.log.reset()  # what comes after a reopening is not the continuation of what it holds
            self._flush()  # the streams' filters open the subscription
            delay = self.retry_s
            try:
                call = self._subscribe(self._requests(self._outgoing), metadata=self.metadata)
                async for update in call:
                    if not self.connected:
                        self.connected = True
                        metrics.GRPC_UPSTREAM_CONNECTED.set(1)
                    self._on_update(update)
                log.warning("upstream geyser %s ended the stream; reconnecting", self.name)
            except grpc.aio.AioRpcError as exc:
                if exc.code() in REFUSED and self._isolate(exc):
                    delay = 0.0  # reopen at once without what was refused
                else:
                    log.warning("upstream geyser %s: %s %s; reconnecting", self.name, exc.code().name, exc.details())
            except Exception:
                log.exception("upstream geyser %s failed; reconnecting", self.name)
            self.connected = self._acked = False
            metrics.GRPC_UPSTREAM_CONNECTED.set(0)
            metrics.GRPC_UPSTREAM_REOPENS.inc()
            await asyncio.sleep(delay)

    def _isolate(self, exc: grpc.aio.AioRpcError) -> bool:
        """The node refused a request: set aside the streams that could have caused it; True when there
        were any (the subscription can reopen at once without them)."""
        suspects = {
            member
            for target in self._inflight.values()
            for member, filters in target.items()
            if filters != self.accepted.get(member, EMPTY)
        }
        why = f"{exc.code().name} {exc.details()}"
        if len(suspects) == 1:
            (member,) = suspects
            log.warning("upstream geyser %s refused a stream's filters (%s): that stream is ended", self.name, why)
            self._refuse(member, exc)
            return True
        if suspects:
            log.warning(
                "upstream geyser %s refused the filters of one of %d streams (%s)", self.name, len(suspects), why
            )
            self._careful = True
            return True
        # Nothing new in what it refused (its limits changed?): try every stream again, one at a time.
        log.error("upstream geyser %s refused a request with no new filters (%s); reconnecting", self.name, why)
        self.accepted, self._careful = {}, True
        return False

    def _refuse(self, member: Member, exc: grpc.aio.AioRpcError) -> None:
        self.refused += 1
        self.fanout.detach(member)
        if isinstance(member.sink, Outbound):
            member.sink.end(exc.code(), f"the node's geyser endpoint refused this stream's filters: {exc.details()}")
        self._wake()

    def _on_update(self, raw: bytes) -> None:
        self.updates += 1
        update = geyser_pb2.SubscribeUpdate.FromString(raw)
        kind = update.WhichOneof("update_oneof")
        if kind == "pong":
            self._took(update.pong.id)
        elif kind != "ping":
            if self.log is not None:
                self.log.append(raw, update)
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
