"""Metering of a bulk request: every item's rate unit and price at once, all or none, then each item
charged or refunded on its own.

A bulk request (``/bulk/*``) is one HTTP call standing for many lookups. It is billed like a batch of
that many JSON-RPC calls, except that it is admitted whole or not at all, so a caller never pays for
half a list it cannot use:

- one concurrency slot for the request;
- one rate unit per item, all taken at once (:meth:`Limiter.take_many`) or 429 with nothing charged;
- every item's price reserved at once from one lease (:meth:`Meter.admit_all`), or 402 -32010 (the
  JSON-RPC shape, as on every route) with nothing spent;
- then each item gets its own usage record: charged when the node answered it (an absent
  transaction or account included), refunded when its lookup failed. Whatever happens to the
  request afterwards, every reserved item is completed exactly once: a failure of ours refunds what
  is left, a client that went away after the lookup was sent is charged (the rule of
  :mod:`gateway.credits.refunds`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.core.errors import ProxyError, ReplyStyle
from gateway.credits.errors import insufficient_credits, payment_required, rate_limited, spend_cap_reached
from gateway.credits.meter import Admission, Outcome
from gateway.credits.stage import MeteringStage, ledger_unavailable
from gateway.limits.rules import RateLimited
from gateway.pipeline.stages import Call
from gateway.storage.errors import StoreUnavailable


class Reservation:
    """The admitted items of one bulk request; :meth:`complete` each once (charged or refunded)."""

    def __init__(self, metering: MeteringStage, admissions: list[Admission], method: str, request_id: str) -> None:
        self.meter = metering.meter
        self.admissions = admissions
        self.method = method
        self.request_id = request_id
        self.sent = False  # set once a lookup may have reached the node
        self._done = [False] * len(admissions)

    def complete(self, index: int, refunded: bool) -> None:
        """Record item ``index``'s outcome (the first record wins; later ones are ignored)."""
        if self._done[index]:
            return
        self._done[index] = True
        self.meter.complete(self.admissions[index], self.method, f"{self.request_id}:{index}", refunded)

    def finish(self, refunded: bool) -> None:
        """Complete every item not completed yet."""
        for index in range(len(self.admissions)):
            self.complete(index, refunded)

    @property
    def charged(self) -> int:
        return sum(a.price for a in self.admissions)


class BulkMetering:
    """Admits bulk requests through the metering stage's own entry (:meth:`MeteringStage.enter`: account,
    funds, limiter, concurrency slot), then every item's rate unit and price at once."""

    def __init__(self, metering: MeteringStage) -> None:
        self.metering = metering

    @asynccontextmanager
    async def reserve(self, call: Call, method: str, prices: list[int]) -> AsyncIterator[Reservation]:
        """Admit every item of ``prices`` (one rate unit and its price each) or raise the refusal;
        inside, :meth:`Reservation.complete` each item; on leaving, what is left is completed and the
        credit and rate headers are set (they count the refunds)."""
        stage = self.metering
        total = sum(prices)
        entered = await stage.enter(
            call, len(prices), total, lambda: max(1, total), whole=True, style=ReplyStyle.JSONRPC
        )
        pubkey, rps, now, wall = entered.pubkey, entered.rps, entered.now, entered.wall
        try:
            rate = stage.limiter.take_many(pubkey, len(prices), now, wall, rps) if prices else None
            if isinstance(rate, RateLimited):
                stage.set_headers(call, pubkey, rps)
                raise rate_limited(rate)
            try:
                admitted = await stage.meter.admit_all(pubkey, prices)
            except StoreUnavailable as exc:
                stage.set_headers(call, pubkey, rps, rate)
                raise ledger_unavailable() from exc
            if isinstance(admitted, Admission):
                stage.set_headers(call, pubkey, rps, rate)
                raise self._refusal(pubkey, admitted)
            reservation = Reservation(stage, admitted, method, call.request_id)
            try:
                yield reservation
            except asyncio.CancelledError:  # the client went away: charged once the lookup was sent
                reservation.finish(refunded=not reservation.sent)
                raise
            except BaseException:
                reservation.finish(refunded=True)
                stage.set_headers(call, pubkey, rps, rate)
                raise
            reservation.finish(refunded=True)  # an item the endpoint left without an outcome got nothing
            stage.set_headers(call, pubkey, rps, rate)
        finally:
            stage.limiter.release(pubkey)

    def _refusal(self, pubkey: str, refused: Admission) -> ProxyError:
        top_up = self.metering.top_up(pubkey)
        if refused.outcome is Outcome.NO_ACCOUNT:
            error = payment_required(top_up)
        elif refused.outcome is Outcome.CAPPED:  # the daily spend cap: 403, its own shape
            return spend_cap_reached()
        else:
            error = insufficient_credits(refused.price, self.metering.meter.remaining(pubkey), top_up)
        return dataclasses.replace(error, style=ReplyStyle.JSONRPC)  # a JSON-RPC body on every route, as all 402s
