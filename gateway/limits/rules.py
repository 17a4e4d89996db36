"""Per-account rate and concurrency limits as replica-local soft state. Pure: no I/O, clocks passed in.

Each account has a token bucket (rate r/s, burst r: one unit per JSON-RPC item) and a concurrency
counter (one slot per call). With R ingress replicas each replica enforces its share,
``ceil(limit / R)``, so checking a limit never leaves the process (docs/architecture.md). The
trade-off: with an uneven load balancer an account can be limited below its full limit (all traffic
on one replica gets only that replica's share), and with R > 1 the rounding up can let it exceed
the limit by at most R - 1 per second. Buckets are soft state: a restart refills them.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple, Protocol


class Allowed(NamedTuple):  # a tuple: built on every admitted item, and cheaper than a frozen dataclass
    limit: int  # the account's requests-per-second limit (all replicas)
    remaining: int  # units left in this replica's bucket
    reset_at: int  # unix seconds at which this replica's bucket is full again


#: An :class:`Allowed` from a tuple of its fields: ``tuple.__new__`` costs half of the named tuple's own
#: constructor (a Python-level ``__new__``), and the limiters build one for every admitted item.
allowed: Callable[[tuple[int, int, int]], Allowed] = partial(tuple.__new__, Allowed)


@dataclass(frozen=True, slots=True)
class RateLimited:
    limit: int
    retry_after_s: int  # at least 1
    reset_at: int
    remaining: int = 0


@dataclass(frozen=True, slots=True)
class ConcurrencyLimited:
    limit: int


LimitDecision = Allowed | RateLimited | ConcurrencyLimited


class Taken(NamedTuple):
    """What ``units`` calls of ``take`` in a row answer (a batch's items, one unit each), decided at once:
    the first ``granted`` got a unit, ``last`` is the last of their answers (None when none did), and
    every later one was answered ``refused``."""

    granted: int
    last: Allowed | None
    refused: RateLimited | None


class AccountLimits(Protocol):
    """What the metering stage asks of the limits: this module's :class:`Limiter` (each replica its
    share), or the account-shard slices (:class:`gateway.limits.slices.SlicedLimiter`)."""

    def ready(
        self, pubkey: str, units: int, now: float, *, rps: int | None, concurrency: int | None, whole: bool = False
    ) -> Awaitable[None] | None:
        """None when a slot and ``units`` rate units can be decided here; else what to await first."""

    def acquire(
        self, pubkey: str, now: float, *, rps: int | None = None, concurrency: int | None = None
    ) -> ConcurrencyLimited | None: ...

    def release(self, pubkey: str) -> None: ...

    def take(self, pubkey: str, now: float, wall: float, rps: int | None = None) -> Allowed | RateLimited: ...

    def take_many(
        self, pubkey: str, units: int, now: float, wall: float, rps: int | None = None
    ) -> Allowed | RateLimited: ...

    def take_each(self, pubkey: str, units: int, now: float, wall: float, rps: int | None = None) -> Taken: ...

    def peek(self, pubkey: str, now: float, wall: float, rps: int | None = None) -> Allowed: ...


#: Idle accounts are forgotten once this many are tracked (memory stays bounded by active accounts).
PRUNE_AT = 10_000


def share(limit: int, replicas: int) -> int:
    """This replica's part of an account-wide limit."""
    return max(1, math.ceil(limit / max(1, replicas)))


@dataclass(slots=True)
class TokenBucket:
    """``rate`` units per second, holding at most ``burst``; starts full."""

    rate: float
    burst: int
    tokens: float
    updated: float  # monotonic seconds

    @classmethod
    def full(cls, rate: float, burst: int, now: float) -> TokenBucket:
        return cls(rate, burst, float(burst), now)

    def refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(float(self.burst), self.tokens + (now - self.updated) * self.rate)
            self.updated = now

    def take(self, now: float, units: int = 1) -> float:
        """Take ``units`` and return 0.0, or take nothing and return the seconds until they are there."""
        self.refill(now)
        if self.tokens >= units:
            self.tokens -= units
            return 0.0
        return (units - self.tokens) / self.rate


@dataclass(slots=True)
class _Account:
    bucket: TokenBucket
    limit: int
    active: int = 0  # calls in flight
    slots: int = 0  # this replica's share of ``slots_of``
    slots_of: int = 0  # the concurrency limit ``slots`` was computed for


@dataclass
class Limiter:
    """The limits of every account seen by this replica. ``now`` is monotonic, ``wall`` is unix time."""

    default_rps: int
    default_concurrency: int
    replicas: int = 1
    _accounts: dict[str, _Account] = field(default_factory=dict)
    _prune_at: int = PRUNE_AT

    def _account(self, pubkey: str, rps: int | None, now: float) -> _Account:
        limit = rps or self.default_rps
        acct = self._accounts.get(pubkey)
        if acct is not None and acct.limit == limit:  # the common case
            return acct
        if acct is None:
            if len(self._accounts) >= self._prune_at:
                self.prune(now)
                self._prune_at = max(PRUNE_AT, 2 * len(self._accounts))
            rate = share(limit, self.replicas)
            acct = self._accounts[pubkey] = _Account(TokenBucket.full(rate, rate, now), limit)
        elif acct.limit != limit:  # the per-account override changed
            rate = share(limit, self.replicas)
            acct.bucket.refill(now)
            acct.bucket = TokenBucket(rate, rate, min(acct.bucket.tokens, float(rate)), now)
            acct.limit = limit
        return acct

    def take(self, pubkey: str, now: float, wall: float, rps: int | None = None) -> Allowed | RateLimited:
        """One rate unit for one item."""
        acct = self._account(pubkey, rps, now)
        wait = acct.bucket.take(now)
        if wait > 0:
            return RateLimited(acct.limit, max(1, math.ceil(wait)), math.ceil(wall + wait))
        return self._allowed(acct, wall)

    def take_each(self, pubkey: str, units: int, now: float, wall: float, rps: int | None = None) -> Taken:
        """As ``units`` calls of :meth:`take` in a row, in one step: a unit each while the bucket holds one."""
        if units <= 0:
            return Taken(0, None, None)
        acct = self._account(pubkey, rps, now)
        bucket = acct.bucket
        bucket.refill(now)
        granted = max(0, min(units, math.floor(bucket.tokens)))
        bucket.tokens -= granted  # exact: take's one-at-a-time subtractions of 1 from tokens >= 1 are exact
        last = self._allowed(acct, wall) if granted else None
        if granted == units:
            return Taken(granted, last, None)
        wait = (1 - bucket.tokens) / bucket.rate
        return Taken(granted, last, RateLimited(acct.limit, max(1, math.ceil(wait)), math.ceil(wall + wait)))

    def take_many(
        self, pubkey: str, units: int, now: float, wall: float, rps: int | None = None
    ) -> Allowed | RateLimited:
        """``units`` rate units at once, all or none (a bulk request: one unit per item).

        A request of more units than the bucket holds at most (its burst) could never be admitted by
        waiting; it is admitted when the bucket is full and leaves it in debt (negative), so the
        following calls wait until the account's rate has paid for it: the average rate holds.
        """
        acct = self._account(pubkey, rps, now)
        bucket = acct.bucket
        bucket.refill(now)
        need = min(units, bucket.burst)
        if bucket.tokens >= need:
            bucket.tokens -= units
            return self._allowed(acct, wall)
        wait = (need - bucket.tokens) / bucket.rate
        return RateLimited(acct.limit, max(1, math.ceil(wait)), math.ceil(wall + wait))

    def peek(self, pubkey: str, now: float, wall: float, rps: int | None = None) -> Allowed:
        """The header values without taking a unit."""
        acct = self._account(pubkey, rps, now)
        acct.bucket.refill(now)
        return self._allowed(acct, wall)

    @staticmethod
    def _allowed(acct: _Account, wall: float) -> Allowed:
        bucket = acct.bucket
        return allowed(
            (acct.limit, max(0, int(bucket.tokens)), math.ceil(wall + (bucket.burst - bucket.tokens) / bucket.rate))
        )

    def ready(
        self, pubkey: str, units: int, now: float, *, rps: int | None, concurrency: int | None, whole: bool = False
    ) -> Awaitable[None] | None:
        """Always decided here (:class:`AccountLimits`)."""
        return None

    def acquire(
        self, pubkey: str, now: float, *, rps: int | None = None, concurrency: int | None = None
    ) -> ConcurrencyLimited | None:
        """Take a concurrency slot for one call (None: taken); :meth:`release` it whatever happens."""
        acct = self._account(pubkey, rps, now)
        limit = concurrency or self.default_concurrency
        if acct.slots_of != limit:
            acct.slots, acct.slots_of = share(limit, self.replicas), limit
        if acct.active >= acct.slots:
            return ConcurrencyLimited(limit)
        acct.active += 1
        return None

    def release(self, pubkey: str) -> None:
        acct = self._accounts.get(pubkey)
        if acct is not None and acct.active > 0:
            acct.active -= 1

    def prune(self, now: float) -> int:
        """Forget idle accounts (full bucket, nothing in flight); their state equals a fresh one."""
        idle = []
        for pubkey, acct in self._accounts.items():
            acct.bucket.refill(now)
            if acct.active == 0 and acct.bucket.tokens >= acct.bucket.burst:
                idle.append(pubkey)
        for pubkey in idle:
            del self._accounts[pubkey]
        return len(idle)


@dataclass
class KeyedBuckets:
    """One token bucket per key (a client address and a route group), bounded in memory: idle keys,
    whose buckets are full again, are forgotten once ``prune_at`` keys are tracked."""

    rate: float
    burst: int
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _prune_at: int = PRUNE_AT

    def take(self, key: str, now: float) -> float:
        """0.0 when a unit was taken, else the seconds until one is there."""
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._prune_at:
                self._prune(now)
            bucket = self._buckets[key] = TokenBucket.full(self.rate, self.burst, now)
        return bucket.take(now)

    def _prune(self, now: float) -> None:
        idle = []
        for key, bucket in self._buckets.items():
            bucket.refill(now)
            if bucket.tokens >= bucket.burst:
                idle.append(key)
        for key in idle:
            del self._buckets[key]
        self._prune_at = max(PRUNE_AT, 2 * len(self._buckets))

    def __len__(self) -> int:
        return len(self._buckets)
