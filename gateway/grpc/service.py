"""The ``geyser.Geyser`` service as this gateway serves it: authenticated, metered, limited.

Every call first proves its caller through the transports' one entry (:mod:`gateway.callers.entry`: the HTTP
path's own authentication of ``x-token`` metadata, a session token or an API key,
:func:`gateway.core.credentials.grpc_credentials`), then pays through the entry's session, from the
process's :class:`~gateway.credits.meter.Meter` (prices and status codes: :mod:`gateway.grpc.rules`):

- a unary call pays 1 credit, then is forwarded to the node's geyser endpoint (``Ping`` is answered
  here); a failure of the node is refunded;
- ``Subscribe`` pays 1 credit when established: reserved when it opens, charged once its first request's
  filters are accepted, refunded (a recorded refund) when it ends before that (refused, invalid or left
  empty); it then joins the process's fan-out
  (:mod:`geyser_proto.fanout`): each request the client sends replaces its filters, which the one
  upstream subscription then also asks for (:mod:`gateway.node.geyser`); a client ``ping`` is
  answered once the upstream has its latest filters. A billing task charges 60 credits at the start
  of each further interval and ends the stream ``RESOURCE_EXHAUSTED`` when that cannot be paid; it
  dies with the stream, so a client that goes away stops paying at once (a vanished peer is found by
  the server's HTTP/2 keepalive within 30 s, well inside an interval);
- a stream opened with an API key or a session token ends ``UNAUTHENTICATED`` as soon as that
  credential is rotated or logged out, on whichever replica (:mod:`gateway.auth.revocations`); every
  stream of an account ends ``PERMISSION_DENIED`` "ACCOUNT_SUSPENDED: ..." as soon as the account is
  suspended (``gateway account suspend`` publishes it on the same channel);
- at most ``grpc_max_streams_per_account`` streams per account and ``grpc_max_streams_per_address``
  per client address are open over the service (:mod:`gateway.storage.seats`; the client address as the
  access rules and the failed authentications see it: the peer, or behind a proxy listed in
  ``trusted_proxies`` the right-most untrusted entry of its ``x-forwarded-for`` metadata, as on HTTP,
  :func:`call_headers`), or the account's overrides of them (:mod:`gateway.storage.stream_limits`, read
  at each open); a stream's queue is bounded (:class:`geyser_proto.streaming.Outbound`), so a client
  too slow to read is cut off;
- each request's filters are claimed from the process's filter budget (:mod:`gateway.grpc.budget`) before
  they join the fan-out (at most ``FILTER_CHANGES_BURST`` requests at once, then ``FILTER_CHANGES_PER_S`` a
  second, per stream, and at most ``KEY_CHANGES_BURST`` re-indexed keys at once, then ``KEY_CHANGES_PER_S``
  a second, per account: index work grows with keys): a stream whose request would take the upstream
  subscription past what the node accepts, or its account past its share, ends ``RESOURCE_EXHAUSTED``
  and the others never notice;
- a request with ``from_slot`` is replayed from the process's replay log before the stream goes live
  (:mod:`gateway.grpc.replay`); the replayed span counts as stream time (its intervals are billed from
  when the first replayed slot came) once the replay is accepted (a refused one covers nothing), and a
  ping is answered once the replay before it is sent;
- a stream that ends hands the time it held past its last paid interval to its account's next stream
  (:mod:`gateway.grpc.store`), which counts it as held already, so an account's intervals are
  those of the stream time it held, summed over its reconnects; a stream none of whose requests was
  accepted (a refused resume) hands on only what it carried, none of its own time; an account opens at most
  ``max_opens_per_minute`` streams a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import grpc

from gateway.access.rules import ACCESS_DENIED
from gateway.auth.revocations import REASONS
from gateway.auth.services import AuthServices
from gateway.base import metrics
from gateway.callers.entry import Entry, EntrySession
from gateway.core.client_address import TrustedProxies, client_address, grpc_peer_host
from gateway.core.credentials import grpc_credentials
from gateway.core.errors import ProxyError, ReplyStyle
from gateway.credits.errors import SPEND_CAP_MESSAGE
from gateway.credits.meter import Admission, Meter, Outcome
from gateway.grpc.budget import FilterBudget
from gateway.grpc.metrics import GRPC_STREAMS
from gateway.grpc.replay import ReplayLog, Resume
from gateway.grpc.rules import (
    INSUFFICIENT,
    INTERVAL_CREDITS,
    MISSING_TOKEN,
    SUBSCRIBE_CREDITS,
    UNARY_CREDITS,
    ChangeRate,
    KeyChanges,
    StreamLimits,
    address_limit_message,
    change_rate_message,
    filter_keys,
    interval_unpaid_message,
    key_rate_message,
    open_rate_message,
    refusal,
    stream_limit_message,
)
from gateway.grpc.store import StreamClocks
from gateway.limits.rules import AccountLimits, RateLimited
from gateway.limits.slices import ShardUnavailable
from gateway.node.geyser import UpstreamGeyser
from gateway.pipeline.stages import Call, Wire
from gateway.storage.errors import StoreUnavailable
from gateway.storage.seats import Seat, Seats
from gateway.storage.stream_limits import AccountStreamLimits
from geyser_proto import geyser_pb2
from geyser_proto.fanout import Fanout
from geyser_proto.filters import DEFAULT_LIMITS, FilterLimits, Filters
from geyser_proto.streaming import Outbound, pong_update, read_requests

log = logging.getLogger(__name__)

#: Codes of the node's own failures: a unary call that ends with one of them is refunded.
NODE_FAILURES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
)
#: How long a client ping waits for the upstream to confirm the stream's filters before it is answered.
SYNC_TIMEOUT_S = 5.0
#: The metadata a proxy in front (Envoy, nginx's grpc_pass) names the client in, as the HTTP header.
FORWARDED_FOR = "x-forwarded-for"


@dataclass
class StreamTime:
    """The time one stream covers (time.monotonic()): from ``opened``, or from ``since`` when a replay reaches
    back further, plus ``carried``, the time its account's ended streams held and no interval billed. The open
    paid the first ``interval`` of it and ``paid`` further intervals were charged, so the next is due at
    :attr:`due`."""

    opened: float
    interval: float
    carried: float = 0.0
    since: float | None = None
    paid: int = 0
    admitted: bool = False  # a request of it was accepted: its own time is stream time
    ended: bool = False  # its unbilled time handed on
    moved: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def start(self) -> float:
        """When the stream's time would have begun, had it all been held in one piece before this stream."""
        return (self.opened if self.since is None else min(self.opened, self.since)) - self.carried

    @property
    def due(self) -> float:
        return self.start + (self.paid + 1) * self.interval

    def cover(self, since: float) -> None:
        """The stream covers the time from ``since`` too (a replay)."""
        if since < self.opened and (self.since is None or since < self.since):
            self.since = since
            self.moved.set()

    def unbilled(self, now: float) -> float:
        """The time covered by ``now`` past the last boundary a charge was made at (less than an interval
        unless a charge could not be made): what the account's next stream carries. A stream none of whose
        requests was accepted (refused, as a resume out of range, or left empty) delivered nothing: only what
        it carried and no interval billed goes on, none of its own time."""
        if not self.admitted:
            return max(0.0, self.carried - self.paid * self.interval)
        return max(0.0, now - self.start - self.paid * self.interval)


@dataclass(frozen=True, slots=True)
class StreamCaps:
    """One account's stream limits, as its stream opens."""

    per_account: int  # open at once over the service
    per_address: int  # open from the client's address (the account's overrides: for its own streams)
    opens_per_minute: int


@dataclass
class ServiceDeps:
    """What the service uses of its process (built by :class:`gateway.grpc.server.GrpcStreamServer`)."""

    auth: AuthServices
    meter: Meter
    limiter: AccountLimits
    fanout: Fanout
    upstream: UpstreamGeyser
    limits: StreamLimits
    budget: FilterBudget
    filter_limits: FilterLimits = DEFAULT_LIMITS
    replay_log: ReplayLog | None = None  # from_slot is served from it (None: UNIMPLEMENTED)
    seats: Seats = field(default_factory=Seats)  # open streams per account and address, over the service
    clocks: StreamClocks = field(default_factory=StreamClocks)  # opens per minute, unbilled time, per account
    overrides: AccountStreamLimits = field(default_factory=AccountStreamLimits)  # the accounts' own stream limits
    trusted: TrustedProxies = field(default_factory=TrustedProxies)  # settings ``trusted_proxies``


class GeyserGateway:
    def __init__(self, deps: ServiceDeps) -> None:
        self.deps = deps
        self.entry = Entry(deps.auth, deps.meter)  # no JSON-RPC here: only self-billed units
        self.streams = 0  # open on this process
        self.key_changes = KeyChanges()  # each account's re-indexed keys, over its streams

    # -- Subscribe ------------------------------------------------------------------------------

    async def Subscribe(self, requests: Any, context: grpc.aio.ServicerContext) -> None:
        started, failure = time.perf_counter(), None
        try:
            entered = await self._authenticate(context, "Subscribe")
            try:
                await self._subscribe(requests, context, entered)
            finally:
                entered.close()
        except BaseException as exc:
            failure = exc
            raise
        finally:  # gateway_requests_total{wire="grpc"} (docs/operations.md)
            metrics.grpc_call_done("stream", _status_name(context, failure), started)

    async def _subscribe(self, requests: Any, context: grpc.aio.ServicerContext, entered: EntrySession) -> None:
        if not self.deps.upstream.serving:  # no node serves geyser: refused before anything is charged
            await _abort(context, "UNAVAILABLE", self.deps.upstream.unavailable_message())
        caps = await self._caps(context, entered.pubkey)
        await self._open_rate(context, entered.pubkey, caps)
        forwarded = call_headers(context).get(FORWARDED_FOR)
        address = client_address(grpc_peer_host(context.peer() or ""), forwarded, self.deps.trusted)
        seats = await self._seats(context, entered.pubkey, address, caps)
        self.streams += 1
        GRPC_STREAMS.set(self.streams)
        counted = True

        def uncount() -> None:  # once the stream ends, even while its status is still on its way
            nonlocal counted
            if counted:
                counted = False
                self.streams -= 1
                GRPC_STREAMS.set(self.streams)
                for seat in seats:
                    self.deps.seats.release(seat)

        stream_id = f"grpc-{os.urandom(8).hex()}"
        admission: Admission | None = None

        def settle(refunded: bool) -> None:  # the open's credit: charged once admitted, else refunded
            nonlocal admission
            if admission is not None:
                entered.complete(admission, "grpc:Subscribe", stream_id, refunded=refunded)
                admission = None

        try:
            admission = await self._pay(
                context, entered, SUBSCRIBE_CREDITS, "grpc:Subscribe", stream_id, complete=False
            )
            try:  # what the account's ended streams held and no interval billed: this stream holds it on
                carried = await self.deps.clocks.take(entered.pubkey)
            except StoreUnavailable:
                await _abort(context, "UNAVAILABLE", "the stream cannot be billed right now; retry")
            clock = StreamTime(time.monotonic(), self.deps.limits.billing_interval_s, carried)
            try:
                # Response headers now, not with the first update: a client that opens the stream empty and
                # writes its request later (Triton's) waits for them, and the first update may be a ping away.
                await context.send_initial_metadata(())
                await self._stream(requests, context, entered, stream_id, uncount, settle, clock)
            finally:
                self._hand_on(entered.pubkey, clock)  # (the stream's end did already, unless it never began)
        finally:
            settle(True)  # never admitted: no filters accepted (refused, invalid, or the client left first)
            uncount()

    def _hand_on(self, pubkey: str, clock: StreamTime) -> None:
        """Once, as the stream ends: the time it covered and no interval billed goes to the account's next."""
        if not clock.ended:
            clock.ended = True
            self.deps.clocks.give(pubkey, clock.unbilled(time.monotonic()), clock.interval)

    async def _caps(self, context: grpc.aio.ServicerContext, pubkey: str) -> StreamCaps:
        """The account's stream limits: its overrides (``gateway account limits``), read at each open so that
        a change holds on every process from the next one, else the settings'."""
        limits = self.deps.limits
        try:
            mine = await self.deps.overrides.of(pubkey)
        except StoreUnavailable:
            await _abort(context, "UNAVAILABLE", "the account's stream limits cannot be read right now; retry")
        return StreamCaps(
            limits.max_streams_per_account if mine.streams is None else mine.streams,
            limits.max_streams_per_address if mine.address_streams is None else mine.address_streams,
            limits.max_opens_per_minute if mine.opens_per_minute is None else mine.opens_per_minute,
        )

    async def _open_rate(self, context: grpc.aio.ServicerContext, pubkey: str, caps: StreamCaps) -> None:
        """At most ``caps.opens_per_minute`` streams opened by an account a minute, over the service."""
        limit = caps.opens_per_minute
        try:
            opened = await self.deps.clocks.opened(pubkey)
        except StoreUnavailable:
            await _abort(context, "UNAVAILABLE", "stream opens cannot be counted right now; retry")
        if opened > limit:
            await _abort(context, "RESOURCE_EXHAUSTED", open_rate_message(limit))

    async def _seats(
        self, context: grpc.aio.ServicerContext, pubkey: str, address: str, caps: StreamCaps
    ) -> list[Seat]:
        """The stream's seats under the account's and the address's caps (over the service), or the
        call ended ``RESOURCE_EXHAUSTED`` at a cap, ``UNAVAILABLE`` when they cannot be counted."""
        seats = self.deps.seats
        per_account, per_address = caps.per_account, caps.per_address
        capped = (
            (f"seats:grpc:account:{pubkey}", per_account, stream_limit_message(per_account)),
            (f"seats:grpc:address:{address}", per_address, address_limit_message(per_address)),
        )
        taken: list[Seat] = []
        try:
            for key, cap, full in capped:
                seat = await seats.take(key, cap)
                if seat is None:
                    await _abort(context, "RESOURCE_EXHAUSTED", full)
                taken.append(seat)
        except StoreUnavailable:
            await _abort(context, "UNAVAILABLE", "open streams cannot be counted right now; retry")
        finally:
            if len(taken) < len(capped):  # refused: give back what was taken
                for seat in taken:
                    seats.release(seat)
        return taken

    async def _stream(
        self,
        requests: Any,
        context: grpc.aio.ServicerContext,
        entered: EntrySession,
        stream_id: str,
        uncount: Callable[[], None],
        settle: Callable[[bool], None],
        clock: StreamTime,
    ) -> None:
        """The revocation of the credential ``entered`` holds (a wallet's: nothing to revoke) ends the
        stream UNAUTHENTICATED. ``settle``: the open's credit, charged (False) once a request is admitted,
        refunded (True) as the stream ends before one was, before its status is sent."""
        deps = self.deps
        out = Outbound(deps.limits.max_queued, deps.limits.max_queued_bytes)
        member = deps.fanout.attach(out)
        entered.bind(lambda why: out.end(revoked_code(why), why))
        refresh = deps.upstream.refresh

        resume = None if deps.replay_log is None else Resume(deps.replay_log, deps.fanout, member, out, refresh)

        changes = ChangeRate()
        indexed = 0  # keys the stream's current filters put in the indexes

        def apply(filters: Filters) -> None:
            nonlocal indexed
            if out.ended:
                return  # the stream is ending: a later request changes nothing
            now = time.monotonic()
            if not changes.take(now):
                out.end(grpc.StatusCode.RESOURCE_EXHAUSTED, change_rate_message())
                return
            keys = filter_keys(filters)
            if not self.key_changes.take(entered.pubkey, now, indexed + keys):
                out.end(grpc.StatusCode.RESOURCE_EXHAUSTED, key_rate_message())
                return
            indexed = keys
            refused = deps.budget.claim(member, entered.pubkey, filters)
            if refused is not None:
                out.end(grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
                return
            live = filters if resume is None else resume.take(filters)
            if out.ended:
                return  # a from_slot out of range or not held yet: refused, like an invalid request
            if filters.from_slot is not None and deps.replay_log is not None:
                # Only once the replay is accepted: a refused one covers nothing (it was billed, issue 83).
                since = deps.replay_log.received_at(filters.from_slot)
                if since is not None:
                    clock.cover(since)  # the replayed span is stream time too
            clock.admitted = True
            settle(False)  # admitted: the open's credit is charged
            if live is not None:
                deps.fanout.replace(member, live)
                deps.upstream.refresh()

        async def pong(ping_id: int) -> None:
            if resume is not None:
                await resume.settled()
            await deps.upstream.sync(member, SYNC_TIMEOUT_S)
            out.deliver(pong_update(ping_id))

        tasks = [
            asyncio.create_task(read_requests(requests, out, apply, pong, deps.filter_limits)),
            asyncio.create_task(self._bill(entered, out, stream_id, clock)),
        ]

        def release() -> None:  # no more updates, no more charges; the time not billed goes on to the next
            self._hand_on(entered.pubkey, clock)
            if member.alive:
                deps.fanout.detach(member)
                deps.upstream.refresh()
            deps.budget.release(member)
            for task in tasks:
                task.cancel()
            if resume is not None:
                resume.cancel()
            uncount()
            settle(True)  # never admitted: refunded before the refusal's status reaches the client
            entered.close()

        try:
            await out.run(context, deps.limits.ping_interval_s, release)
        finally:
            release()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _bill(self, entered: EntrySession, out: Outbound, stream_id: str, clock: StreamTime) -> None:
        """Charge each further interval of the time the stream covers at its start, while the stream is open
        (this task dies with it); a replay that moves the clock back, or carried time, brings the charge forward."""
        interval = clock.interval
        while True:
            wait = clock.due - time.monotonic()
            if wait > 0:
                clock.moved.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await clock.moved.wait()
                continue
            try:
                admission = await entered.reserve(INTERVAL_CREDITS)
            except StoreUnavailable as exc:
                out.end(grpc.StatusCode.UNAVAILABLE, f"{exc.what} is unavailable, the stream cannot be billed; retry")
                return
            if admission.outcome is Outcome.CAPPED:  # the daily spend cap (docs/api.md, Spend cap)
                out.end(grpc.StatusCode.RESOURCE_EXHAUSTED, SPEND_CAP_MESSAGE)
                return
            if not admission.ok:
                out.end(grpc.StatusCode.RESOURCE_EXHAUSTED, interval_unpaid_message(interval))
                return
            clock.paid += 1  # only what was charged: an interval it could not pay is carried, not lost
            entered.complete(admission, "grpc:Subscribe:interval", stream_id)

    # -- unary calls ----------------------------------------------------------------------------

    async def Ping(self, request: geyser_pb2.PingRequest, context: grpc.aio.ServicerContext) -> geyser_pb2.PongResponse:
        async def answer() -> geyser_pb2.PongResponse:
            return geyser_pb2.PongResponse(count=request.count)

        return await self._unary(context, "Ping", answer)  # type: ignore[no-any-return]

    async def GetLatestBlockhash(
        self, request: geyser_pb2.GetLatestBlockhashRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.GetLatestBlockhashResponse:
        return await self._forward(context, "GetLatestBlockhash", request, geyser_pb2.GetLatestBlockhashResponse)  # type: ignore[no-any-return]

    async def GetBlockHeight(
        self, request: geyser_pb2.GetBlockHeightRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.GetBlockHeightResponse:
        return await self._forward(context, "GetBlockHeight", request, geyser_pb2.GetBlockHeightResponse)  # type: ignore[no-any-return]

    async def GetSlot(
        self, request: geyser_pb2.GetSlotRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.GetSlotResponse:
        return await self._forward(context, "GetSlot", request, geyser_pb2.GetSlotResponse)  # type: ignore[no-any-return]

    async def IsBlockhashValid(
        self, request: geyser_pb2.IsBlockhashValidRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.IsBlockhashValidResponse:
        return await self._forward(context, "IsBlockhashValid", request, geyser_pb2.IsBlockhashValidResponse)  # type: ignore[no-any-return]

    async def SubscribeReplayInfo(
        self, request: geyser_pb2.SubscribeReplayInfoRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.SubscribeReplayInfoResponse:
        log = self.deps.replay_log
        if log is None:
            await _abort(context, "UNIMPLEMENTED", "SubscribeReplayInfo is not implemented by this gateway")

        async def answer() -> geyser_pb2.SubscribeReplayInfoResponse:
            return geyser_pb2.SubscribeReplayInfoResponse(first_available=log.oldest())

        return await self._unary(context, "SubscribeReplayInfo", answer)  # type: ignore[no-any-return]

    async def GetVersion(
        self, request: geyser_pb2.GetVersionRequest, context: grpc.aio.ServicerContext
    ) -> geyser_pb2.GetVersionResponse:
        return await self._forward(context, "GetVersion", request, geyser_pb2.GetVersionResponse)  # type: ignore[no-any-return]

    async def _forward(self, context: grpc.aio.ServicerContext, rpc: str, request: Any, response_type: Any) -> Any:
        return await self._unary(context, rpc, lambda: self.deps.upstream.unary(rpc, request, response_type))

    async def _unary(self, context: grpc.aio.ServicerContext, rpc: str, work: Callable[[], Awaitable[Any]]) -> Any:
        started, failure = time.perf_counter(), None
        try:
            entered = await self._authenticate(context, rpc)
            try:
                return await self._paid(context, entered, rpc, work)
            finally:
                entered.close()
        except BaseException as exc:
            failure = exc
            raise
        finally:
            metrics.grpc_call_done("unary", _status_name(context, failure), started)

    async def _paid(
        self, context: grpc.aio.ServicerContext, entered: EntrySession, rpc: str, work: Callable[[], Awaitable[Any]]
    ) -> Any:
        await self._admit(context, entered)
        try:
            return await self._charged(context, entered, rpc, work)
        finally:
            self.deps.limiter.release(entered.pubkey)

    async def _admit(self, context: grpc.aio.ServicerContext, entered: EntrySession) -> None:
        """The account's limits, as for every JSON-RPC call: a slot of its concurrency (released by the
        caller) and a unit of its rate; with account shards, both of the account's whole limits."""
        limiter, pubkey, known = self.deps.limiter, entered.pubkey, entered.account()
        rps, concurrency = (known.rate_limit_rps, known.concurrency_limit) if known else (None, None)
        now = time.monotonic()
        pending = limiter.ready(pubkey, 1, now, rps=rps, concurrency=concurrency)
        if pending is not None:
            try:
                await pending
            except ShardUnavailable:
                await _abort(context, "UNAVAILABLE", "the account's limits are unavailable; retry shortly")
            now = time.monotonic()
        blocked = limiter.acquire(pubkey, now, rps=rps, concurrency=concurrency)
        if blocked is not None:
            await _abort(context, "RESOURCE_EXHAUSTED", f"concurrency limit exceeded ({blocked.limit} calls in flight)")
        taken = limiter.take(pubkey, now, time.time(), rps)
        if isinstance(taken, RateLimited):
            limiter.release(pubkey)
            await _abort(context, "RESOURCE_EXHAUSTED", f"rate limit exceeded ({taken.limit} calls/s); retry shortly")

    async def _charged(
        self, context: grpc.aio.ServicerContext, entered: EntrySession, rpc: str, work: Callable[[], Awaitable[Any]]
    ) -> Any:
        request_id = f"grpc-{os.urandom(8).hex()}"
        admission = await self._pay(context, entered, UNARY_CREDITS, f"grpc:{rpc}", request_id, complete=False)
        try:
            response = await work()
        except grpc.aio.AioRpcError as exc:
            entered.complete(admission, f"grpc:{rpc}", request_id, refunded=exc.code() in NODE_FAILURES)
            await context.abort(exc.code(), f"upstream geyser: {exc.details()}")
            raise  # not reached: abort raises
        except BaseException:
            entered.complete(admission, f"grpc:{rpc}", request_id, refunded=True)
            raise
        entered.complete(admission, f"grpc:{rpc}", request_id)
        return response

    # -- auth and money -------------------------------------------------------------------------

    async def _authenticate(self, context: grpc.aio.ServicerContext, rpc: str) -> EntrySession:
        """The call's entry: authenticated, its credential held (:meth:`EntrySession.close` releases it)."""
        credentials = grpc_credentials(context.invocation_metadata() or ())
        if credentials.empty:
            await _abort(context, "UNAUTHENTICATED", MISSING_TOKEN)
        call = Call(
            "POST", f"/geyser.Geyser/{rpc}", call_headers(context), {}, b"", credentials, context.peer(), Wire.GRPC
        )
        call.style = ReplyStyle.REST
        try:
            return await self.entry.open(call)
        except ProxyError as exc:
            code, message = refusal(exc)
            await _abort(context, code, message)
        except StoreUnavailable as exc:
            await _abort(context, "UNAVAILABLE", f"{exc.what} is unavailable; retry shortly")

    async def _pay(
        self,
        context: grpc.aio.ServicerContext,
        entered: EntrySession,
        price: int,
        method: str,
        request_id: str,
        *,
        complete: bool = True,
    ) -> Admission:
        """Reserve ``price`` (and record it unless the caller completes it) or end the call."""
        try:
            admission = await entered.reserve(price)
        except StoreUnavailable as exc:
            await _abort(context, "UNAVAILABLE", f"{exc.what} is unavailable; retry shortly")
        if not admission.ok:
            account = admission.account
            if account is not None and account.suspended:
                await _abort(context, "PERMISSION_DENIED", REASONS["account"])
            if admission.outcome is Outcome.NO_ACCOUNT:
                await _abort(context, "RESOURCE_EXHAUSTED", "payment required: no account for this public key")
            if admission.outcome is Outcome.CAPPED:
                await _abort(context, "RESOURCE_EXHAUSTED", SPEND_CAP_MESSAGE)
            await _abort(context, "RESOURCE_EXHAUSTED", f"{INSUFFICIENT}: {method} costs {price} credits")
        if complete:
            entered.complete(admission, method, request_id)
        return admission


def call_headers(context: grpc.aio.ServicerContext) -> dict[str, str]:
    """The call's ``x-forwarded-for`` metadata as its Call's header, every value in order joined as an
    HTTP field's lines are (RFC 9110, 5.3): the access rules and the failed authentications then find the
    client's address by the HTTP rule (:func:`gateway.core.client_address.client_address`), believed only
    from a peer listed in ``trusted_proxies``. No other metadata: the credential is read apart."""
    values = [
        value
        for name, value in context.invocation_metadata() or ()
        if name == FORWARDED_FOR and isinstance(value, str)  # grpc gives names lower-cased, text values as str
    ]
    return {FORWARDED_FOR: ", ".join(values)} if values else {}


def revoked_code(reason: str) -> grpc.StatusCode:
    """How a stream whose credential was revoked ends: a suspended account's ``PERMISSION_DENIED`` (docs/api.md,
    ACCOUNT_SUSPENDED), a rotated key's or a logged-out session's ``UNAUTHENTICATED``."""
    denied = reason == REASONS["account"] or reason.startswith(ACCESS_DENIED)  # suspended, or the access rules
    return grpc.StatusCode.PERMISSION_DENIED if denied else grpc.StatusCode.UNAUTHENTICATED


def _status_name(context: grpc.aio.ServicerContext, failure: BaseException | None) -> str | None:
    """The name of the status a call ended with: the one it aborted with, CANCELLED for a client that
    left, INTERNAL for an error of ours, None (OK) otherwise."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return str(code.name)
    if isinstance(failure, asyncio.CancelledError):
        return "CANCELLED"
    return None if failure is None else "INTERNAL"


async def _abort(context: grpc.aio.ServicerContext, code: str, message: str) -> NoReturn:
    await context.abort(grpc.StatusCode[code], message)
    raise AssertionError("grpc's abort returns only by raising")
