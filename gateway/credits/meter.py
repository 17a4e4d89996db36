"""The replica-local meter: admit paid calls from credit leases, without a database trip per request.

One :class:`Meter` per replica. Per account it holds a lease (a block of credits the store set
aside for this replica) and spends from it in memory; it talks to PostgreSQL only to take a new
lease (in the background once half of the active one is spent, so calls rarely wait for it; on the
call path when one runs short anyway), and to flush usage (every ``flush_interval_s`` and when a
lease is replaced). Why this is safe: a lease is a hold the store never lets exceed the balance, a
replica spends only before its lease's local deadline (earlier than the database's expiry), and
usage settled after expiry is dropped. A crashed replica therefore loses only its unflushed usage (in
the customer's favour), never a deposit or a balance. A caller short of credits while other replicas'
leases hold some asks for them back (:attr:`Meter.recall`, :mod:`gateway.credits.recall`), so a balance
is spendable from any replica without waiting for those leases to go idle.

A call is reserved at :meth:`Meter.admit` (a bulk request's items all at once, or none, at
:meth:`Meter.admit_all`) and recorded at :meth:`Meter.complete` (charged or
refunded), so every call gives exactly one usage record with its final outcome. An outcome-priced
call is not spent from a lease but held at the store (:meth:`Meter.carve`), durably, before its work
starts; the credits this replica's lease holds can pay for that hold.

An account the store had nothing for (no account, or no credits left) is not asked again on every
call: the wait doubles with each empty answer, from ``negative_ttl_s`` up to ``max_negative_ttl_s``
while the replica hears of every credited deposit (:meth:`Meter.invalidate` on the ``CREDITED``
channel), and stays at ``negative_ttl_s`` while it might miss one.

The decisions (can the account pay, is it short, whom to ask, what a settle sends and what its answer
means) are :mod:`gateway.credits.decide`'s, functions of the account's state and the time, with no I/O;
the store I/O (leases, prefetch, flush) is :class:`gateway.credits.leases.LeaseKeeper`'s. This class
holds the accounts and applies the one to the other. A metered call walks one way: the stage
(:mod:`gateway.credits.stage`) asks the meter, the meter applies ``decide`` and calls the keeper.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from gateway.core.credits import EventHook, Standing, no_events
from gateway.credits import metrics
from gateway.credits.decide import (
    PREFETCH_LEFT,
    Rules,
    Verdict,
    decide,
    fresh,
    invalidate,
    may_recall,
    next_lease_due,
    observe,
    record,
    record_charged,
    refused,
    short_of,
    spend,
    spend_covered,
    suspend,
    unsettled,
)
from gateway.credits.leases import STOP_ATTEMPTS, STOP_RETRY_S, LeaseKeeper, refilling
from gateway.credits.local import AccountState, Admission, Lease, Outcome
from gateway.storage.connections import Pool

log = logging.getLogger(__name__)

#: Times a caller short of credits asks the other replicas for theirs back (:mod:`gateway.credits.recall`).
RECALLS = 2
#: Turns of other callers at the account lock a caller short of credits waits through before queueing
#: on the lock itself (each turn ends with a lease spendable, or the account known short).
TURNS = 8
#: Reads of :meth:`Meter.settled_read` without the settling lock before it takes it.
READ_TRIES = 3
T = TypeVar("T")

__all__ = ["PREFETCH_LEFT", "STOP_ATTEMPTS", "STOP_RETRY_S", "AccountState", "Admission", "Lease", "Meter", "Outcome"]


class Meter:
    """Replica-local credit leases for every account this replica serves."""

    def __init__(
        self,
        pool: Pool | None = None,
        *,
        replicas: int = 1,
        lease_ttl_s: float = 30.0,
        flush_interval_s: float = 1.0,
        idle_release_s: float = 5.0,
        negative_ttl_s: float = 1.0,
        max_negative_ttl_s: float = 30.0,
        expiry_interval_s: float = 60.0,
        flush_chunk: int = 5_000,
        events: EventHook = no_events,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.replica_id = uuid.uuid4().hex
        self.rules = Rules(negative_ttl_s, max_negative_ttl_s)
        self._recall: Callable[[str], Awaitable[bool]] | None = None
        self.clock = clock
        self.accounts: dict[str, AccountState] = {}
        self.keeper = LeaseKeeper(
            self.accounts,
            pool,
            replica_id=self.replica_id,
            replicas=replicas,
            lease_ttl_s=lease_ttl_s,
            flush_interval_s=flush_interval_s,
            idle_release_s=idle_release_s,
            expiry_interval_s=expiry_interval_s,
            flush_chunk=flush_chunk,
            events=events,
            clock=clock,
        )

    @property
    def hears_credits(self) -> bool:
        """Whether the CREDITED channel is followed (set while it is: see GatewayApp)."""
        return self.rules.hears_credits

    @hears_credits.setter
    def hears_credits(self, hears: bool) -> None:
        self.rules.hears_credits = hears

    @property
    def recall(self) -> Callable[[str], Awaitable[bool]] | None:
        """Asks the other replicas for the unspent credits their leases of an account hold; answers
        whether some came back (set by :class:`gateway.credits.recall.CreditRecall` while it runs)."""
        return self._recall

    @recall.setter
    def recall(self, ask: Callable[[str], Awaitable[bool]] | None) -> None:
        self._recall = ask
        self.rules.can_recall = ask is not None

    # -- the hot path -------------------------------------------------------------------------

    def backlogged(self, pubkey: str) -> AccountState | None:
        """The account, when its usage waiting for a settle is past the keeper's bound (else None)."""
        acct = self.accounts.get(pubkey)
        return acct if acct is not None and acct.leases and self.keeper.backlogged(acct) else None

    async def settle_backlog(self, acct: AccountState, pubkey: str) -> None:
        """Wait while the account's usage backlog is settled back within its bound (:class:`LeaseKeeper`)."""
        await self.keeper.settle_backlog(acct, pubkey)

    def known(self, pubkey: str) -> AccountState | None:
        """The account's state when this replica's view is fresh enough to use without the store."""
        acct = self.accounts.get(pubkey)
        if acct is not None and ((acct.exists and acct.leases) or fresh(acct, self.clock(), self.rules)):
            return acct
        return None

    async def prepare(self, pubkey: str, price_hint: int = 1) -> AccountState:
        """The account's state, asking the store (one lease) only when it is unknown or stale."""
        acct = self.known(pubkey)
        if acct is not None:
            return acct
        acct = self.accounts.setdefault(pubkey, AccountState())
        async with acct.lock:
            if not fresh(acct, self.clock(), self.rules) and acct.active is None:
                await self.keeper.refill(acct, pubkey, max(1, price_hint))
        return acct

    def spend_local(self, pubkey: str, price: int, at: datetime | None = None) -> Admission | None:
        """Reserve ``price`` from the active lease if it covers it (the common case: no await at all);
        ``at``: the admission's time, when the caller has read the clock already (a batch, once)."""
        acct = self.accounts.get(pubkey)
        if acct is None or not acct.leases:
            return None
        lease, now = acct.leases[-1], self.clock()  # the newest lease is the active one unless closing
        if lease.covers(price, now):  # (which it checks)
            admitted = spend(acct, lease, price, now, at or datetime.now(UTC))
            if not lease.prefetched and next_lease_due(lease):  # (its first test inline: no call on most calls)
                self.keeper.prefetch(acct, pubkey, lease)
            return admitted
        return None

    def covers_local(self, pubkey: str, total: int, now: float) -> bool:
        """Whether the active lease covers ``total`` at ``now``: :meth:`spend_local_each` of prices
        summing to at most ``total`` at the same ``now`` then admits them all."""
        acct = self.accounts.get(pubkey)
        return acct is not None and bool(acct.leases) and acct.leases[-1].covers(total, now)

    def spend_local_each(self, pubkey: str, prices: list[int], now: float, at: datetime) -> list[Admission] | None:
        """:meth:`spend_local` of each of ``prices`` in turn at ``now`` (a batch's items), in one step: the
        admissions in order, or None, with nothing spent, when the active lease does not cover their sum."""
        acct = self.accounts.get(pubkey)
        if acct is None or not acct.leases:
            return None
        lease = acct.leases[-1]
        admitted = spend_covered(acct, lease, prices, now, at)
        if admitted is None:
            return None
        if prices and next_lease_due(lease):  # as one at a time would start it (at most once a lease)
            self.keeper.prefetch(acct, pubkey, lease)
        return admitted

    async def reserve(self, pubkey: str, price: int) -> Admission:
        """Reserve ``price`` for a product that bills itself (a subscription, a notification, a gRPC
        call, a build): from the active lease without touching the store when it covers it, else as
        :meth:`admit`. Completed, charged or refunded, with :meth:`complete`."""
        return self.spend_local(pubkey, price) or await self.admit(pubkey, price)

    async def admit(self, pubkey: str, price: int) -> Admission:
        """Reserve ``price`` credits: from the local lease, else from a new one taken from the store."""
        admitted = await self.admit_all(pubkey, [price])
        return admitted[0] if isinstance(admitted, list) else admitted

    async def admit_all(self, pubkey: str, prices: list[int]) -> list[Admission] | Admission:
        """Reserve several calls at once, all or none (a bulk request: one call per item).

        One lease must cover the SUM of ``prices`` (it is refilled at most once, under the account
        lock, as :meth:`admit` does); then each price is spent on its own with no await in between,
        so each item gets its own usage record and is completed, charged or refunded, on its own.
        Answers the admissions in the order of ``prices``, or one refused :class:`Admission` for the
        sum (``INSUFFICIENT``, ``CAPPED`` or ``NO_ACCOUNT``) with nothing spent.
        """
        total = sum(prices)
        if not prices:
            return []
        known = self.accounts.get(pubkey)
        if known is not None and (admitted := self._spend_newest(known, pubkey, prices, total)) is not None:
            return admitted  # the common case: the active lease covers it, no await
        acct = self.accounts.setdefault(pubkey, AccountState())
        for _ in range(TURNS):
            turn = acct.refilling
            if turn is None:
                break
            # Another caller short of credits is at the account lock (or a lease is being taken): wait
            # for it with every other caller, then spend from what it leaves without the lock. Queueing
            # on the lock instead hands it over one caller per event-loop pass: a thousand WebSocket
            # writers of one account then drain slower than a lease runs out, and the ones at the back
            # of the queue deliver nothing at all (bench/ws_fanout.py's spread per subscriber).
            await turn.wait()
            if (admitted := self._spend_newest(acct, pubkey, prices, total)) is not None:
                return admitted
        with refilling(acct):  # this caller's turn: the callers short after it wait for its end
            async with acct.lock:
                now = self.clock()
                verdict = decide(acct, total, now, self.rules)
                if verdict is Verdict.SPEND:
                    return self._spend_all(acct, pubkey, acct.leases[-1], prices, now)
                if verdict is Verdict.ASK:
                    await self.keeper.refill(acct, pubkey, total)
                    for recall in range(RECALLS + 1):
                        if (admitted := self._spend_newest(acct, pubkey, prices, total)) is not None:
                            return admitted
                        if recall == RECALLS or not await self._recalled(acct, pubkey):
                            break
                        await self.keeper.refill(acct, pubkey, total)
        return Admission(refused(acct), total, acct)

    async def _recalled(self, acct: AccountState, pubkey: str) -> bool:
        """Whether other replicas gave back credits their leases held, when the store had too few: a
        balance is then spendable from any replica at once, not after the holder's idle release."""
        if self._recall is None or not may_recall(acct, self.clock(), self.rules):
            return False
        returned = await self._recall(pubkey)
        metrics.RECALLS.inc(("returned" if returned else "nothing",))
        if not returned:
            acct.recall_failed_at = self.clock()
        return returned

    def _spend_newest(self, acct: AccountState, pubkey: str, prices: list[int], total: int) -> list[Admission] | None:
        """Spend ``prices`` from the newest lease when it covers their sum (no await), else None."""
        if not acct.leases:
            return None
        newest, now = acct.leases[-1], self.clock()
        if not newest.covers(total, now):
            return None
        return self._spend_all(acct, pubkey, newest, prices, now)

    def _spend_all(
        self, acct: AccountState, pubkey: str, lease: Lease, prices: list[int], now: float
    ) -> list[Admission]:
        """Spend each of ``prices`` from ``lease``, which covers their sum at ``now``."""
        admitted = []
        for price in prices:
            admitted.append(spend(acct, lease, price, now, datetime.now(UTC)))
            if next_lease_due(lease):
                self.keeper.prefetch(acct, pubkey, lease)
        return admitted

    def complete(
        self,
        admission: Admission,
        method: str,
        request_id: str,
        refunded: bool = False,
        *,
        tallied: bool = False,
        part: int = 0,
        calls: int = 1,
    ) -> None:
        """Record an admitted call's outcome; a refunded call gives its credits back at the next flush.
        ``tallied``, ``part``, ``calls``: :func:`gateway.credits.decide.record`."""
        if not record(admission, method, request_id, refunded, tallied, part, calls):
            _dropped(admission, method)

    def complete_charged(self, done: list[tuple[Admission, str, str]]) -> None:
        """:meth:`complete` of each ``(admission, method, request id)``, every one charged in full, in one
        step: a batch's answered items (a call of :meth:`complete` each cost 0.2-0.3 µs of an item's ~5)."""
        for admission, method in record_charged(done):
            _dropped(admission, method)

    async def carve(self, pubkey: str, amount: int, take: Callable[[int | None], Awaitable[tuple[T, bool]]]) -> T:
        """Run ``take``, a store transaction that holds ``amount`` credits outside any lease, offering it
        this replica's active lease to take them from (:meth:`LeaseKeeper.carve`)."""
        acct = self.accounts.get(pubkey)
        return (await take(None))[0] if acct is None else await self.keeper.carve(acct, amount, take)

    async def give_back(self, pubkey: str) -> int:
        """Another replica is short of this account's credits: close this replica's leases of it and
        settle them now, so that their unspent part goes back to the balance (the calls in flight keep
        theirs). Answers the credits given back; the next call here takes a new lease."""
        acct = self.accounts.get(pubkey)
        return 0 if acct is None else await self.keeper.give_back(acct, pubkey)

    # -- what the headers and the stage read --------------------------------------------------

    def remaining(self, pubkey: str) -> int | None:
        """X-Credits-Remaining: the balance less what pending sends hold and what this replica spent
        but has not settled yet (docs/api.md, Response headers).

        Leases are left out, this replica's and others': they are where credits wait to be spent, not
        spending. Other processes' unsettled spending shows at the next store answer (one flush).
        """
        acct = self.accounts.get(pubkey)
        if acct is None or not acct.exists or acct.standing is None:
            return None
        return max(0, acct.standing.balance - acct.standing.pending_sends - unsettled(acct))

    def observe(self, pubkey: str, standing: Standing | None) -> None:
        """Take in an account's standing from a store answer made outside the meter (a send's hold or
        settlement), so that what it changed shows in the next header at once."""
        acct = self.accounts.get(pubkey)
        if acct is not None:
            observe(acct, standing)

    def unsettled(self, pubkey: str) -> int:
        """Credits this replica has taken but not yet charged at the store (in flight included)."""
        acct = self.accounts.get(pubkey)
        return 0 if acct is None else unsettled(acct)

    async def settled_read(self, pubkey: str, read_stored: Callable[[], Awaitable[T]]) -> tuple[T, int]:
        """``read_stored()`` (a read of the account at the store) and :meth:`unsettled`, as of one moment.

        A settle moves usage from this replica's unsettled part to the store: one that lands between the
        two reads counts it twice or not at all (an account just drained read as still holding what it
        spent). A seqlock over the account's settles: read again when one started or ended meanwhile
        (:attr:`AccountState.settles` is odd while one is in flight); after :data:`READ_TRIES`, read
        under the settling lock, which every settle holds. Other replicas' usage shows within one flush.
        """
        for _ in range(READ_TRIES):
            acct = self.accounts.get(pubkey)
            if acct is None:  # nothing unsettled here, unless a call starts during the read
                stored = await read_stored()
                if self.accounts.get(pubkey) is None:
                    return stored, 0
                continue
            settles = acct.settles
            if settles % 2:
                async with acct.settling:  # a settle in flight: wait for its end
                    continue
            stored = await read_stored()
            if self.accounts.get(pubkey) is acct and acct.settles == settles:
                return stored, unsettled(acct)
        acct = self.accounts.get(pubkey)
        if acct is None:
            return await read_stored(), 0
        async with acct.settling:
            return await read_stored(), unsettled(acct)

    def short_of(self, pubkey: str, price: int) -> bool:
        """Whether the account is known, from a fresh store answer, to be unable to pay ``price`` here
        (:func:`gateway.credits.decide.short_of`)."""
        acct = self.accounts.get(pubkey)
        return acct is not None and self.cannot_pay(acct, price)

    def cannot_pay(self, acct: AccountState, price: int) -> bool:
        """:meth:`short_of` of an account's state in hand (the stage's, from :meth:`known`)."""
        return short_of(acct, price, self.clock(), self.rules)

    # -- what other processes announce ----------------------------------------------------------

    def invalidate(self, pubkey: str) -> None:
        """Forget cached shortness: a deposit was credited to ``pubkey`` (here or on another replica)."""
        acct = self.accounts.get(pubkey)
        if acct is not None:
            invalidate(acct, self.clock())

    def suspend(self, pubkey: str, suspended: bool) -> None:
        """The account was suspended (or resumed) on some replica (:func:`gateway.credits.decide.suspend`)."""
        suspend(self.accounts.setdefault(pubkey, AccountState()), suspended, self.clock())

    def forget_shortness(self) -> None:
        """Invalidate every account: deposit notices may have been missed."""
        now = self.clock()
        for acct in list(self.accounts.values()):
            invalidate(acct, now)

    # -- the store I/O, :class:`LeaseKeeper`'s ----------------------------------------------------

    @property
    def pool(self) -> Pool:
        return self.keeper.pool

    def start(self, pool: Pool | None = None) -> None:
        """Start the flush (and expiry) loop; ``pool`` when the meter was built before the database."""
        self.keeper.start(pool)

    async def flush(self, final: bool = False) -> None:
        """Flush every account; one account's failure never stops the others (or the loop)."""
        await self.keeper.flush(final)

    async def stop(self, attempts: int = STOP_ATTEMPTS) -> None:
        """Settle all usage and release every lease (:meth:`LeaseKeeper.stop`)."""
        await self.keeper.stop(attempts)

    def holding(self) -> bool:
        """Whether any lease of this replica is not released yet."""
        return self.keeper.holding()

    def kill(self) -> None:
        """Stop the background loop without flushing, as a crash would (for tests)."""
        self.keeper.kill()

    @property
    def prefetching(self) -> int:
        """Leases being taken in the background right now."""
        return len(self.keeper.prefetches)

    async def prefetched(self) -> None:
        """Wait for the leases being taken in the background."""
        await asyncio.gather(*self.keeper.prefetches)


def _dropped(admission: Admission, method: str) -> None:
    lease_id = admission.lease.id if admission.lease is not None else None
    log.info("lease %s already ended: usage of %s (%d credits) dropped", lease_id, method, admission.price)
