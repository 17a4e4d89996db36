"""One authenticated WebSocket connection: its subscriptions, their billing, and its limits.

The transport (:mod:`gateway.pubsub.ws`) authenticates the upgrade through the transports' one entry
(:mod:`gateway.callers.entry`), then feeds the session each client frame (:meth:`WsSession.on_frame`) and
writes what :meth:`WsSession.next_batch` hands it, saying whether the socket took it (:meth:`WsSession.written`).
Everything in between is here, and none of it knows of ASGI:

- native subscriptions join the replica's shared upstream subscription (:mod:`gateway.node.pubsub`)
  and get this connection's own ids; ``subscribeSignal`` listens to the replica's signal feed;
- other JSON-RPC methods run through the same stages as ``POST /`` after auth (limits, billing, the
  forward), so the socket is no cheaper or freer a way to the node;
- billing goes through the entry's session (:class:`gateway.callers.entry.EntrySession`, the replica's
  :class:`~gateway.credits.meter.Meter` behind it): a subscription is reserved before the node is asked
  (refunded if it refuses), every notification is reserved before it is written and charged once the
  transport wrote it, refunded if the client's close came first (tallied per connection and method
  into one usage row per settlement), so the client pays for exactly what it received;
  when a charge cannot be paid, every subscription ends with a ``subscriptionEnded`` notice and the
  socket closes 4002, as it does whenever the balance falls below the minimum;
- a frame-rate bucket per connection (close 4003), a subscription cap (-32000), a bounded backlog of
  plain calls (at most ``max_pending_calls`` running or waiting, 16 of them at once; past it close
  4003), a bounded queue of undelivered messages, in count and in bytes (past either the socket closes
  1013, never buffered
  without end, the reason saying whose fault it is: a client that does not read, when the writer is
  stuck on the socket's full buffer; the gateway, when the writer is not and the queue grew anyway).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from gateway.access.rules import ACCESS_DENIED_RPC, SUBSCRIPTION
from gateway.callers.entry import EntrySession
from gateway.core.errors import ReplyStyle, RpcCode
from gateway.core.jsonrpc import MAX_BATCH, envelope_fault
from gateway.core.subscriptions import (
    ENDED_NOTIFICATION,
    NATIVE,
    NOTIFICATION_CREDITS,
    SIGNAL_EVENT_CREDITS,
    SIGNAL_NOTIFICATION,
    SIGNAL_SUBSCRIBE,
    SIGNAL_SUBSCRIBE_CREDITS,
    SIGNAL_UNSUBSCRIBE,
    SUBSCRIBE_CREDITS,
    UNAVAILABLE,
    UNSUBSCRIBE_OF,
    Close,
    Limits,
    subscription_limit_message,
)
from gateway.credits.errors import SPEND_CAP_MESSAGE, SPEND_CAP_RPC
from gateway.credits.meter import Admission, Outcome
from gateway.limits.rules import TokenBucket
from gateway.node.pubsub import Handle, SubscribeError, UpstreamPubSub, signature_final
from gateway.pipeline.stages import Call, Wire
from gateway.pubsub import metrics
from gateway.signals.rules import SignalFilter

log = logging.getLogger(__name__)

#: JSON-RPC calls of one connection running at once (each also holds an account concurrency slot).
MAX_CALLS_IN_FLIGHT = 16


class SignalSource(Protocol):
    """The replica's signal feed (:class:`gateway.signals.feed.SignalFeed`), as a session uses it."""

    def add(self, listener: Callable[[str, dict[str, Any]], None]) -> int: ...

    def remove(self, token: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Outgoing:
    body: bytes
    price: int = 0  # credits to charge before writing it
    method: str = ""  # its usage record's method


@dataclass(eq=False)
class _Sub:
    method: str  # the subscribe method
    handle: Handle | None = None  # native: the upstream share
    feed_token: int | None = None  # signals: the feed listener
    confirmed: bool = False  # the subscribe answer went out: notifications may follow
    early: list[Outgoing] = field(default_factory=list)  # notifications that came before it


class SubscriptionTally:
    """The client subscriptions open on this replica's sockets, by subscribe method (for the metric)."""

    def __init__(self) -> None:
        self.open: Counter[str] = Counter()

    def add(self, method: str) -> None:
        self.open[method] += 1
        metrics.WS_SUBSCRIPTIONS.set(self.open[method], (method,))

    def drop(self, method: str) -> None:
        self.open[method] -= 1
        metrics.WS_SUBSCRIPTIONS.set(self.open[method], (method,))


class Frames:
    """The frames of the node's latest notification, one per subscription id. Every session numbers its
    subscriptions from 1, so the sessions of one share mostly have the same id, and one frame serves
    them all instead of a copy each (building them was 14% of a saturated fan-out: bench/README.md)."""

    def __init__(self) -> None:
        self._result: bytes | None = None  # held, so that the identity check cannot match a new object
        self._frames: dict[tuple[bytes, bytes], Outgoing] = {}

    def notification(self, result: bytes, head: bytes, tail: bytes, method: str) -> Outgoing:
        if result is not self._result:
            self._result, self._frames = result, {}
        frame = self._frames.get((head, tail))
        if frame is None:
            frame = self._frames[(head, tail)] = Outgoing(head + result + tail, NOTIFICATION_CREDITS, method)
        return frame


@dataclass(frozen=True)
class SessionDeps:
    """What a session uses of its replica (built once by the transport)."""

    upstream: UpstreamPubSub
    signals: SignalSource | None
    limits: Limits
    tally: SubscriptionTally = field(default_factory=SubscriptionTally)
    frames: Frames = field(default_factory=Frames)


#: Why a socket's queue overflowed, in its close reason (docs/api.md, WebSocket close codes).
OVERFLOW_REASONS = {
    "client": "too many undelivered messages: the client is not reading",
    "gateway": "too many undelivered messages: the gateway is behind; reconnect (another replica may have room)",
}


class WsSession:
    def __init__(
        self,
        deps: SessionDeps,
        entered: EntrySession,
        client: str | None,
        connection_id: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.deps = deps
        self.entered = entered  # the connection's authentication: its billing and its JSON-RPC stages
        self.identity = entered.identity
        self.pubkey = entered.pubkey
        self.client = client
        self.connection_id = connection_id
        self.limits = deps.limits
        self.clock = clock
        self.subs: dict[int | str, _Sub] = {}
        self._native_ids = itertools.count(1)
        self._signal_ids = itertools.count(1)
        #: Undelivered messages, then None once closing. A deque and one waiter rather than an
        #: ``asyncio.Queue``: every notification of a fan-out is put on a thousand of them, and the
        #: queue's own books (unfinished count, its ``join`` event, its getters) were a fifth of a
        #: saturated fan-out's time (bench/README.md).
        self._out: deque[Outgoing | None] = deque()
        self._waiting: asyncio.Future[None] | None = None  # the writer's, while _out is empty
        self._queued_bytes = 0  # of the messages in _out
        self._ended = False  # next_batch took the sentinel
        self._frames = TokenBucket.full(self.limits.messages_per_second, self.limits.message_burst, clock())
        self._calls = asyncio.Semaphore(MAX_CALLS_IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()
        self.close_code: int | None = None
        self.close_reason = ""
        #: Set by the transport while its write waits for room in the socket (the client reads too
        #: slowly): a write with room never suspends, so the fan-in only sees it set when stuck.
        self.writing = False
        #: The reservations of the batch the writer is writing: charged once it is written, refunded if
        #: the client went first (a notification nobody received is not billed).
        self._held: list[tuple[Admission, str, int]] = []

    # -- client frames ------------------------------------------------------------------------

    async def on_frame(self, raw: str | bytes) -> None:
        """Handle one client frame (requests are answered in order; calls may finish out of order)."""
        if self.close_code is not None:
            return
        if self._frames.take(self.clock()) > 0:
            self.close(Close.RATE_LIMITED, f"more than {self.limits.messages_per_second} messages per second")
            return
        if len(raw) > self.limits.max_message_bytes:
            self._error(None, RpcCode.INVALID_REQUEST, f"message exceeds {self.limits.max_message_bytes} bytes")
            return
        try:
            payload = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self._error(None, RpcCode.PARSE_ERROR, "Parse error")
            return
        if isinstance(payload, list):
            if not payload:
                self._error(None, RpcCode.INVALID_REQUEST, "empty batch")
            for item in payload[:MAX_BATCH]:
                await self._request(item)
            return
        await self._request(payload)

    async def _request(self, req: Any) -> None:
        fault = envelope_fault(req)
        if fault is not None:
            req_id = req.get("id") if isinstance(req, dict) else None
            self._error(req_id, RpcCode.INVALID_REQUEST, f"Invalid request: {fault}")
            return
        req_id, method = req["id"], req["method"]
        params = req.get("params", [])
        if params is None:
            params = []
        if method in NATIVE or method == SIGNAL_SUBSCRIBE:
            if not isinstance(params, list):
                self._error(req_id, RpcCode.INVALID_PARAMS, "Invalid params: expected an array")
            elif not await self.entered.permits(method, SUBSCRIPTION):  # the account's access rules
                message = f"access denied: the account's access rules do not allow {method} with this credential"
                self._error(req_id, ACCESS_DENIED_RPC, message)
            elif method == SIGNAL_SUBSCRIBE:
                await self._subscribe_signal(req_id, params)
            else:
                await self._subscribe_native(req_id, method, params)
        elif method in UNSUBSCRIBE_OF or method == SIGNAL_UNSUBSCRIBE:
            self._unsubscribe(req_id, method, params)
        elif len(self._tasks) >= self.limits.max_pending_calls:
            self.close(Close.RATE_LIMITED, f"more than {self.limits.max_pending_calls} calls waiting for answers")
        else:
            self._spawn(self._call(req))

    async def _subscribe_native(self, req_id: Any, method: str, params: list[Any]) -> None:
        if method in UNAVAILABLE:
            self._error(req_id, RpcCode.METHOD_NOT_FOUND, f"{method} is not available on this gateway (/capabilities)")
            return
        if not self._room(req_id):
            return
        admission = await self._reserve(req_id, method, SUBSCRIBE_CREDITS)
        if admission is None:
            return
        sub_id = next(self._native_ids)
        sub = _Sub(method)
        self._add(sub_id, sub)
        notification = NATIVE[method][1]
        head = b'{"jsonrpc":"2.0","method":"' + notification.encode() + b'","params":{"result":'
        tail = b',"subscription":' + str(sub_id).encode() + b"}}"

        frames = self.deps.frames

        def deliver(result: bytes, final: bool) -> None:
            self._notify(sub_id, frames.notification(result, head, tail, notification), final)

        def lost(reason: str, unavailable: bool) -> None:
            if unavailable:  # no node serves PubSub: the client comes back later (as while the service starts)
                self.close(Close.TRY_AGAIN_LATER, reason)
            else:
                self._end(sub_id, f"the node ended the subscription: {reason}")

        final_when = signature_final if method == "signatureSubscribe" else _never
        try:
            sub.handle = await self.deps.upstream.subscribe(method, params, deliver, lost, final_when)
        except SubscribeError as exc:
            self._pop(sub_id)
            self.entered.complete(admission, method, self.connection_id, refunded=True)
            self._error(req_id, exc.code, exc.message, exc.data)
            return
        self.entered.complete(admission, method, self.connection_id)
        self._confirm(req_id, sub_id, sub)

    async def _subscribe_signal(self, req_id: Any, params: list[Any]) -> None:
        signals = self.deps.signals
        if signals is None:
            self._error(req_id, RpcCode.METHOD_NOT_FOUND, "signals are not available on this gateway")
            return
        try:
            wanted = SignalFilter.parse(params)
        except ValueError as exc:
            self._error(req_id, RpcCode.INVALID_PARAMS, f"Invalid params: {exc}")
            return
        if not self._room(req_id):
            return
        admission = await self._reserve(req_id, SIGNAL_SUBSCRIBE, SIGNAL_SUBSCRIBE_CREDITS)
        if admission is None:
            return
        self.entered.complete(admission, SIGNAL_SUBSCRIBE, self.connection_id)
        sub_id = f"sig_sub_{next(self._signal_ids)}"
        sub = _Sub(SIGNAL_SUBSCRIBE)
        head = b'{"jsonrpc":"2.0","method":"signalNotification","params":{"result":'
        tail = b',"subscription":"' + sub_id.encode() + b'"}}'

        def deliver(event_id: str, event: dict[str, Any]) -> None:
            if wanted.matches(event):
                body = head + orjson.dumps(event) + tail
                self._notify(sub_id, Outgoing(body, SIGNAL_EVENT_CREDITS, SIGNAL_NOTIFICATION), False)

        sub.feed_token = signals.add(deliver)
        self._add(sub_id, sub)
        self._confirm(req_id, sub_id, sub)

    def _room(self, req_id: Any) -> bool:
        if len(self.subs) >= self.limits.max_subscriptions:
            self._error(req_id, -32000, subscription_limit_message(self.limits.max_subscriptions))
            return False
        return True

    async def _reserve(self, req_id: Any, method: str, price: int) -> Admission | None:
        admission = await self.entered.reserve(price)
        if admission.outcome is Outcome.CAPPED:  # the daily spend cap (docs/api.md)
            self._error(req_id, SPEND_CAP_RPC, SPEND_CAP_MESSAGE)
            self._run_dry(capped=True)
            return None
        if not admission.ok:
            self._error(req_id, RpcCode.INSUFFICIENT_CREDITS, "insufficient credits")
            self.close(Close.INSUFFICIENT_CREDITS, "insufficient credits")
            return None
        return admission

    def _confirm(self, req_id: Any, sub_id: int | str, sub: _Sub) -> None:
        self._result(req_id, sub_id)
        sub.confirmed = True
        for message in sub.early:
            self._put(message)
        sub.early.clear()

    def _unsubscribe(self, req_id: Any, method: str, params: Any) -> None:
        sub_id = params[0] if isinstance(params, list) and params else None
        sub = self.subs.get(sub_id) if isinstance(sub_id, int | str) else None
        kind = SIGNAL_SUBSCRIBE if method == SIGNAL_UNSUBSCRIBE else UNSUBSCRIBE_OF[method]
        if sub is None or sub.method != kind or not sub.confirmed:
            self._error(req_id, RpcCode.INVALID_PARAMS, "Invalid subscription id.")
            return
        self._release(sub_id)  # type: ignore[arg-type]
        self._result(req_id, True)

    async def _call(self, req: dict[str, Any]) -> None:
        """Any other method: a JSON-RPC call through the HTTP path's stages after auth."""
        async with self._calls:
            call = Call(
                "POST",
                "/ws",
                {},
                {},
                orjson.dumps(req),
                client=self.client,
                wire=Wire.WEBSOCKET,
                style=ReplyStyle.JSONRPC,
            )
            reply = await self.entered.rpc(call)
            body = reply.body
            if reply.status == 403:  # a denied method is -32601 on the socket (docs/api.md's Errors)
                answer = orjson.loads(body)
                error = answer.get("error") if isinstance(answer, dict) else None
                if isinstance(error, dict) and error.get("code") == RpcCode.METHOD_NOT_ALLOWED:
                    error["code"] = int(RpcCode.METHOD_NOT_FOUND)
                    body = orjson.dumps(answer)
            self._put(Outgoing(body))

    # -- deliveries ---------------------------------------------------------------------------

    def _notify(self, sub_id: int | str, message: Outgoing, final: bool) -> None:
        sub = self.subs.get(sub_id)
        if sub is None:
            return
        if sub.confirmed:
            self._put(message)
        else:
            sub.early.append(message)
        if final:  # the node ended it (a signature's status): so does the client's subscription
            self._pop(sub_id)

    def _end(self, sub_id: int | str, reason: str) -> None:
        if sub_id in self.subs:
            self._release(sub_id)
            self._notice(sub_id, reason)

    def _notice(self, sub_id: int | str, reason: str) -> None:
        params = {"subscription": sub_id, "reason": reason}
        self._put(Outgoing(orjson.dumps({"jsonrpc": "2.0", "method": ENDED_NOTIFICATION, "params": params})))

    def _put(self, message: Outgoing) -> None:
        if self.close_code is not None:
            return
        size = len(message.body)
        if len(self._out) >= self.limits.max_queued or (
            self._queued_bytes and self._queued_bytes + size > self.limits.max_queued_bytes
        ):
            cause = "client" if self.writing else "gateway"
            metrics.WS_OVERFLOW_CLOSES.inc((cause,))
            self.close(Close.TRY_AGAIN_LATER, OVERFLOW_REASONS[cause])
            return
        self._queued_bytes += size
        self._push(message)

    def _push(self, message: Outgoing | None) -> None:
        self._out.append(message)
        waiting = self._waiting
        if waiting is not None:
            self._waiting = None
            if not waiting.done():
                waiting.set_result(None)

    def _result(self, req_id: Any, result: Any) -> None:
        self._put(Outgoing(orjson.dumps({"jsonrpc": "2.0", "result": result, "id": req_id})))

    def _error(self, req_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": int(code), "message": message}
        if data is not None:
            error["data"] = data
        self._put(Outgoing(orjson.dumps({"jsonrpc": "2.0", "error": error, "id": req_id})))

    async def next_batch(self, limit: int) -> list[bytes] | None:
        """The next frames to write, in order: what is queued, at most ``limit`` and at least one, the
        notifications among them charged; None once the session closes.

        Notifications of one method in a batch are reserved together and recorded as one tallied
        usage of that many calls (one spend instead of one each: the meter was an eighth of a
        saturated fan-out, bench/README.md); a batch of several methods, one its reservation does not
        cover, or one that would take the balance below the minimum is charged a message at a time, so
        that deliveries stop at exactly the message they stopped at one by one. The credits are reserved
        here and charged by :meth:`written` once the transport wrote the batch (or refunded)."""
        if self._ended:
            return None
        out = self._out
        while not out:
            self._waiting = asyncio.get_running_loop().create_future()
            await self._waiting  # set by the next _push
        messages: list[Outgoing] = []
        first = out.popleft()
        while first is not None:
            self._queued_bytes -= len(first.body)
            messages.append(first)
            if len(messages) >= limit or not out:
                break
            first = out.popleft()
        if first is None:
            self._ended = True  # the sentinel is last: close() puts it, and nothing is queued after it
            if not messages:
                return None
        paid = [m for m in messages if m.price]
        if not paid:
            return [m.body for m in messages]
        if self.close_code is None and await self._charge_together(paid):
            return [m.body for m in messages]
        return [body for m in messages if (body := await self._charged(m)) is not None]

    async def _charge_together(self, paid: list[Outgoing]) -> bool:
        """Charge ``paid`` (of one method) as one reservation; False with nothing spent when it cannot."""
        method = paid[0].method
        if any(m.method != method for m in paid):
            return False
        entered, total = self.entered, sum(m.price for m in paid)
        remaining = entered.remaining()
        if remaining is not None and remaining - total < self.limits.min_balance:
            return False  # it would cross the minimum: a message at a time closes at exactly the one that does
        admission = await entered.reserve(total)
        if not admission.ok:
            return False
        self._held.append((admission, method, len(paid)))
        self._check_balance()
        return True

    async def _charged(self, message: Outgoing) -> bytes | None:
        """``message``'s body once paid for (unpaid ones at once), or None when it is not to be written."""
        if not message.price:
            return message.body
        if self.close_code is not None:
            return None  # closing: answers and notices still go out, paid deliveries do not
        entered = self.entered
        admission = await entered.reserve(message.price)
        if not admission.ok:
            self._run_dry(capped=admission.outcome is Outcome.CAPPED)
            return None  # the notices are queued; the sentinel after them ends the writer
        self._held.append((admission, message.method, 1))
        self._check_balance()
        return message.body

    def written(self, delivered: bool) -> None:
        """The transport's word on the last batch: written (its notifications charged), or not (the client
        disconnected first, or the write was stopped: refunded, as a call nobody answered is)."""
        held, self._held = self._held, []
        for admission, method, calls in held:
            self.entered.complete(
                admission, method, self.connection_id, refunded=not delivered, tallied=True, calls=calls
            )

    def check_balance(self) -> None:
        """Close 4002 if the balance is below the minimum (the transport calls it now and then)."""
        self._check_balance()

    def _check_balance(self) -> None:
        remaining = self.entered.remaining()
        if remaining is not None and remaining < self.limits.min_balance and self.close_code is None:
            self._run_dry()

    def _run_dry(self, capped: bool = False) -> None:
        """Credits ran out: every subscription ends with a notice, then the socket closes 4002 (4005 when
        the account's daily spend cap, not its balance, refused the charge: docs/api.md, Spend cap)."""
        for sub_id in list(self.subs):
            self._end(sub_id, "spend cap reached" if capped else "insufficient credits")
        if capped:
            self.close(Close.SPEND_CAP_REACHED, SPEND_CAP_MESSAGE)
            return
        self.close(Close.INSUFFICIENT_CREDITS, f"insufficient credits (minimum {self.limits.min_balance})")

    # -- the end ------------------------------------------------------------------------------

    def close(self, code: int, reason: str) -> None:
        """Stop: what is queued is still written, then the transport closes with ``code``."""
        if self.close_code is None:
            self._push(None)
            self.close_code, self.close_reason = code, reason

    def _add(self, sub_id: int | str, sub: _Sub) -> None:
        self.subs[sub_id] = sub
        self.deps.tally.add(sub.method)

    def _pop(self, sub_id: int | str) -> _Sub | None:
        sub = self.subs.pop(sub_id, None)
        if sub is not None:
            self.deps.tally.drop(sub.method)
        return sub

    def _release(self, sub_id: int | str) -> None:
        sub = self._pop(sub_id)
        if sub is None:
            return
        if sub.handle is not None:
            self.deps.upstream.unsubscribe(sub.handle)
        if sub.feed_token is not None and self.deps.signals is not None:
            self.deps.signals.remove(sub.feed_token)

    async def release(self) -> None:
        """The connection is gone: leave every share and feed, stop the calls still running; a batch whose
        write never finished is refunded."""
        self.written(False)
        for sub_id in list(self.subs):
            self._release(sub_id)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _never(result: Any) -> bool:
    return False
