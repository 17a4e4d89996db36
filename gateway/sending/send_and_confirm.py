"""``sendAndConfirm``: hold the landing price, race the transaction over every leg, settle at the outcome.

Planning decoded the transaction and verified its signatures (refused free otherwise); the metering
stage took a rate unit but no credits (the class is held, not leased). Here, in order:

1. **Hold** the landing price at the store, durably, before anything is sent
   (:func:`gateway.storage.sends.hold`, out of this replica's lease when it has the credits), with
   the node's slot read just before it (no slot, no hold: nothing is sent). The same signature again
   is not held, raced or charged twice: the answer is the first send's state.
2. ``skipPreflight: false``: a signature-verifying simulation; a failure (answered with the
   transaction error alone), or no simulation at all, settles the hold as ``refused`` (free) and
   nothing is broadcast.
3. **Race** it (:mod:`gateway.sending.race`, in a send-racer actor or in this replica).
4. **Settle**: ``confirmed`` → the landing price; ``failed`` (landed, execution error) → the base
   fee (the SEND price); ``unknown`` → the hold stays pending and the reconciler settles it from the
   chain: landed, or ``expired`` once its blockhash has (the base fee too: it was broadcast). A racer
   that goes away, a client that disconnects or a ledger that cannot be written leaves the hold
   pending too: reconciled, never lost. A landing at a slot before the hold's is not this send's (the
   same transaction landed before, e.g. through a send whose record retention deleted): settled at its
   status, charged nothing
   (:func:`gateway.storage.sends.landed_before`), by the race's settlement and the reconciler alike.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from gateway.core.errors import RpcCode, RpcError
from gateway.core.jsonrpc import RpcItem
from gateway.core.transactions import WireTx
from gateway.credits.errors import insufficient_credits, payment_required, spend_cap_reached
from gateway.credits.meter import Meter
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.pipeline.stages import Call
from gateway.rpc.answers import answer, config, unpaid
from gateway.sending.preflight import simulate, simulation_failed
from gateway.sending.race import Outcome, RaceResult
from gateway.sending.racers import Racers
from gateway.storage import sends
from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable
from gateway.storage.sends import HoldOutcome, SendRecord, SendStatus

log = logging.getLogger(__name__)

SIMULATE_TIMEOUT_S = 5.0
SLOT_TIMEOUT_S = 2.0
#: How a send's record reads in the result's ``status``: the interface's three values only, the finer
#: state being ``getSendStatus``'s (docs/api.md maps them: pending, expired and refused read ``unknown``).
_STATUS = {
    SendStatus.PENDING: "unknown",
    SendStatus.CONFIRMED: "confirmed",
    SendStatus.FAILED: "failed",
    SendStatus.EXPIRED: "unknown",
    SendStatus.REFUSED: "unknown",
}


class SendAndConfirm:
    def __init__(
        self,
        node: Upstream,
        racers: Racers,
        pool: Callable[[], Pool | None],
        meter: Meter,
        base_fee: int,
        top_up: Callable[[str | None], Mapping[str, Any]],
    ) -> None:
        self.node = node
        self.racers = racers
        self.pool = pool
        self.meter = meter
        self.base_fee = base_fee
        self.top_up = top_up

    async def __call__(self, item: RpcItem, call: Call) -> None:
        tx = item.parsed(WireTx)
        pubkey = call.authenticated().pubkey
        pool = self.pool()
        if pool is None:
            raise StoreUnavailable("the credit ledger")
        request_id = call.usage_id(item.index)

        base_fee = min(self.base_fee, item.price)  # never more than the landing price, whatever the pricing
        hold_slot = await self._slot(item)
        if hold_slot is None:
            return

        async def take(lease: int | None) -> tuple[sends.Hold, bool]:
            held = await sends.hold(
                pool, pubkey, tx.signature, tx.blockhash, item.price, base_fee, request_id, lease, hold_slot=hold_slot
            )
            return held, held.from_lease

        held = await self.meter.carve(pubkey, item.price, take)
        self.meter.observe(pubkey, held.standing)
        if held.outcome is not HoldOutcome.HELD:
            await self._not_held(item, call, held, pool, tx)
            return
        if not config(item).get("skipPreflight", True):
            refusal = await self._preflight(tx)
            if refusal is not None:
                refused = await sends.settle(pool, tx.signature, SendStatus.REFUSED, error=refusal.message)
                self.meter.observe(pubkey, refused.standing if refused else None)
                item.error = refusal
                return
        item.sent = True
        result = await self._race(tx)
        record = await self._settle(pool, result)
        self.meter.observe(pubkey, record.standing if record else None)  # the header shows the outcome at once
        answer(item, result_fields(record, result))

    async def _not_held(self, item: RpcItem, call: Call, held: sends.Hold, pool: Pool, tx: WireTx) -> None:
        if held.outcome is HoldOutcome.DUPLICATE:
            record = await sends.find(pool, tx.signature)
            if record is not None and record.pubkey == call.authenticated().pubkey:
                answer(item, result_fields(record))
                return
            item.error = RpcError(-32602, "this transaction was already sent through this gateway by another account")
            return
        pubkey = call.authenticated().pubkey
        if held.outcome is HoldOutcome.NO_ACCOUNT:
            error = payment_required(self.top_up(pubkey))
        elif held.outcome is HoldOutcome.CAPPED:  # the daily spend cap (docs/api.md)
            error = spend_cap_reached()
        else:
            error = insufficient_credits(item.price, held.available, self.top_up(pubkey))
        unpaid(item, call, error)

    async def _slot(self, item: RpcItem) -> int | None:
        """The node's slot now, before the hold: only a landing at or after it is charged. None when
        the node cannot say (``item`` is answered so): then nothing is held or sent."""
        try:
            slot = await rpc_call(self.node, "getSlot", [{"commitment": "processed"}], SLOT_TIMEOUT_S)
        except (ChainError, UpstreamUnavailable, UpstreamTimeout) as exc:
            why = str(exc) or type(exc).__name__
        else:
            if isinstance(slot, int) and not isinstance(slot, bool) and slot >= 0:
                return slot
            why = f"getSlot answered {slot!r}"
        item.error = RpcError(
            RpcCode.BACKEND_UNAVAILABLE, f"sendAndConfirm: the node could not say its slot, nothing was sent: {why}"
        )
        return None

    async def _preflight(self, tx: WireTx) -> RpcError | None:
        """A signature-verifying simulation; the refusal when it failed or could not run."""
        try:
            value = await simulate(self.node, tx, SIMULATE_TIMEOUT_S)
        except (ChainError, UpstreamUnavailable, UpstreamTimeout) as exc:
            return RpcError(-32002, f"preflight simulation unavailable, nothing was sent: {exc}")
        if value is None:
            return RpcError(-32002, "preflight simulation unavailable, nothing was sent: no simulation in the answer")
        if value.get("err") is not None:
            return simulation_failed(value["err"], "; nothing was sent")
        return None

    async def _race(self, tx: WireTx) -> RaceResult:
        try:
            return await self.racers.race(tx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the racer went away: the send may have left; the reconciler settles it
            log.warning("the race of %s ended without an outcome: %s", tx.signature, exc)
            return RaceResult(Outcome.UNKNOWN, tx.signature)

    async def _settle(self, pool: Pool, result: RaceResult) -> SendRecord | None:
        """Settle a known outcome (unknown stays pending); None when the ledger could not be written,
        which leaves the hold to the reconciler."""
        try:
            if result.outcome is Outcome.UNKNOWN:
                await sends.record_attempt(pool, result.signature, result.legs_attempted, result.retry_count)
                return await sends.find(pool, result.signature)
            status = SendStatus.CONFIRMED if result.outcome is Outcome.CONFIRMED else SendStatus.FAILED
            return await sends.settle(pool, result.signature, status, slot=result.slot, error=result.error)
        except StoreUnavailable as exc:
            log.warning("settling %s failed; the reconciler will: %s", result.signature, exc)
            return None


def result_fields(record: SendRecord | None, race: RaceResult | None = None) -> dict[str, Any]:
    """docs/api.md's sendAndConfirm result, plus ``status``: from the race when there was one, the ledger
    for the charge (and for everything when the same transaction is asked about again)."""
    status = _STATUS[record.status] if record is not None else (race.outcome.value if race else "unknown")
    charged = None
    if record is not None:
        charged = record.charged if record.charged is not None else record.held
    slot = race.slot if race is not None and race.slot is not None else (record.slot if record else None)
    landed_before = record is not None and record.landed_before_hold  # not landed by this send: no landing time
    return {
        "signature": race.signature if race is not None else (record.signature if record else None),
        "status": status,
        "confirmed": status == "confirmed",
        "slot": slot,
        "confirmations": race.confirmations if race is not None else None,
        "landing_time_ms": race.landing_time_ms if race is not None and not landed_before else None,
        "legs_attempted": race.legs_attempted if race is not None else (record.legs if record else []),
        "retry_count": race.retry_count if race is not None else (record.retry_count if record else 0),
        "charged_credits": charged,
        "error": race.error if race is not None else (record.error if record else None),
    }
