"""The metering stage: rate units, credits and concurrency for each JSON-RPC call, then refunds.

Placed after parsing (items are priced) and before the forwarder::

    error_boundary → AuthStage → CreditHeaders → readiness gate → ParseStage → MeteringStage → Forwarder

Per pending item, in order: one rate unit, then its price (every pending item has one: planning
refuses what has none). An outcome-priced item (``HELD_CLASSES``) takes only the rate unit here: its
handler holds its price at the store and settles it at the outcome (:mod:`gateway.storage.sends`). So
does a product-priced item (``PRODUCT_PRICED_CLASSES``, the trade builders): its handler computes its
price, admits it from the lease and completes it (charged or refunded) itself.
A rejected single request stops with its error; a rejected batch item gets its error and is not
forwarded, the rest go on. However the call ends (answered, failed, cancelled by a client that went
away), every admitted item is completed exactly once, charged or refunded by the one rule of
:mod:`gateway.credits.refunds`: what may have reached the node is charged unless the node failed.
Credit and rate headers go on every reply, errors included.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, NamedTuple

from gateway.base import metrics
from gateway.core.credits import LOW_BALANCE_CREDITS
from gateway.core.errors import ProxyError, ReplyStyle, service_unavailable
from gateway.core.jsonrpc import Failure, RpcItem, RpcPayload
from gateway.core.methods import SELF_BILLED_CLASSES, MethodClass
from gateway.credits.errors import (
    account_suspended,
    concurrency_limited,
    insufficient_credits,
    payment_required,
    rate_limited,
    spend_cap_reached,
)
from gateway.credits.meter import AccountState, Admission, Meter, Outcome
from gateway.credits.metrics import CREDITS
from gateway.credits.refunds import refund_reason
from gateway.limits.rules import AccountLimits, Allowed, RateLimited, Taken
from gateway.limits.slices import RETRY_AFTER_S, ShardUnavailable
from gateway.pipeline.stages import Call, Handler, Reply
from gateway.storage.errors import StoreUnavailable

Admitted = list[tuple[RpcItem, Admission]]


class Entered(NamedTuple):
    """A call past :meth:`MeteringStage.enter`: its account known and able to pay, a concurrency slot held."""

    pubkey: str
    account: AccountState
    rps: int | None
    now: float  # the clock readings its items are decided at
    wall: float


#: An :class:`Entered` from a tuple of its fields: ``tuple.__new__`` is half the cost of the named
#: tuple's own constructor (a Python-level ``__new__``), and every metered call builds one.
_entered: Callable[[tuple[str, AccountState, int | None, float, float]], Entered] = partial(tuple.__new__, Entered)

_CHARGED, _REFUNDED = "charged", "refunded"


class MeteringStage:
    """Admit each item against the account's rate, concurrency and credits; settle after forwarding."""

    def __init__(
        self,
        meter: Meter,
        limiter: AccountLimits,
        top_up: Callable[[str | None], Mapping[str, Any]] = lambda pubkey: {},
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.meter = meter
        self.limiter = limiter
        self.top_up = top_up  # how to pay, for the 402s: deposit address, minimum, instructions
        self.clock = clock
        self.wall = wall

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        payload = call.payload
        if payload is None:
            return await next_handler(call)
        items = payload.items
        entered = await self.enter(call, len(items), _cheapest(items), lambda: _dearest(payload))
        pubkey, rps = entered.pubkey, entered.rps
        try:
            admitted: Admitted = []
            rate = await self._admit(call, pubkey, rps, entered.now, entered.wall, admitted)
            return await self._forward(call, next_handler, pubkey, rps, rate, admitted)
        finally:
            self.limiter.release(pubkey)

    async def enter(
        self,
        call: Call,
        units: int,
        afford: int,
        need: Callable[[], int],
        *,
        whole: bool = False,
        style: ReplyStyle | None = None,
    ) -> Entered:
        """The steps every metered call takes before its items are decided, in this order, for the JSON-RPC
        stages and the bulk routes alike: an account (402 without one, 403 suspended), funds for
        ``afford`` credits (402 from the meter's cached answer: no shard exchange, no node work), the
        limiter ready for ``units`` rate units (``whole``: all of them or none), then a concurrency slot,
        which the caller gives back with ``self.limiter.release(pubkey)`` whatever happens. ``need``: the
        credits a lease taken now should cover (asked only when the meter does not know the account);
        ``style``: the shape of that early 402 where the route's own is not JSON-RPC's."""
        if call.identity is None:  # fail closed: an unauthenticated call is never forwarded for free
            raise payment_required(self.top_up(None))
        pubkey = call.identity.pubkey
        acct = self.meter.known(pubkey) or await self._prepare(pubkey, need())  # known: the common case
        rps = acct.rate_limit_rps
        if not acct.exists or acct.suspended:
            self._refuse_account(call, pubkey, acct)
        if afford > 0 and self.meter.cannot_pay(acct, afford):  # on the state in hand
            self._headers(call, pubkey, rps)
            if acct.capped:  # the daily spend cap (docs/api.md): its own shape on every route, not the 402's
                raise spend_cap_reached()
            error = insufficient_credits(afford, self.meter.remaining(pubkey), self.top_up(pubkey))
            raise error if style is None else dataclasses.replace(error, style=style)
        now, wall = self.clock(), self.wall()  # one reading for the admission (refreshed after an await)
        pending = self.limiter.ready(pubkey, units, now, rps=rps, concurrency=acct.concurrency_limit, whole=whole)
        if pending is not None:  # the account's shard is asked for a slice (never with replica-local limits)
            await self.limits(call, pubkey, rps, pending)
            now, wall = self.clock(), self.wall()
        blocked = self.limiter.acquire(pubkey, now, rps=rps, concurrency=acct.concurrency_limit)
        if blocked is not None:
            self._headers(call, pubkey, rps)
            raise concurrency_limited(blocked)
        return _entered((pubkey, acct, rps, now, wall))

    async def _prepare(self, pubkey: str, need: int) -> AccountState:
        try:
            return await self.meter.prepare(pubkey, need)
        except StoreUnavailable as exc:
            raise ledger_unavailable() from exc

    def _refuse_account(self, call: Call, pubkey: str, acct: AccountState) -> None:
        """402 without an account, 403 when it is suspended (the caller checked that one of them holds)."""
        if not acct.exists:
            self._headers(call, pubkey, None)
            raise payment_required(self.top_up(pubkey))
        if acct.suspended:  # seen at the replica's next lease: within seconds
            self._headers(call, pubkey, acct.rate_limit_rps)
            raise account_suspended()

    async def _admit(
        self, call: Call, pubkey: str, rps: int | None, now: float, wall: float, admitted: Admitted
    ) -> Allowed | None:
        """Per pending item one rate unit, then its price. A refused single request raises its error;
        a refused batch item gets it as its answer. Returns the last rate decision (for the headers)."""
        payload = call.payload
        assert payload is not None
        if (backlogged := self.meter.backlogged(pubkey)) is not None:  # usage recorded faster than settled
            await self.meter.settle_backlog(backlogged, pubkey)  # bounded, so a stop can settle all of it
            now, wall = self.clock(), self.wall()
        at = datetime.now(UTC)  # the admission time of every item of the call (one clock read, not one each)
        if payload.is_batch and (taken := self._admit_batch(pubkey, rps, now, wall, at, payload.items, admitted)):
            return taken.last
        rate: Allowed | None = None
        try:
            for item in payload.items:
                if not item.pending:
                    continue
                decision = self.limiter.take(pubkey, now, wall, rps)
                if isinstance(decision, RateLimited):
                    error: ProxyError | None = rate_limited(decision)
                elif item.method_class in SELF_BILLED_CLASSES:  # billed by its handler (held, or product-priced)
                    rate, error = decision, None
                else:
                    rate, error = decision, None
                    admission = self.meter.spend_local(pubkey, item.price, at)  # the common case: no await
                    if admission is not None:
                        admitted.append((item, admission))
                    else:
                        error = await self._admit_from_store(pubkey, item, admitted)
                        now, wall = self.clock(), self.wall()
                if error is None:
                    continue
                if not payload.is_batch:
                    self._headers(call, pubkey, rps, rate)
                    raise error
                metrics.refused(error.status, error.constant)  # a batch item's (a single call's: the boundary's)
                item.error = error.rpc_error()
        except StoreUnavailable as exc:
            self._complete(call, admitted)  # nothing was sent: all refunded
            self._headers(call, pubkey, rps, rate)
            raise ledger_unavailable() from exc
        except BaseException:  # cancelled while a lease was being taken: release what was admitted
            self._complete(call, admitted)
            raise
        return rate

    def _admit_batch(
        self,
        pubkey: str,
        rps: int | None,
        now: float,
        wall: float,
        at: datetime,
        items: list[RpcItem],
        admitted: Admitted,
    ) -> Taken | None:
        """The common batch, decided with no await: when the active lease covers every pending item's price,
        the items' rate units are taken at once and the granted items' prices spent at once, each item
        answered as :meth:`_admit`'s loop answers it (the same units, charges and refusals, in the same
        order); what the limiter answered. None, with nothing taken, when the lease does not cover them (the
        loop decides)."""
        pending = [item for item in items if item.pending]
        meter_now = self.meter.clock()
        if not self.meter.covers_local(pubkey, sum(i.price for i in pending if _billed(i)), meter_now):
            return None
        taken = self.limiter.take_each(pubkey, len(pending), now, wall, rps)
        granted = [item for item in pending[: taken.granted] if _billed(item)]
        admissions = self.meter.spend_local_each(pubkey, [item.price for item in granted], meter_now, at)
        assert admissions is not None  # a part of what the lease covered, at the same instant
        admitted.extend(zip(granted, admissions, strict=True))
        if taken.refused is not None:
            error = rate_limited(taken.refused)
            for item in pending[taken.granted :]:
                metrics.refused(error.status, error.constant)
                item.error = error.rpc_error()
        return taken

    async def _forward(
        self, call: Call, next_handler: Handler, pubkey: str, rps: int | None, rate: Allowed | None, admitted: Admitted
    ) -> Reply:
        """Run the rest of the pipeline, then complete every admitted item: charged or refunded.
        Headers are set once the outcome is known (on both paths), so they count the refunds."""
        try:
            reply = await next_handler(call)
        except asyncio.CancelledError:  # the client went away, or its request was cancelled
            self._complete(call, admitted, Failure.CANCELLED)
            raise
        except BaseException:
            self._complete(call, admitted, Failure.INTERNAL)
            self._headers(call, pubkey, rps, rate)
            raise
        self._complete(call, admitted)
        self._headers(call, pubkey, rps, rate)
        return reply

    async def _admit_from_store(self, pubkey: str, item: RpcItem, admitted: Admitted) -> ProxyError | None:
        """The price of an item whose rate unit is taken, when the local lease could not cover it."""
        admission = await self.meter.admit(pubkey, item.price)
        if admission.ok:
            admitted.append((item, admission))
            return None
        if admission.outcome is Outcome.NO_ACCOUNT:
            return payment_required(self.top_up(pubkey))
        if admission.outcome is Outcome.CAPPED:
            return spend_cap_reached()
        return insufficient_credits(item.price, self.meter.remaining(pubkey), self.top_up(pubkey))

    def _complete(self, call: Call, admitted: Admitted, failure: Failure | None = None) -> None:
        """Record each admitted item's outcome; ``failure`` is how the call ended when it raised (an
        item that already knows its own failure, e.g. a timeout at the forwarder, keeps it). The credits
        counter gets one record per method class and outcome of the call, not one per batch item."""
        if len(admitted) == 1:  # a single call (or one admitted item): no sums per series
            item, admission = admitted[0]
            outcome = self._complete_item(item, admission, call.usage_id(item.index), failure)
            CREDITS.inc((str(item.method_class), outcome), item.price)
            return
        credits: dict[tuple[MethodClass | None, str], int] = {}
        usage_id = call.usage_id
        charged: list[tuple[Admission, str, str]] = []  # answered, nothing given back: charged in full
        for item, admission in admitted:
            if not item.refund_part and _answered(item):
                charged.append((admission, item.method, usage_id(item.index)))
                series = (item.method_class, _CHARGED)
            else:
                series = (item.method_class, self._complete_item(item, admission, usage_id(item.index), failure))
            credits[series] = credits.get(series, 0) + item.price
        self.meter.complete_charged(charged)
        for (method_class, outcome), total in credits.items():
            CREDITS.inc((str(method_class), outcome), total)

    def _complete_item(self, item: RpcItem, admission: Admission, usage_id: str, failure: Failure | None) -> str:
        """Complete one admitted item (charged or refunded); its outcome's label."""
        if failure is not None and item.response is None and item.failure is None:
            item.failure = failure
        if _refunded(item):
            self.meter.complete(admission, item.method, usage_id, True)
            return _REFUNDED
        # a charged call's failed parts (getTransactionHistory) go back as ``part``
        self.meter.complete(admission, item.method, usage_id, False, part=item.refund_part)
        return _CHARGED

    async def annotate(self, call: Call) -> None:
        """Set the headers on a call this stage did not meter (best effort: never fails the call)."""
        pubkey = call.authenticated().pubkey
        try:
            acct = await self.meter.prepare(pubkey)
        except StoreUnavailable:
            return
        self._headers(call, pubkey, acct.rate_limit_rps)

    async def limits(self, call: Call, pubkey: str, rps: int | None, pending: Awaitable[None]) -> None:
        """Await the limiter's exchange with the account's shard; 503 when it cannot be reached (fail
        closed: a call is never admitted unmetered)."""
        try:
            await pending
        except ShardUnavailable as exc:
            self._headers(call, pubkey, rps)
            raise limits_unavailable() from exc

    def set_headers(self, call: Call, pubkey: str, rps: int | None, rate: Allowed | None = None) -> None:
        """The credit and rate headers, for endpoints that meter themselves (the bulk routes)."""
        self._headers(call, pubkey, rps, rate)

    def _headers(self, call: Call, pubkey: str, rps: int | None, rate: Allowed | None = None) -> None:
        """Set the credit and rate headers on the call (every reply, errors included, carries them).

        ``rate`` is the call's own last rate decision when it took a unit; otherwise the bucket is read.
        """
        headers = call.response_headers
        remaining = self.meter.remaining(pubkey) or 0
        headers["X-Credits-Remaining"] = str(remaining)
        if remaining < LOW_BALANCE_CREDITS:
            headers["X-Credits-Low"] = "true"
        elif "X-Credits-Low" in headers:
            del headers["X-Credits-Low"]
        if rate is None:
            rate = self.limiter.peek(pubkey, self.clock(), self.wall(), rps)
        headers["X-Ratelimit-Limit"] = str(rate.limit)
        headers["X-Ratelimit-Remaining"] = str(rate.remaining)
        headers["X-Ratelimit-Reset"] = str(rate.reset_at)


class CreditHeaders:
    """Outer stage, right after auth: the credit and rate headers also go on errors raised before
    metering (a 400 from parsing), as docs/api.md wants them on every authenticated response."""

    def __init__(self, metering: MeteringStage) -> None:
        self.metering = metering

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        try:
            return await next_handler(call)
        except ProxyError:
            if call.identity is not None and "X-Credits-Remaining" not in call.response_headers:
                await self.metering.annotate(call)
            raise


def _answered(item: RpcItem) -> bool:
    """The common answer of :func:`refund_reason`, decided inline: the node answered ``item`` with a result,
    no error, and nothing set a refund: charged."""
    response = item.response
    return item.refund is None and response is not None and "error" not in response


def _refunded(item: RpcItem) -> bool:
    """Whether an admitted ``item`` is refunded (:func:`refund_reason`)."""
    return not _answered(item) and refund_reason(item) is not None


def _cheapest(items: list[RpcItem]) -> int:
    """The price of the cheapest pending item, 0 when none is pending. A single call's is read directly:
    ``min()`` over a generator cost a tenth of what the stage spends on a call."""
    if len(items) == 1:
        item = items[0]
        return item.price if item.pending else 0
    return min((item.price for item in items if item.pending), default=0)


def _dearest(payload: RpcPayload) -> int:
    """The price of the dearest pending item: what a lease taken for this call should cover at least."""
    return max((item.price for item in payload.items if item.pending), default=1)


def _billed(item: RpcItem) -> bool:
    """Whether the stage spends ``item``'s price (not its handler: a held or product-priced item)."""
    return item.method_class not in SELF_BILLED_CLASSES


def ledger_unavailable() -> ProxyError:
    return service_unavailable("the credit ledger is unavailable; nothing was charged", 5)


def limits_unavailable() -> ProxyError:
    return service_unavailable("the account's rate limiter is unavailable; nothing was charged", RETRY_AFTER_S)
