"""The process's one subscription to a geyser endpoint of the pool, shared by every client stream.

:class:`UpstreamGeyser` keeps one ``Subscribe`` stream open to a node serving ``geyser``
(:class:`gateway.node.streams.StreamNodes`: the pool's choice, or one fixed node), asking for the union
of what the process's streams want (:func:`geyser_proto.fanout.union_request`, at processed: commitment
is applied here) and handing every update to the fan-out. When the streams' filters change it sends the
new union on the same stream, as the public server allows (a request replaces the filters), coalescing
the changes of one loop turn into one request.

**Moves.** The subscription leaves its node when the stream ends or fails, when nothing at all (not even
a ping) came for ``silence_s`` (a hung node keeps its connection open: this is how one is found), or when
the pool takes the node out of service while another serves geyser; the node left is told to the
:class:`StreamNodes` (tried last for a while) and the subscription opens on the node it picks, with its
own channel (the node's ``grpc_url``, its ``grpc_token`` as x-token, TLS per URL). The client streams
stay open and miss nothing:

- the new subscription's first request carries ``from_slot`` (Yellowstone's replay) from the oldest slot
  that may still get an update (:mod:`gateway.node.geyser_moves`: the slot after the newest finalized one
  delivered, or an older one seen and neither finalized nor dead; at most ``max_margin_slots`` below the
  newest slot delivered), and no later than the new node's own slot (``GetSlot``: what a node behind has
  not reached comes live);
- every update already delivered is dropped by a key that is the same on every node of the chain
  (``Delivered``: a slot status by slot and status, a transaction by signature, an account by
  pubkey, slot and the signature of the transaction that wrote it, a block meta by slot; never the
  ``write_version``, which is each node's own), kept for the newest ``KEYS_WINDOW_SLOTS`` slots.

A node that cannot replay from there (it refuses the ``from_slot``, or its ``SubscribeReplayInfo`` says
it holds nothing that old) is passed over for the next node; when every node picked could not, the
subscription opens without ``from_slot``: a gap, logged, and the replay log is emptied. A fixed node
reconnected to is resumed the same way. (Without a replay log the new subscription asks for the
streams' union: a stream whose filters were added in the few slots replayed also gets what they match
of those slots.)

**When the client streams end.** Only when no node is in service for geyser
(:meth:`StreamNodes.none_serve`): every client stream then ends ``UNAVAILABLE`` with a message naming
why (:func:`none_serving_message`), and so does any stream that opens meanwhile, once its request
reaches the subscription. The subscription is opened again on the first node
that comes back, resumed as above when it still holds the slots, so that a client of a process keeping
a replay log resumes with ``from_slot``. One fixed node (:class:`gateway.node.streams.OneStreamNode`)
is never "none": its subscription is opened again after a short backoff until it answers, the client
streams staying open meanwhile.

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
refusal names one stream. The other streams keep their filters throughout.

With a replay log (:mod:`gateway.grpc.replay`) the subscription asks for the node's whole feed instead of
the union, and each update goes into the log, as the node's bytes, before the fan-out; a move without a
gap keeps appending to it, a gap empties it (what came meanwhile is lost).

The unary calls are forwarded to the node the subscription is on, or the first serving geyser
(:meth:`UpstreamGeyser.unary`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

import grpc

from gateway.base import metrics
from gateway.base.stopping import cancel_and_wait
from gateway.core.upstreams import UpstreamNode
from gateway.node.geyser_moves import MAX_MARGIN_SLOTS, Delivered
from gateway.node.streams import StreamNodes
from geyser_proto import geyser_pb2
from geyser_proto.fanout import Fanout, Member, union_request
from geyser_proto.filters import EMPTY, AccountFilter, Filters, TransactionFilter
from geyser_proto.streaming import Outbound

log = logging.getLogger(__name__)


class FeedLog(Protocol):
    """What keeps the node's recent feed (:class:`gateway.grpc.replay.ReplayLog`): every update, as the
    node's bytes, before the fan-out; emptied when the feed has a gap."""

    def append(self, raw: bytes, update: geyser_pb2.SubscribeUpdate) -> None: ...

    def reset(self) -> None: ...


@runtime_checkable
class Ending(Protocol):
    """A stream's sink that can be ended with a status (:class:`geyser_proto.streaming.Outbound`)."""

    def end(self, code: grpc.StatusCode, details: str) -> None: ...


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
#: A subscription that brought nothing, not even a ping, for this long is on a hung node (the default of
#: ``upstream_stream_silence_s``; every subscription asks for slot statuses: several a second).
SILENCE_S = 3.0
#: How long a resumption waits for the node's slot and the oldest slot it holds (GetSlot, SubscribeReplayInfo).
NODE_SLOT_TIMEOUT_S = 1.0
#: Words of a node's refusal of ``from_slot`` (Yellowstone's: "failed to get replay position for slot N",
#: "broadcast from N is not available, last available: F", "from_slot is not supported"; the devnode says
#: the second).
_REPLAY_WORDS = ("from_slot", "replay", "available")


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


def none_serving_message(replay: bool) -> str:
    """Why every client stream ends while no node serves geyser (``replay``: the process keeps a log)."""
    again = (
        "subscribe again, with from_slot set to the slot after the last one you received to resume without a gap"
        if replay
        else "subscribe again"
    )
    return f"no upstream node is in service for geyser: the stream cannot go on; {again} shortly"


class UpstreamGeyser:
    def __init__(
        self,
        nodes: StreamNodes,
        fanout: Fanout,
        *,
        token: str | None = None,
        retry_s: float = 1.0,
        log: FeedLog | None = None,
        ca_file: str | None = None,
        silence_s: float = SILENCE_S,
        max_margin_slots: int = MAX_MARGIN_SLOTS,
    ) -> None:
        """``nodes``: the nodes the subscription may be on (:class:`gateway.node.streams.PoolStreamNodes` over
        the process's pool, or ``OneStreamNode``); ``token``: the x-token of a node that names none of its
        own (``upstream_grpc_token``); ``retry_s``: the backoff before reconnecting to the node just left;
        ``ca_file``: CAs trusted for a TLS node beside the system's (``upstream_ca_file``); ``silence_s``: no
        update for this long is a hung node (``upstream_stream_silence_s``). Nodes are named in the log by
        their names (a URL may hold a provider's key)."""
        self.nodes = nodes
        self.fanout = fanout
        self.log = log
        self.retry_s = retry_s
        self.token = token
        self.silence_s = silence_s
        self.max_margin_slots = max_margin_slots
        self._roots = root_certificates(ca_file) if ca_file else None
        self._channels: dict[str, tuple[UpstreamNode, grpc.aio.Channel]] = {}
        self.node: UpstreamNode | None = None  # the node the subscription is on (or was last on)
        self.connected = False
        self.updates = 0  # received from upstream
        self.requests = 0  # filter requests sent upstream
        self.refused = 0  # client streams ended because the node refused their filters
        self.moves = 0  # subscriptions opened on another node than the one before
        self.resumed = 0  # subscriptions the node took with a from_slot (no gap)
        self.gaps = 0  # subscriptions opened without one after updates had been delivered
        self.silences = 0  # subscriptions left because nothing came for silence_s (a hung node)
        self.unavailable = 0  # client streams ended because no node served geyser
        self.delivered = Delivered()
        #: Each stream's filters as the node last took them (its last pong), on any subscription so far.
        self.accepted: dict[Member, Filters] = {}
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
        self._from_slot: int | None = None  # for the next request sent: the first of a resumed subscription
        self._asked_from: int | None = None  # the current subscription's from_slot, until the node took it
        self._refused_from: set[str] = set()  # nodes that refused this resumption's from_slot
        self._heard = 0.0  # when the current subscription last brought anything (loop time)
        self._following = False  # the nodes' first view is known
        self._task: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="upstream-geyser")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        channels, self._channels = self._channels, {}
        for _, channel in channels.values():
            await channel.close()
        for closing in list(self._closing):
            await cancel_and_wait(closing)

    @property
    def node_name(self) -> str | None:
        """The name of the node the subscription is on (None before the first, and while none serves)."""
        return self.node.name if self.node is not None and self.connected else None

    @property
    def serving(self) -> bool:
        """Whether a node serves geyser (False only once the pool is known and none does): a stream that opens
        otherwise is refused, free, rather than opened and ended."""
        return not (self._following and self.nodes.none_serve())

    def unavailable_message(self) -> str:
        return none_serving_message(self.log is not None)

    # -- channels -----------------------------------------------------------------------------------

    def channel(self, node: UpstreamNode) -> grpc.aio.Channel:
        """The channel to ``node``'s geyser endpoint (one per node, opened when first needed)."""
        known = self._channels.get(node.name)
        if known is not None:
            if known[0] == node:
                return known[1]
            self._close_later(known[1])  # the node's entry changed
        if node.grpc_url is None:
            raise ValueError(f"node {node.name} has no grpc_url")
        target, secure = grpc_target(node.grpc_url)
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.keepalive_time_ms", 20_000),
            ("grpc.keepalive_timeout_ms", 10_000),
        ]
        if secure:
            credentials = grpc.ssl_channel_credentials(self._roots)
            channel = grpc.aio.secure_channel(target, credentials, options=options)
        else:
            channel = grpc.aio.insecure_channel(target, options=options)
        self._channels[node.name] = (node, channel)
        return channel

    def _drop_channel(self, name: str) -> None:
        """Forget the channel to a node left after a failure: the next dial opens a new connection at once
        (a channel that lost its node retries on a backoff of its own, up to minutes)."""
        known = self._channels.pop(name, None)
        if known is not None:
            self._close_later(known[1])

    def _close_later(self, channel: grpc.aio.Channel) -> None:
        task = asyncio.get_running_loop().create_task(channel.close(grace=UNARY_TIMEOUT_S))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _metadata(self, node: UpstreamNode) -> tuple[tuple[str, str], ...]:
        token = node.grpc_token or self.token
        return (("x-token", token),) if token else ()

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
        if self._following and self.fanout.members and self.nodes.none_serve():
            self._give_up()  # a stream that opened while no node serves geyser
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
        request = union_request(target.values()) if self.log is None else whole_feed()
        if self._from_slot is not None:  # the first request of a resumed subscription
            request.from_slot, self._from_slot = self._from_slot, None
        self._outgoing.put_nowait(request)
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
        if self._asked_from is not None:  # the node took the from_slot: no gap
            self._asked_from = None
            self._refused_from.clear()
            self.resumed += 1
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
        await self.nodes.start()
        self._following = True
        loop = asyncio.get_running_loop()
        watcher = loop.create_task(self._follow_pool(), name="upstream-geyser-pool")
        not_before: dict[str, float] = {}  # a node that just failed is tried again no sooner (another at once)
        try:
            while True:
                node = self.nodes.pick()
                if node is None:  # no node serves geyser: the client streams were told (_follow_pool)
                    self._give_up()
                    await self._changed_within(self.retry_s)
                    continue
                wait = not_before.get(node.name, 0.0) - loop.time()
                if wait > 0:
                    await self._changed_within(wait)
                    continue
                try:
                    delay = await self._session(node)
                except Exception:  # a bug, or a node entry without a geyser URL: the next pick is tried
                    log.exception("upstream geyser %s: the subscription could not be opened", node.name)
                    self._leave(node.name)
                    delay = self.retry_s
                not_before[node.name] = loop.time() + delay
        finally:
            await cancel_and_wait(watcher)

    async def _changed_within(self, timeout_s: float) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                await self.nodes.changed()
        except TimeoutError:
            pass

    async def _follow_pool(self) -> None:
        """End every client stream as soon as no node serves geyser (the subscription may still be open)."""
        while True:
            if self.nodes.none_serve():
                self._give_up()
            await self.nodes.changed()

    def _give_up(self) -> None:
        """No node serves geyser: every client stream ends UNAVAILABLE (it may resume with from_slot)."""
        members = list(self.fanout.members)
        if not members:
            return
        message = none_serving_message(self.log is not None)
        log.warning("no upstream node is in service for geyser: %d client streams ended", len(members))
        for member in members:
            self.fanout.detach(member)
            if isinstance(member.sink, Ending):
                member.sink.end(grpc.StatusCode.UNAVAILABLE, message)
            self.unavailable += 1
        self._wake()

    async def _resume_point(self, node: UpstreamNode) -> tuple[int | None, float | None]:
        """The from_slot of a subscription opening on ``node`` (None: without one; a gap when updates had been
        delivered, which empties the log), or, second, the wait before ``node`` is tried again when it is not
        to be subscribed to now (it does not answer, or says it cannot replay from that slot)."""
        resume = self.delivered.resume_slot(self.max_margin_slots)
        if resume is None:
            return None, None  # nothing delivered yet: nothing to continue
        if node.name in self._refused_from:  # every node picked refused it: go on from now
            self._refused_from.clear()
            self.gaps += 1
            if self.log is not None:
                self.log.reset()
            log.warning(
                "upstream geyser %s: no node could replay from slot %d; opened without from_slot: the updates "
                "since slot %s are lost (a gap: the replay log starts again)",
                node.name,
                resume,
                self.delivered.newest,
            )
            return None, None
        try:
            # A node behind the slot is asked from its own slot (what it has not reached comes live).
            slot = await self._ask(node, "GetSlot", geyser_pb2.GetSlotRequest(), geyser_pb2.GetSlotResponse)
            if slot is not None:
                resume = min(resume, int(slot.slot))
            held = await self._ask(
                node,
                "SubscribeReplayInfo",
                geyser_pb2.SubscribeReplayInfoRequest(),
                geyser_pb2.SubscribeReplayInfoResponse,
            )
        except grpc.aio.AioRpcError as exc:
            log.warning("upstream geyser %s does not answer (%s): leaving it", node.name, exc.code().name)
            self._leave(node.name)
            return None, self.retry_s
        if held is not None:  # (a node without SubscribeReplayInfo is asked for the replay as it is)
            first = held.first_available if held.HasField("first_available") else None
            if first is None or first > resume:
                log.warning(
                    "upstream geyser %s cannot replay from slot %d (the oldest it holds: %s): another node is asked",
                    node.name,
                    resume,
                    first,
                )
                self._refused_from.add(node.name)
                self.nodes.left(node.name)
                return None, 0.0
        return resume, None

    async def _ask(self, node: UpstreamNode, rpc: str, request: Any, response_type: Any) -> Any:
        """``rpc``'s answer from ``node`` before a resumed subscription (None: the node does not serve it);
        raises :class:`grpc.aio.AioRpcError` when the node does not answer."""
        method = self.channel(node).unary_unary(
            SERVICE + rpc,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response_type.FromString,
        )
        try:
            return await method(request, metadata=self._metadata(node), timeout=NODE_SLOT_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            return None

    async def _session(self, node: UpstreamNode) -> float:
        """One subscription on ``node``, until it ends, fails, falls silent or the node leaves service; how
        long to wait before the next one on the same node."""
        from_slot, skip = await self._resume_point(node)
        if skip is not None:
            return skip
        self._outgoing = asyncio.Queue()
        self._inflight.clear()
        self._acked, self._sent_version = False, -1
        self._from_slot = self._asked_from = from_slot
        if self.node is not None and self.node.name != node.name:
            self.moves += 1
            metrics.UPSTREAM_STREAM_MOVES.inc(("geyser", node.name))
            resumed = "without from_slot" if from_slot is None else f"from slot {from_slot}"
            log.warning("upstream geyser: the subscription moves to %s (%s)", node.name, resumed)
        self.node = node
        self._flush()  # the streams' filters open the subscription
        loop = asyncio.get_running_loop()
        self._heard = loop.time()
        call = self.channel(node).stream_stream(
            SERVICE + "Subscribe",
            request_serializer=geyser_pb2.SubscribeRequest.SerializeToString,
            response_deserializer=None,  # the node's bytes: parsed in _on_update, kept as they are by the log
        )(self._requests(self._outgoing), metadata=self._metadata(node))
        reader = loop.create_task(self._read(call))
        silent = loop.create_task(self._silent())
        out = loop.create_task(self._out_of_service(node.name))
        try:
            await asyncio.wait({reader, silent, out}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            call.cancel()
            for task in (reader, silent, out):
                task.cancel()
            await asyncio.wait({reader, silent, out})  # their errors are read below
            if self.connected:
                metrics.GRPC_UPSTREAM_CONNECTED.set(0)
            self.connected = self._acked = False
            metrics.GRPC_UPSTREAM_REOPENS.inc()
        if not reader.cancelled():
            return self._ended(node, reader.exception())
        if not silent.cancelled():
            self.silences += 1
            log.warning(
                "upstream geyser %s sent nothing for %g s: taken for hung, leaving it", node.name, self.silence_s
            )
        else:
            log.warning("upstream geyser %s is out of service for geyser: leaving it", node.name)
        self._leave(node.name)
        return 0.0

    def _ended(self, node: UpstreamNode, error: BaseException | None) -> float:
        """The subscription on ``node`` ended (``error``: how); the wait before the next one on it."""
        if error is None:
            log.warning("upstream geyser %s ended the stream; reconnecting", node.name)
        elif isinstance(error, grpc.aio.AioRpcError):
            code, details = error.code(), error.details() or ""
            if code in REFUSED and self._asked_from is not None and self._refused_replay(details):
                log.warning(
                    "upstream geyser %s refused from_slot %d (%s %s): another node is asked",
                    node.name,
                    self._asked_from,
                    code.name,
                    details,
                )
                self._refused_from.add(node.name)
                self.nodes.left(node.name)
                return 0.0
            if code in REFUSED and self._isolate(error):
                return 0.0  # reopen at once without what was refused
            log.warning("upstream geyser %s: %s %s; reconnecting", node.name, code.name, details)
        else:
            log.error("upstream geyser %s failed; reconnecting", node.name, exc_info=error)
        self._leave(node.name)
        return self.retry_s

    def _refused_replay(self, details: str) -> bool:
        """Whether a refusal of a subscription opened with from_slot is of the from_slot: it says so, or there
        was nothing else new in what the node refused."""
        text = details.lower()
        return any(word in text for word in _REPLAY_WORDS) or not self._suspects()

    def _leave(self, name: str) -> None:
        self.nodes.left(name)
        self._drop_channel(name)

    async def _read(self, call: Any) -> None:
        async for update in call:
            if not self.connected:
                self.connected = True
                metrics.GRPC_UPSTREAM_CONNECTED.set(1)
            self._on_update(update)

    async def _silent(self) -> None:
        """Return once the subscription brought nothing for ``silence_s``."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(max(0.0, self._heard + self.silence_s - loop.time()))
            if loop.time() - self._heard >= self.silence_s:
                return

    async def _out_of_service(self, name: str) -> None:
        """Return once the pool took ``name`` out of service for geyser while another node serves it."""
        while not self.nodes.should_leave(name):
            await self.nodes.changed()

    def _suspects(self) -> set[Member]:
        """The streams whose filters in the requests not answered yet differ from what the node took."""
        return {
            member
            for target in self._inflight.values()
            for member, filters in target.items()
            if filters != self.accepted.get(member, EMPTY)
        }

    def _isolate(self, exc: grpc.aio.AioRpcError) -> bool:
        """The node refused a request: set aside the streams that could have caused it; True when there
        were any (the subscription can reopen at once without them)."""
        suspects = self._suspects()
        name = self.node.name if self.node is not None else "?"
        why = f"{exc.code().name} {exc.details()}"
        if len(suspects) == 1:
            (member,) = suspects
            log.warning("upstream geyser %s refused a stream's filters (%s): that stream is ended", name, why)
            self._refuse(member, exc)
            return True
        if suspects:
            log.warning("upstream geyser %s refused the filters of one of %d streams (%s)", name, len(suspects), why)
            self._careful = True
            return True
        # Nothing new in what it refused (its limits changed?): try every stream again, one at a time.
        log.error("upstream geyser %s refused a request with no new filters (%s); reconnecting", name, why)
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
        self._heard = asyncio.get_running_loop().time()
        update = geyser_pb2.SubscribeUpdate.FromString(raw)
        kind = update.WhichOneof("update_oneof")
        if kind == "pong":
            self._took(update.pong.id)
        elif kind != "ping" and self.delivered.first(update, kind):
            if self.log is not None:
                self.log.append(raw, update)
            self.fanout.publish(update)

    # -- unary calls --------------------------------------------------------------------------------

    async def unary(self, rpc: str, request: Any, response_type: Any) -> Any:
        """Forward one unary call to the node the subscription is on (or the first serving geyser); raises
        :class:`grpc.aio.AioRpcError` as the node answered (``UNAVAILABLE`` when no node serves geyser)."""
        node = self.node if self.node is not None and self.connected else self.nodes.pick()
        if node is None:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                "no upstream node is in service for geyser",
            )
        method = self.channel(node).unary_unary(
            SERVICE + rpc,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response_type.FromString,
        )
        return await method(request, metadata=self._metadata(node), timeout=UNARY_TIMEOUT_S)
