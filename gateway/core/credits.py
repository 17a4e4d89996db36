"""Plain values exchanged with the credit store: what goes in, what comes out. No I/O.

Credits are integers everywhere; USDC amounts are integer base units (10^6 per USDC).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

log = logging.getLogger(__name__)

#: Below this balance ``X-Credits-Low: true`` is set and ``low_balance`` fires (docs/api.md, Limits).
LOW_BALANCE_CREDITS = 1_000
#: ``credits.expiring`` fires for a batch this close to its expiry (docs/api.md, Events).
EXPIRING_WINDOW_S = 24 * 3600
USDC_BASE_UNITS = 10**6

#: Lifecycle event hook: ``await events(name, pubkey, data)``, called after commit, for listeners in the
#: same process (tests, metrics). Webhook deliveries do not depend on it: their jobs are written inside
#: the transaction that causes the event (:mod:`gateway.storage.webhook_events`), with the same ``data``
#: (:mod:`gateway.core.webhook_events`).
EventHook = Callable[[str, str, dict[str, Any]], Awaitable[None]]


async def no_events(name: str, pubkey: str, data: dict[str, Any]) -> None:
    """Default hook: no in-process listener."""


async def fire(events: EventHook, name: str, pubkey: str, data: dict[str, Any]) -> None:
    """Call a hook after commit; its failure must never undo or fail the credit operation."""
    try:
        await events(name, pubkey, data)
    except Exception:
        log.exception("event hook %s for %s failed", name, pubkey)


@dataclass(frozen=True)
class DepositCredit:
    """A finalized USDC transfer into the deposit address, as the watcher or confirm-deposit saw it."""

    signature: str
    pubkey: str  # the transfer's authority wallet
    amount_base_units: int
    slot: int | None = None
    refusal: str | None = None  # recorded as ignored with this reason (an authority that cannot sign)


@dataclass(frozen=True)
class CreditPolicy:
    credits_per_usdc: int
    credit_expiry_seconds: int
    minimum_base_units: int = 10_000
    referral_bonus_percent: int = 10  # used when a referral code carries no percentage of its own

    def credits_for(self, amount_base_units: int) -> int:
        return amount_base_units * self.credits_per_usdc // USDC_BASE_UNITS


@dataclass(frozen=True)
class DepositOutcome:
    """``credits_added`` includes the referral bonus, of which ``bonus_credits`` is the part."""

    credited: bool
    already_processed: bool
    credits_added: int
    new_balance: int
    ignored_reason: str | None
    bonus_credits: int = 0


class UsageRecord(NamedTuple):
    """One admitted call. ``credits`` is its price; a refunded call is recorded with ``refunded=True``.

    A named tuple, not a dataclass: a replica holds a second's worth of these between flushes, and a
    tuple of plain values is cheaper to build and is left alone by the garbage collector.
    """

    method: str
    credits: int
    refunded: bool
    request_id: str
    at: datetime
    calls: int = 1  # deliveries this record stands for (a connection's notifications: Meter.complete)


def tally(records: Sequence[UsageRecord]) -> tuple[int, int]:
    """``(gross, refunded)`` credits of ``records``, in one pass (a flush holds thousands)."""
    gross = refunded = 0
    for record in records:
        gross += record.credits
        if record.refunded:
            refunded += record.credits
    return gross, refunded


@dataclass(frozen=True, slots=True)
class Standing:
    """An account as a store transaction left it: its balance and what its unsettled sends hold.

    Read under the account's row lock, which every credit writer takes, so ``as_of`` (the database's
    clock at that reading) orders two readings as their transactions committed.
    """

    balance: int
    pending_sends: int
    as_of: float


@dataclass(frozen=True)
class LeaseGrant:
    """A hold of ``granted`` credits for one replica (``lease_id`` is None when nothing was granted)."""

    lease_id: int | None
    granted: int
    balance: int
    available_after: int  # balance minus every live hold, this one included
    rate_limit_rps: int | None
    concurrency_limit: int | None
    suspended: bool = False  # a suspended account is granted nothing
    standing: Standing | None = None
    elsewhere: int = 0  # when short of ``want``: what other replicas' live leases hold unspent
    capped: bool = False  # the daily spend cap, not the balance, bounded ``available_after`` (docs/api.md)


@dataclass(frozen=True)
class SettleResult:
    """``applied`` is False when the lease had expired or was released: the records were dropped."""

    applied: bool
    balance: int
    available: int  # balance minus every live hold after this settle
    charged: int  # net credits taken from the balance (debits minus refunds)
    refunded: int
    duplicate: bool = False  # this flush sequence number was already applied
    standing: Standing | None = None


@dataclass(frozen=True)
class Conservation:
    """Per-account audit: granted == consumed + expired + balance == ledger sum == batch remainders."""

    granted: int
    consumed: int
    expired: int
    balance: int
    ledger_sum: int
    batch_remaining: int
    total_consumed: int

    @property
    def ok(self) -> bool:
        return (
            self.balance >= 0
            and self.granted == self.consumed + self.expired + self.balance
            and self.balance == self.ledger_sum == self.batch_remaining
            and self.consumed == self.total_consumed
        )
