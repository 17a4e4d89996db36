"""The race of ``sendAndConfirm``: send on every leg at once, poll until the transaction lands.

Slots are the clock (as the node reports them with each status poll): a re-send after 8 slots
without landing, at most 2 re-sends, and no more waiting after 30 slots (or 30 s, should the node
stop answering), when the outcome is ``unknown`` (it may still land until its blockhash expires;
the reconciler settles it then). A leg that is down or slow never delays the others: each send runs
on its own with a timeout, and the polling starts at once. ``legs_attempted`` lists the legs that
really sent, on any attempt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gateway.core.transactions import WireTx
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.sending import metrics
from gateway.sending.legs import LEG_TIMEOUT_S, Leg

RESEND_AFTER_SLOTS = 8
MAX_RESENDS = 2
GIVE_UP_AFTER_SLOTS = 30
MAX_RACE_S = 30.0  # and by the wall clock, should the node stop reporting slots (30 slots are ~12 s)
POLL_TIMEOUT_S = 2.0
LANDED = ("confirmed", "finalized")


class Outcome(StrEnum):
    CONFIRMED = "confirmed"
    FAILED = "failed"  # landed, and its execution failed
    UNKNOWN = "unknown"  # not seen landing within the race


@dataclass
class RaceResult:
    outcome: Outcome
    signature: str
    slot: int | None = None
    confirmations: int | None = None
    landing_time_ms: int | None = None
    legs_attempted: list[str] = field(default_factory=list)
    retry_count: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "signature": self.signature,
            "slot": self.slot,
            "confirmations": self.confirmations,
            "landing_time_ms": self.landing_time_ms,
            "legs_attempted": list(self.legs_attempted),
            "retry_count": self.retry_count,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RaceResult:
        return cls(
            Outcome(doc["outcome"]),
            doc["signature"],
            doc.get("slot"),
            doc.get("confirmations"),
            doc.get("landing_time_ms"),
            list(doc.get("legs_attempted") or []),
            int(doc.get("retry_count") or 0),
            doc.get("error"),
        )


class Racer:
    def __init__(self, node: Upstream, legs: Sequence[Leg], poll_interval_s: float = 0.2) -> None:
        self.node = node
        self.legs = list(legs)
        self.poll_interval_s = poll_interval_s

    async def race(self, tx: WireTx) -> RaceResult:
        started = time.monotonic()
        attempted: set[str] = set()
        sends: set[asyncio.Task[None]] = set()

        def broadcast() -> None:
            for leg in self.legs:
                task = asyncio.create_task(self._send(leg, tx, attempted))
                sends.add(task)
                task.add_done_callback(sends.discard)

        try:
            result = await self._poll(tx, broadcast, started)
        finally:
            if sends:  # the legs' sends are short; let them finish so legs_attempted is complete
                await asyncio.wait(set(sends), timeout=LEG_TIMEOUT_S)
        result.legs_attempted = sorted(attempted)
        metrics.SEND_RACES.inc((result.outcome.value,))
        if result.landing_time_ms is not None:
            metrics.SEND_LANDING_SECONDS.observe(result.landing_time_ms / 1000)
        return result

    async def _poll(self, tx: WireTx, broadcast: Callable[[], None], started: float) -> RaceResult:
        """Broadcast, then poll the status by slots: landed, or re-sent, or given up."""
        broadcast()
        first_slot: int | None = None
        sent_at_slot: int | None = None
        resends = 0
        while time.monotonic() - started < MAX_RACE_S:
            await asyncio.sleep(self.poll_interval_s)
            slot, status = await self._status(tx.signature)
            if slot is None:
                continue  # the node did not answer this poll: the next one may
            first_slot = slot if first_slot is None else first_slot
            sent_at_slot = slot if sent_at_slot is None else sent_at_slot
            if status is not None and status.get("confirmationStatus") in LANDED:
                return self._landed(tx, status, started, resends)
            if slot - first_slot >= GIVE_UP_AFTER_SLOTS:
                return RaceResult(Outcome.UNKNOWN, tx.signature, retry_count=resends)
            if status is None and slot - sent_at_slot >= RESEND_AFTER_SLOTS and resends < MAX_RESENDS:
                resends += 1
                sent_at_slot = slot
                broadcast()
        return RaceResult(Outcome.UNKNOWN, tx.signature, retry_count=resends)

    async def _send(self, leg: Leg, tx: WireTx, attempted: set[str]) -> None:
        try:
            async with asyncio.timeout(LEG_TIMEOUT_S):
                accepted = await leg.send(tx)
            metrics.SEND_LEG_SENDS.inc((leg.name, "accepted" if accepted else "refused"))
            if accepted:
                attempted.add(leg.name)
        except Exception:  # a leg's failure is that leg's: the others go on
            metrics.SEND_LEG_SENDS.inc((leg.name, "failed"))
            return

    async def _status(self, signature: str) -> tuple[int | None, dict[str, Any] | None]:
        try:
            answer = await rpc_call(self.node, "getSignatureStatuses", [[signature]], POLL_TIMEOUT_S)
        except (ChainError, UpstreamUnavailable, UpstreamTimeout):
            return None, None
        context = answer.get("context") if isinstance(answer, dict) else None
        value = answer.get("value") if isinstance(answer, dict) else None
        slot = context.get("slot") if isinstance(context, dict) else None
        status = value[0] if isinstance(value, list) and value and isinstance(value[0], dict) else None
        return (slot if isinstance(slot, int) else None), status

    @staticmethod
    def _landed(tx: WireTx, status: dict[str, Any], started: float, resends: int) -> RaceResult:
        err = status.get("err")
        return RaceResult(
            Outcome.FAILED if err is not None else Outcome.CONFIRMED,
            tx.signature,
            slot=status.get("slot"),
            confirmations=status.get("confirmations"),
            landing_time_ms=round((time.monotonic() - started) * 1000),
            retry_count=resends,
            error=None if err is None else str(err),
        )
