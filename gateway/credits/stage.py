"""The metering stage: rate units, credits and concurrency for each JSON-RPC call, then refunds.

Placed after parsing (items are priced) and before the forwarder::

    boundary → auth → CreditHeaders → parse+plan → MeteringStage → Forwarder

Per pending item, in order: one rate unit, then its price (price-0 items pass). A rejected single
request stops with its error; a rejected batch item gets its error and is not forwarded, the rest
go on. After the forwarder each admitted item is completed: charged, or refunded when the whole
call failed (any exception: 502/503/504 or worse) or its answer is a refundable node error
(:mod:`gateway.credits.refunds`). Credit and rate headers go on every reply, errors included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import asyncpg

from gateway.credits.errors import (
    account_suspended,
    concurrency_limited,
    insufficient_credits,
    payment_required,
    rate_limited,
)
from gateway.credits.meter import Admission, Meter, Outcome
from gateway.credits.model import LOW_BALANCE_CREDITS
from gateway.credits.refunds import refund_reason
from gateway.errors import ProxyError, service_unavailable
from gateway.jsonrpc import RpcItem
from gateway.limits import Allowed, Limiter, RateLimited
from gateway.pipeline import Call, Handler, Reply

#: Failures of the ledger database while admitting: answered 503, nothing charged.
LEDGER_ERRORS: tuple[type[BaseException], ...] = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


class MeteringStage:
    """Admit each item against the account's rate, concurrency and credits; settle after forwarding."""

    def __init__(
        self,
        meter: Meter,
        limiter: Limiter,
        payment_data: Mapping[str, Any] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.meter = meter
        self.limiter = limiter
        self.payment_data = payment_data
        self.clock = clock
        self.wall = wall

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        payload = call.payload
        if payload is None:
            return await next_handler(call)
        if call.identity is None:  # fail closed: an unauthenticated call is never forwarded for free
            raise payment_required(self.payment_data)
        pubkey: str = call.identity.pubkey
        call.response_headers["X-Request-Id"] = call.request_id
        acct = self.meter.known(pubkey)  # the common case: no await
        if acct is None:
            try:
                price_hint = max((i.price for i in payload.items if i.pending), default=1)
                acct = await self.meter.prepare(pubkey, price_hint)
            except LEDGER_ERRORS as exc:
                raise _ledger_unavailable() from exc
        rps = acct.rate_limit_rps
        if not acct.exists:
            self._headers(call, pubkey, None)
            raise payment_required(self.payment_data)
        if acct.suspended:  # seen at the replica's next lease: within seconds
            self._headers(call, pubkey, rps)
            raise account_suspended()
        now, wall = self.clock(), self.wall()  # one reading for the admission (refreshed after an await)
        blocked = self.limiter.acquire(pubkey, now, rps=rps, concurrency=acct.concurrency_limit)
        if blocked is not None:
            self._headers(call, pubkey, rps)
            raise concurrency_limited(blocked)
        admitted: list[tuple[RpcItem, Admission]] = []
        rate: Allowed | None = None  # the last item's rate decision: what the call left, for the headers
        try:
            try:
                for item in payload.items:
                    if not item.pending:
                        continue
                    decision = self.limiter.take(pubkey, now, wall, rps)
                    if isinstance(decision, RateLimited):
                        error: ProxyError | None = rate_limited(decision)
                    else:
                        rate, error = decision, None
                        if item.price > 0:
                            admission = self.meter.spend_local(pubkey, item.price)  # the common case: no await
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
                    item.error = error.rpc_error()
            except LEDGER_ERRORS as exc:
                self._complete(call, admitted, refund_all=True)
                self._headers(call, pubkey, rps, rate)
                raise _ledger_unavailable() from exc
            try:  # headers are set once the answer is known (on both paths), after refunds
                reply = await next_handler(call)
            except BaseException:
                self._complete(call, admitted, refund_all=True)
                self._headers(call, pubkey, rps, rate)
                raise
            self._complete(call, admitted, refund_all=False)
            reply.headers.update(self._headers(call, pubkey, rps, rate))
            return reply
        finally:
            self.limiter.release(pubkey)

    async def _admit_from_store(
        self, pubkey: str, item: RpcItem, admitted: list[tuple[RpcItem, Admission]]
    ) -> ProxyError | None:
        """The price of an item whose rate unit is taken, when the local lease could not cover it."""
        admission = await self.meter.admit(pubkey, item.price)
        if admission.ok:
            admitted.append((item, admission))
            return None
        if admission.outcome is Outcome.NO_ACCOUNT:
            return payment_required(self.payment_data)
        return insufficient_credits(item.price, self.meter.remaining(pubkey))

    def _complete(self, call: Call, admitted: list[tuple[RpcItem, Admission]], refund_all: bool) -> None:
        is_batch = call.payload is not None and call.payload.is_batch
        for item, admission in admitted:
            refunded = refund_all or refund_reason(item) is not None
            request_id = f"{call.request_id}:{item.index}" if is_batch else call.request_id
            self.meter.complete(admission, item.method, request_id, refunded)

    async def annotate(self, call: Call) -> None:
        """Set the headers on a call this stage did not meter (best effort: never fails the call)."""
        pubkey: str = call.identity.pubkey
        try:
            acct = await self.meter.prepare(pubkey)
        except LEDGER_ERRORS:
            return
        self._headers(call, pubkey, acct.rate_limit_rps)

    def _headers(self, call: Call, pubkey: str, rps: int | None, rate: Allowed | None = None) -> dict[str, str]:
        """Set the credit and rate headers on the call (error replies merge them too) and return them.

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
        headers["X-Request-Id"] = call.request_id
        return headers


class CreditHeaders:
    """Outer stage, right after auth: the credit and rate headers also go on errors raised before
    metering (a 400 from parsing), as the spec wants them on every authenticated response."""

    def __init__(self, metering: MeteringStage) -> None:
        self.metering = metering

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        try:
            return await next_handler(call)
        except ProxyError:
            if call.identity is not None and "X-Credits-Remaining" not in call.response_headers:
                await self.metering.annotate(call)
            raise


def _ledger_unavailable() -> ProxyError:
    return service_unavailable("the credit ledger is unavailable; nothing was charged", 5)
