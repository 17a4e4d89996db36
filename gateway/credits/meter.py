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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from gateway import metrics
from gateway.core.credits import EventHook, LeaseGrant, Standing, UsageRecord, no_events, tally
from gateway.credits.local import AccountState, Admission, Lease, Outcome
from gateway.stopping import cancel_and_wait
from gateway.storage import ledger
from gateway.storage.connections import Pool

log = logging.getLogger(__name__)

#: Times a caller short of credits asks the other replicas for theirs back (:mod:`gateway.credits.recall`).
RECALLS = 2
#: Turns of other callers at the account lock a caller short of credits waits through before queueing
#: on the lock itself (each turn ends with a lease spendable, or the account known short).
TURNS = 8
T = TypeVar("T")

__all__ = ["AccountState", "Admission", "Lease", "Meter", "Outcome"]

#: A :class:`UsageRecord` from a tuple of all its fields (``calls`` included): ``tuple.__new__`` costs
#: half of the named tuple's own constructor, and :meth:`Meter.complete` makes one per call.
_record: Callable[[tuple[str, int, bool, str, datetime, int]], UsageRecord] = partial(tuple.__new__, UsageRecord)

#: The next lease is taken in the background once less than this share of the active one is left.
PREFETCH_LEFT = 0.5
#: A stopping meter's final flush: tries, and the pause between two (5 s in all, within Serve's grace).
STOP_ATTEMPTS = 20
STOP_RETRY_S = 0.25


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
        self._pool = pool
        self.replica_id = uuid.uuid4().hex
        self.replicas = replicas
        self.lease_ttl_s = lease_ttl_s
        self.margin_s = min(2.0, lease_ttl_s / 4)  # stop spending this long before the store's expiry
        self.flush_interval_s = flush_interval_s
        self.idle_release_s = idle_release_s
        self.negative_ttl_s = negative_ttl_s
        self.max_negative_ttl_s = max_negative_ttl_s
        self.hears_credits = False  # set while the CREDITED channel is followed (see GatewayApp)
        #: Asks the other replicas for the unspent credits their leases of an account hold; answers
        #: whether some came back (set by :class:`gateway.credits.recall.CreditRecall` while it runs).
        self.recall: Callable[[str], Awaitable[bool]] | None = None
        self.expiry_interval_s = expiry_interval_s
        self.flush_chunk = flush_chunk  # usage records per settle transaction
        self.events = events
        self.clock = clock
        self.accounts: dict[str, AccountState] = {}
        self._task: asyncio.Task[None] | None = None
        self._flush_gate = asyncio.Semaphore(4)
        self._prefetches: set[asyncio.Task[None]] = set()

    # -- the hot path -------------------------------------------------------------------------

    def known(self, pubkey: str) -> AccountState | None:
        """The account's state when this replica's view is fresh enough to use without the store."""
        acct = self.accounts.get(pubkey)
        if acct is not None and ((acct.exists and acct.leases) or self.clock() - acct.checked_at < self._wait(acct)):
            return acct
        return None

    async def prepare(self, pubkey: str, price_hint: int = 1) -> AccountState:
        """The account's state, asking the store (one lease) only when it is unknown or stale."""
        acct = self.known(pubkey)
        if acct is not None:
            return acct
        acct = self.accounts.setdefault(pubkey, AccountState())
        async with acct.lock:
            if self.clock() - acct.checked_at >= self._wait(acct) and acct.active is None:
                await self._refill(acct, pubkey, max(1, price_hint))
        return acct

    def spend_local(self, pubkey: str, price: int, at: datetime | None = None) -> Admission | None:
        """Reserve ``price`` from the active lease if it covers it (the common case: no await at all);
        ``at``: the admission's time, when the caller has read the clock already (a batch, once)."""
        acct = self.accounts.get(pubkey)
        if acct is None or not acct.leases:
            return None
        lease, now = acct.leases[-1], self.clock()  # the newest lease is the active one unless closing
        if lease.covers(price, now):  # (which it checks)
            return self._spend(acct, pubkey, lease, price, now, at)
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
        if not lease.covers(sum(prices), now):
            return None
        return self._spend_each(acct, pubkey, lease, prices, now, at)

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
        sum (``INSUFFICIENT`` or ``NO_ACCOUNT``) with nothing spent.
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
        with _refilling(acct):  # this caller's turn: the callers short after it wait for its end
            async with acct.lock:
                lease = acct.active
                now = self.clock()
                if lease is not None and lease.covers(total, now):
                    return [self._spend(acct, pubkey, lease, price, now) for price in prices]
                known_short = not acct.exists or self._potential(acct) < total
                if not (known_short and now - acct.checked_at < self._wait(acct)) or self._may_recall(acct, now):
                    await self._refill(acct, pubkey, total)
                    for recall in range(RECALLS + 1):
                        lease, now = acct.active, self.clock()
                        if lease is not None and lease.covers(total, now):
                            return [self._spend(acct, pubkey, lease, price, now) for price in prices]
                        if recall == RECALLS or not await self._recalled(acct, pubkey):
                            break
                        await self._refill(acct, pubkey, total)
        return Admission(_short(acct), total, acct)

    async def _recalled(self, acct: AccountState, pubkey: str) -> bool:
        """Whether other replicas gave back credits their leases held, when the store had too few: a
        balance is then spendable from any replica at once, not after the holder's idle release."""
        if not self._may_recall(acct, self.clock()):
            return False
        assert self.recall is not None
        returned = await self.recall(pubkey)
        metrics.RECALLS.inc(("returned" if returned else "nothing",))
        if not returned:
            acct.recall_failed_at = self.clock()
        return returned

    def _may_recall(self, acct: AccountState, now: float) -> bool:
        """Other replicas' leases hold credits of the account, and no ask of them came back empty
        lately (a crashed holder answers nothing: its calls would otherwise each wait for it)."""
        return (
            self.recall is not None
            and acct.elsewhere > 0
            and not acct.suspended
            and now - acct.recall_failed_at >= self.negative_ttl_s
        )

    async def give_back(self, pubkey: str) -> int:
        """Another replica is short of this account's credits: close this replica's leases of it and
        settle them now, so that their unspent part goes back to the balance (the calls in flight keep
        theirs). Answers the credits given back; the next call here takes a new lease."""
        acct = self.accounts.get(pubkey)
        if acct is None:
            return 0
        async with acct.lock, acct.settling:
            unspent = sum(lease.granted - lease.spent for lease in acct.leases if not lease.dead)
            if unspent <= 0:
                return 0
            for lease in acct.leases:
                lease.closing = True
            await self._flush_account(acct, pubkey)
        return unspent

    def _spend_newest(self, acct: AccountState, pubkey: str, prices: list[int], total: int) -> list[Admission] | None:
        """Spend ``prices`` from the newest lease when it covers their sum (no await), else None."""
        if not acct.leases:
            return None
        newest, now = acct.leases[-1], self.clock()
        if not newest.covers(total, now):
            return None
        return [self._spend(acct, pubkey, newest, price, now) for price in prices]

    def _spend(
        self, acct: AccountState, pubkey: str, lease: Lease, price: int, now: float, at: datetime | None = None
    ) -> Admission:
        lease.spent += price
        lease.inflight += 1
        acct.window += price
        acct.last_used = now
        if not lease.prefetched and lease.granted - lease.spent < lease.granted * PREFETCH_LEFT:
            self._start_prefetch(acct, pubkey, lease)
        return Admission(Outcome.ADMITTED, price, acct, lease, at or datetime.now(UTC))

    def _spend_each(
        self, acct: AccountState, pubkey: str, lease: Lease, prices: list[int], now: float, at: datetime
    ) -> list[Admission]:
        """:meth:`_spend` of each of ``prices`` (covered by ``lease``) in one step: the same books, the
        prefetch started as one at a time would start it (at most once a lease, its task run later)."""
        total = sum(prices)
        lease.spent += total
        lease.inflight += len(prices)
        acct.window += total
        if prices:
            acct.last_used = now
        if prices and not lease.prefetched and lease.granted - lease.spent < lease.granted * PREFETCH_LEFT:
            self._start_prefetch(acct, pubkey, lease)
        shared: dict[int, Admission] = {}  # the items of one price share one (equal, and never changed)
        admissions = []
        for price in prices:
            admission = shared.get(price)
            if admission is None:
                admission = shared[price] = Admission(Outcome.ADMITTED, price, acct, lease, at)
            admissions.append(admission)
        return admissions

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

        ``tallied``: a delivery of a connection (``request_id``), one of many a second (a WebSocket's
        notifications): its usage is one record per connection and method per flush, with the count,
        instead of a record each (a thousand subscribers' record per notification was most of what a
        fan-out wrote to PostgreSQL, and its settles held the account row the next lease needed).
        ``calls``: how many deliveries a tallied admission paid for (a socket's batch of them, reserved
        together).

        ``part``: of a charged call, the credits given back (its failed items): two records, the rest
        charged and ``part`` refunded (a ``refund`` ledger entry at the flush, as for a refunded call)."""
        lease, acct = admission.lease, admission.account
        if lease is None or acct is None or admission.at is None:
            return
        lease.inflight -= 1
        if lease.dead:
            log.info("lease %s already ended: usage of %s (%d credits) dropped", lease.id, method, admission.price)
            return
        if tallied and not refunded:
            tally = lease.tallies.get((method, request_id))
            if tally is None:
                lease.tallies[(method, request_id)] = [admission.price, calls, admission.at]
            else:
                tally[0] += admission.price
                tally[1] += calls
            return
        if not refunded and 0 < part < admission.price:
            lease.records.append(UsageRecord(method, admission.price - part, False, request_id, admission.at))
            lease.records.append(UsageRecord(method, part, True, request_id, admission.at))
            acct.refunds_pending += part
            return
        refunded = refunded or part >= admission.price > 0
        lease.records.append(_record((method, admission.price, refunded, request_id, admission.at, 1)))
        if refunded:
            acct.refunds_pending += admission.price

    def complete_charged(self, done: list[tuple[Admission, str, str]]) -> None:
        """:meth:`complete` of each ``(admission, method, request id)``, every one charged in full, in one
        step: a batch's answered items (a call of :meth:`complete` each cost 0.2-0.3 µs of an item's ~5)."""
        for admission, method, request_id in done:
            lease = admission.lease
            if lease is None or admission.account is None or admission.at is None:
                continue
            lease.inflight -= 1
            if lease.dead:
                log.info("lease %s already ended: usage of %s (%d credits) dropped", lease.id, method, admission.price)
                continue
            lease.records.append(_record((method, admission.price, False, request_id, admission.at, 1)))

    async def carve(self, pubkey: str, amount: int, take: Callable[[int | None], Awaitable[tuple[T, bool]]]) -> T:
        """Run ``take``, a store transaction that holds ``amount`` credits outside any lease, offering it
        this replica's active lease (its id) to take them from when the lease covers them.

        Without this, credits leased here would count against the hold while sitting unused. ``take``
        returns its result and whether it took from the lease. The lease shrinks here before the
        await (nothing else can spend those credits meanwhile) and grows back only when ``take``
        answered that it did not use it: after a failure or cancellation it stays smaller, which can
        only leave this replica spending less than the store allows, never more.
        """
        acct = self.accounts.get(pubkey)
        if acct is None:
            return (await take(None))[0]
        async with acct.lock, acct.settling:  # no flush shrinks or releases the lease meanwhile
            lease = acct.active
            carved = lease if lease is not None and lease.covers(amount, self.clock()) else None
            if carved is not None:
                carved.granted -= amount
            result, used = await take(None if carved is None else carved.id)
            if carved is not None and not used:
                carved.granted += amount
            return result

    def remaining(self, pubkey: str) -> int | None:
        """X-Credits-Remaining: the balance less what pending sends hold and what this replica spent
        but has not settled yet (docs/api.md, Response headers).

        Leases are left out, this replica's and others': they are where credits wait to be spent, not
        spending. Other processes' unsettled spending shows at the next store answer (one flush).
        """
        acct = self.accounts.get(pubkey)
        if acct is None or not acct.exists or acct.standing is None:
            return None
        return max(0, acct.standing.balance - acct.standing.pending_sends - self._unsettled(acct))

    def observe(self, pubkey: str, standing: Standing | None) -> None:
        """Take in an account's standing from a store answer made outside the meter (a send's hold or
        settlement), so that what it changed shows in the next header at once."""
        acct = self.accounts.get(pubkey)
        if acct is not None:
            _observe(acct, standing)

    def unsettled(self, pubkey: str) -> int:
        """Credits this replica has taken but not yet charged at the store (in flight included)."""
        acct = self.accounts.get(pubkey)
        return 0 if acct is None else self._unsettled(acct)

    @staticmethod
    def _unsettled(acct: AccountState) -> int:
        spent = 0
        for lease in acct.leases:  # a loop, not sum() over a generator: this runs for every call's headers
            if not lease.dead:
                spent += lease.spent - lease.settled
        return spent - acct.refunds_pending

    @staticmethod
    def _potential(acct: AccountState) -> int:
        """What this replica could still spend: the store's unheld credits and its own leases' rest."""
        local = 0
        for lease in acct.leases:
            if not lease.dead:
                local += lease.granted - lease.spent
        return acct.store_available + local + acct.refunds_pending

    def short_of(self, pubkey: str, price: int) -> bool:
        """Whether the account is known, from a fresh store answer, to be unable to pay ``price`` here:
        no lease covers it, the store had too little, and no other replica's lease could give some back.
        A call it refuses then costs no store trip, no shard exchange and no node work."""
        acct = self.accounts.get(pubkey)
        if acct is None or not acct.exists or acct.suspended:
            return False
        now = self.clock()
        lease = acct.active
        if lease is not None and lease.covers(price, now):
            return False
        fresh = now - acct.checked_at < self._wait(acct)
        return fresh and self._potential(acct) < price and not self._may_recall(acct, now)

    def invalidate(self, pubkey: str) -> None:
        """Forget cached shortness: a deposit was credited to ``pubkey`` (here or on another replica)."""
        acct = self.accounts.get(pubkey)
        if acct is not None:
            acct.checked_at = -math.inf
            acct.empty_streak = 0
            acct.invalidated_at = self.clock()

    def suspend(self, pubkey: str, suspended: bool) -> None:
        """The account was suspended (or resumed) on some replica: its leases here take no new call at
        once (the store grants a suspended account nothing), instead of at their deadline."""
        acct = self.accounts.setdefault(pubkey, AccountState())
        acct.suspended = suspended
        if suspended:
            acct.suspended_at = self.clock()
            acct.checked_at = acct.suspended_at
            for lease in acct.leases:
                lease.closing = True
        else:
            self.invalidate(pubkey)

    def forget_shortness(self) -> None:
        """Invalidate every account: deposit notices may have been missed."""
        for pubkey in list(self.accounts):
            self.invalidate(pubkey)

    def _wait(self, acct: AccountState) -> float:
        """How long an answer of the store stays good for an account it had nothing for."""
        if not self.hears_credits or acct.empty_streak <= 1:
            return self.negative_ttl_s
        return min(self.max_negative_ttl_s, self.negative_ttl_s * float(2 ** (acct.empty_streak - 1)))

    # -- talking to the store -----------------------------------------------------------------

    async def _refill(self, acct: AccountState, pubkey: str, price: int) -> None:
        """Replace the active lease (holding the account lock): lease anew, and only when the store has
        too little outside this replica's leases, flush first (their unspent part then counts) and lease
        again. Leasing first keeps the flush of a busy second's usage off the call path: the callers
        waiting for this turn would wait for it too (a fan-out's thousand writers: bench/ws_fanout.py)."""
        active = acct.active
        if active is not None:
            active.closing = True
            self._learn_rate(acct, active)
        with _refilling(acct):
            want = max(price, 20 * price, math.ceil(2 * acct.rate))  # about 2 s of this account's spending
            if any(not lease.dead for lease in acct.leases):
                started = self.clock()
                grant = await self._lease(pubkey, want, price)
                if grant is not None and grant.lease_id is not None:
                    self._adopt(acct, grant, started)
                    return  # the closing leases settle at the next flush
            async with acct.settling:
                await self._flush_account(acct, pubkey)
            started = self.clock()
            self._adopt(acct, await self._lease(pubkey, want, price), started)

    def _lease(self, pubkey: str, want: int, at_least: int) -> Awaitable[LeaseGrant | None]:
        return ledger.lease(
            self.pool, pubkey, self.replica_id, want, self.lease_ttl_s, at_least=at_least, replicas=self.replicas
        )

    def _learn_rate(self, acct: AccountState, lease: Lease) -> None:
        """A lease used up quickly says more about the account's rate than the last flush did."""
        used_for = self.clock() - lease.started
        if used_for > 0:
            acct.rate = max(acct.rate, lease.spent / used_for)

    def _adopt(self, acct: AccountState, grant: LeaseGrant | None, started: float) -> None:
        """Take in what the store answered to a lease request made at ``started``."""
        metrics.LEASES.inc(("no_account" if grant is None else "empty" if grant.lease_id is None else "granted",))
        empty = grant is None or grant.lease_id is None
        if empty and acct.invalidated_at >= started:
            # A deposit was announced while this request was in flight: its empty answer may predate
            # the credit, so it is not cached (else the next call would wait out a doubled backoff).
            acct.checked_at, acct.empty_streak = -math.inf, 0
        else:
            acct.checked_at = started
            acct.empty_streak = acct.empty_streak + 1 if empty else 0
        if grant is None:
            acct.exists = False
            return
        acct.exists = True
        acct.store_available, acct.elsewhere, acct.capped = grant.available_after, grant.elsewhere, grant.capped
        _observe(acct, grant.standing)
        acct.rate_limit_rps, acct.concurrency_limit = grant.rate_limit_rps, grant.concurrency_limit
        if acct.suspended_at >= started and not grant.suspended:
            return  # asked before a suspension was announced: its grant is stale (it expires unspent)
        acct.suspended = grant.suspended
        if grant.lease_id is not None:
            deadline = started + self.lease_ttl_s - self.margin_s
            acct.leases.append(Lease(grant.lease_id, grant.granted, deadline, started))

    def _start_prefetch(self, acct: AccountState, pubkey: str, lease: Lease) -> None:
        lease.prefetched = True  # once per lease: with nothing left to lease, calls do not retry it each time
        task = asyncio.get_running_loop().create_task(self._prefetch(acct, pubkey, lease))
        self._prefetches.add(task)
        task.add_done_callback(self._prefetches.discard)

    async def _prefetch(self, acct: AccountState, pubkey: str, lease: Lease) -> None:
        """Take the next lease while ``lease`` still has some left, so that calls do not queue on the
        account lock behind a flush and a lease when it runs out. Unlike :meth:`_refill` it leases
        first and flushes later: ``lease`` keeps serving until the new one is there, then closes, and
        its unspent part goes back at the next flush. With nothing left to lease, ``lease`` is spent
        out and the refill on the call path decides."""
        try:
            async with acct.lock:
                if acct.active is not lease:
                    return  # a refill replaced it meanwhile
                self._learn_rate(acct, lease)
                want = max(lease.granted, math.ceil(2 * acct.rate))
                started = self.clock()
                with _refilling(acct):
                    grant = await self._lease(pubkey, want, 1)
                    if grant is not None and grant.lease_id is not None:
                        lease.closing = True
                    self._adopt(acct, grant, started)
        except Exception:
            log.exception("taking the next credit lease of %s ahead of time failed; calls will refill it", pubkey)

    async def _flush_account(self, acct: AccountState, pubkey: str, final: bool = False) -> None:
        for lease in list(acct.leases):
            await self._flush_lease(acct, pubkey, lease, final)
        acct.leases = [lease for lease in acct.leases if not lease.dead]

    async def _flush_lease(self, acct: AccountState, pubkey: str, lease: Lease, final: bool) -> None:
        now = self.clock()
        if lease.dead:
            return
        if final or (now - acct.last_used > self.idle_release_s and lease.inflight == 0):
            lease.closing = True
        if lease.tallies:
            lease.records.extend(
                UsageRecord(method, credits, False, request_id, at, calls)
                for (method, request_id), (credits, calls, at) in lease.tallies.items()
            )
            lease.tallies = {}
        if lease.sent is None and lease.records:
            lease.seq += 1
            if len(lease.records) <= self.flush_chunk:  # the common flush: the list itself, not a copy of it
                lease.sent, lease.records = lease.records, []
            else:
                lease.sent, lease.records = lease.records[: self.flush_chunk], lease.records[self.flush_chunk :]
        records = lease.sent or []
        release = lease.closing and (lease.inflight == 0 or final) and not lease.records
        shrink = lease.spent if lease.closing and not release and lease.granted > lease.spent else None
        renew = not release and lease.deadline - now < self.lease_ttl_s / 2
        if not (records or release or shrink is not None or renew):
            return
        settle_started = time.perf_counter()
        result = await ledger.settle(
            self.pool,
            lease.id,
            records,
            release,
            seq=lease.seq if records else None,
            renew_ttl_s=None if release else self.lease_ttl_s,
            shrink_to=shrink,
            events=self.events,
        )
        metrics.SETTLE_SECONDS.observe(time.perf_counter() - settle_started)
        lease.sent = None
        gross, refunded = tally(records)
        lease.settled += gross if result.applied else 0
        acct.refunds_pending -= refunded
        acct.store_available, acct.checked_at = result.available, now
        _observe(acct, result.standing)
        if release or not result.applied:
            lease.dead = True
            return
        if shrink is not None:
            lease.granted = shrink
        lease.deadline = now + self.lease_ttl_s - self.margin_s

    @property
    def prefetching(self) -> int:
        """Leases being taken in the background right now."""
        return len(self._prefetches)

    async def prefetched(self) -> None:
        """Wait for the leases being taken in the background."""
        await asyncio.gather(*self._prefetches)

    # -- background work ----------------------------------------------------------------------

    @property
    def pool(self) -> Pool:
        if self._pool is None:
            raise RuntimeError("the meter has no database pool yet: call start(pool) at start-up")
        return self._pool

    def start(self, pool: Pool | None = None) -> None:
        """Start the flush (and expiry) loop; ``pool`` when the meter was built before the database."""
        if pool is not None:
            self._pool = pool
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"meter-{self.replica_id}")

    async def _run(self) -> None:
        last_expiry = self.clock()
        while True:  # each step guarded on its own: the loop outlives any single failure
            await asyncio.sleep(self.flush_interval_s)
            try:
                await self.flush()
            except Exception:
                log.exception("credit flush pass failed")
            if self.expiry_interval_s > 0 and self.clock() - last_expiry >= self.expiry_interval_s:
                last_expiry = self.clock()
                try:
                    await ledger.expire_due(self.pool, events=self.events)
                except Exception:
                    log.exception("credit expiry pass failed")

    async def flush(self, final: bool = False) -> None:
        """Flush every account; one account's failure never stops the others (or the loop)."""
        await asyncio.gather(*(self._flush_one(pubkey, acct, final) for pubkey, acct in list(self.accounts.items())))

    async def _flush_one(self, pubkey: str, acct: AccountState, final: bool) -> None:
        now = self.clock()
        elapsed = now - acct.sampled_at if acct.sampled_at else self.flush_interval_s
        acct.rate = 0.5 * acct.rate + 0.5 * acct.window / max(elapsed, 0.001)
        acct.window, acct.sampled_at = 0, now
        if not acct.leases:
            if (
                now - acct.last_used > 60.0
                and now - acct.checked_at > 60.0
                and not acct.lock.locked()
                and not acct.settling.locked()
            ):
                self.accounts.pop(pubkey, None)  # bound memory to the accounts in use
            return
        # One chunk per lease at a time, under the settling lock, not the account lock: a busy
        # second's flush (a fan-out's 50,000 notifications) takes as long as the lease it pays for
        # lasts, and a lease taken behind it came too late for every caller waiting on it.
        chunks = math.ceil(sum(len(lease.records) for lease in acct.leases) / self.flush_chunk) + 1
        try:
            async with self._flush_gate:
                for _ in range(chunks):
                    async with acct.settling:  # not the account lock: a lease is taken meanwhile
                        await self._flush_account(acct, pubkey, final)
                    if not any(lease.records for lease in acct.leases):
                        break
        except Exception:
            metrics.SETTLE_FAILURES.inc()
            log.exception("flushing credit usage of %s failed; retried next time", pubkey)

    async def stop(self, attempts: int = STOP_ATTEMPTS) -> None:
        """Stop the loop, let leases being taken arrive, then settle all usage and release every lease.

        A flush that fails (the database unreachable for a moment) is tried again, ``attempts`` times in
        all, ``STOP_RETRY_S`` apart: a stopping replica (scaled in, redeployed) would otherwise leave its
        unsettled usage uncharged and its leases holding credits until they expire."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.prefetched()
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(STOP_RETRY_S)
            await self.flush(final=True)
            if not self.holding():
                return
        log.warning(
            "stopping: %d credit lease(s) not released (%d credits of usage not settled); they expire by themselves",
            sum(len(acct.leases) for acct in self.accounts.values()),
            sum(self._unsettled(acct) for acct in self.accounts.values()),
        )

    def holding(self) -> bool:
        """Whether any lease of this replica is not released yet."""
        return any(not lease.dead for acct in self.accounts.values() for lease in acct.leases)

    def kill(self) -> None:
        """Stop the background loop without flushing, as a crash would (for tests)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for prefetch in list(self._prefetches):
            prefetch.cancel()


def _short(acct: AccountState) -> Outcome:
    """Why an account's call could not be admitted: no account, the daily spend cap, or its balance."""
    if not acct.exists:
        return Outcome.NO_ACCOUNT
    return Outcome.CAPPED if acct.capped else Outcome.INSUFFICIENT


def _observe(acct: AccountState, standing: Standing | None) -> None:
    """Keep the newest standing: answers can arrive out of the order their transactions committed in
    (a flush's answer after a send's settlement that committed later)."""
    if standing is not None and (acct.standing is None or standing.as_of >= acct.standing.as_of):
        acct.standing = standing


@contextlib.contextmanager
def _refilling(acct: AccountState) -> Iterator[None]:
    """Mark a turn at the account lock (a caller short of credits, or a lease being taken), waking every
    waiter when it ends. Inside a turn already marked (a refill within a caller's turn, a prefetch while
    a caller waits for the lock) it marks nothing: the outer turn's end wakes them."""
    if acct.refilling is not None:
        yield
        return
    done = acct.refilling = asyncio.Event()
    try:
        yield
    finally:
        acct.refilling = None
        done.set()
