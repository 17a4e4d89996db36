"""What a replica holds locally for each account: its leases, reservations and cached store facts.

Plain mutable state, owned by one :class:`gateway.credits.meter.Meter` and touched only from its
event loop (no locking needed on the fast path: nothing here awaits).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from gateway.core.credits import Standing, UsageRecord


class Outcome(StrEnum):
    ADMITTED = "admitted"
    INSUFFICIENT = "insufficient"  # the account exists; its credits do not cover the price
    NO_ACCOUNT = "no_account"
    CAPPED = "capped"  # the account's daily spend cap leaves too little today (docs/api.md, Spend cap)


@dataclass(slots=True)
class Lease:
    id: int
    granted: int
    deadline: float  # monotonic; nothing is spent from this lease after it
    started: float = 0.0  # monotonic, when granted
    spent: int = 0  # reserved here: calls in flight plus calls completed
    settled: int = 0  # of which the store has charged (gross, refunds included)
    inflight: int = 0
    records: list[UsageRecord] = field(default_factory=list)
    #: deliveries recorded per connection and method since the last flush: [credits, calls, first at]
    tallies: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    seq: int = 0
    sent: list[UsageRecord] | None = None  # a flush not yet confirmed; retried with the same seq
    closing: bool = False  # takes no new calls; released once nothing is in flight
    prefetched: bool = False  # the next lease was asked for in the background (at most once per lease)
    dead: bool = False

    def covers(self, price: int, now: float) -> bool:
        # dead: its flush failed or it was released; it stays listed until its account's flush ends
        return not self.closing and not self.dead and now < self.deadline and self.granted - self.spent >= price


@dataclass(slots=True)
class AccountState:
    """What this replica knows of one account. Read-only outside the meter."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # taking leases (a caller's turn, a prefetch)
    settling: asyncio.Lock = field(default_factory=asyncio.Lock)  # flushing usage and releasing leases
    #: bumped before and after each settle at the store: odd while one is in flight (Meter.settled_read)
    settles: int = 0
    leases: list[Lease] = field(default_factory=list)
    exists: bool = True
    checked_at: float = -math.inf  # when the store was last asked
    empty_streak: int = 0  # store answers in a row that granted nothing (no account, or nothing left)
    invalidated_at: float = -math.inf  # when a credited deposit was last announced for this account
    refilling: asyncio.Event | None = None  # a turn at the lock (a caller short, a lease taken): others wait on it
    store_available: int = 0  # balance minus all holds, as of the last store answer
    elsewhere: int = 0  # unspent in other replicas' leases, as of the last lease request that fell short
    recall_failed_at: float = -math.inf  # when other replicas last gave nothing back on this replica's ask
    standing: Standing | None = None  # the newest store answer's balance and pending sends
    rate_limit_rps: int | None = None
    concurrency_limit: int | None = None
    suspended: bool = False
    capped: bool = False  # the last store answer was bounded by the daily spend cap, not the balance
    suspended_at: float = -math.inf  # when a suspension was last announced (a lease asked before it is stale)
    refunds_pending: int = 0
    last_used: float = 0.0
    window: int = 0  # credits spent since the last rate sample
    sampled_at: float = 0.0
    rate: float = 0.0  # credits per second, smoothed

    @property
    def active(self) -> Lease | None:
        lease = self.leases[-1] if self.leases else None
        return lease if lease is not None and not lease.closing and not lease.dead else None


@dataclass(slots=True)
class Admission:
    outcome: Outcome
    price: int
    account: AccountState | None = None
    lease: Lease | None = None
    at: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.ADMITTED
