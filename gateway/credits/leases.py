"""The meter's store I/O: taking credit leases (on the call path, or ahead of time), settling usage.

:class:`gateway.credits.meter.Meter` decides (with :mod:`gateway.credits.decide`) and spends in
memory; this takes a lease when it asks for one, takes the next one in the background once half of the
active one is spent, and settles usage (every ``flush_interval_s``, when a lease is replaced, when
another replica asks for the credits back, and at stop). Both work on the same accounts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from gateway.base.stopping import cancel_and_wait
from gateway.core.credits import EventHook, LeaseGrant
from gateway.credits import decide, metrics
from gateway.credits.local import AccountState, Lease
from gateway.storage import ledger
from gateway.storage.connections import Pool

log = logging.getLogger(__name__)

#: A stopping meter's final flush: tries, and the pause between two (5 s in all, within Serve's grace).
STOP_ATTEMPTS = 20
STOP_RETRY_S = 0.25
#: Usage records of one account a replica may hold unsettled before that account's calls wait for a
#: settle (:meth:`LeaseKeeper.settle_backlog`). Past it, a caller recording usage faster than PostgreSQL
#: settles it (100-item batches from 64 connections: ~140,000 records a second against a settle rate
#: several times lower, issue 64) would grow a backlog that a stopping replica's final flush cannot write
#: within its stop step (``gateway.base.stopping.STEP_S``, and Serve's grace): usage then lost. 20 chunks of
#: ``flush_chunk`` records by default: a few seconds of settles at most.
BACKLOG_CHUNKS = 20
#: After a backlog settle failed (the database unreachable), calls do not wait on the next one for this long.
BACKLOG_RETRY_S = 1.0
T = TypeVar("T")


class LeaseKeeper:
    """This replica's credit leases at the store: taken, renewed, settled and released."""

    def __init__(
        self,
        accounts: dict[str, AccountState],
        pool: Pool | None,
        *,
        replica_id: str,
        replicas: int,
        lease_ttl_s: float,
        flush_interval_s: float,
        idle_release_s: float,
        expiry_interval_s: float,
        flush_chunk: int,
        events: EventHook,
        clock: Callable[[], float],
    ) -> None:
        self.accounts = accounts
        self._pool = pool
        self.replica_id = replica_id
        self.replicas = replicas
        self.lease_ttl_s = lease_ttl_s
        self.margin_s = min(2.0, lease_ttl_s / 4)  # stop spending this long before the store's expiry
        self.flush_interval_s = flush_interval_s
        self.idle_release_s = idle_release_s
        self.expiry_interval_s = expiry_interval_s
        self.flush_chunk = flush_chunk  # usage records per settle transaction
        self.events = events
        self.clock = clock
        self._task: asyncio.Task[None] | None = None
        self._flush_gate = asyncio.Semaphore(4)
        self.prefetches: set[asyncio.Task[None]] = set()
        self.backlog_max = BACKLOG_CHUNKS * flush_chunk
        self._backlog_failed_at = -math.inf

    @property
    def pool(self) -> Pool:
        if self._pool is None:
            raise RuntimeError("the meter has no database pool yet: call start(pool) at start-up")
        return self._pool

    # -- taking leases --------------------------------------------------------------------------

    async def refill(self, acct: AccountState, pubkey: str, price: int) -> None:
        """Replace the active lease (holding the account lock): lease anew, and only when the store has
        too little outside this replica's leases, flush first (their unspent part then counts) and lease
        again. Leasing first keeps the flush of a busy second's usage off the call path: the callers
        waiting for this turn would wait for it too (a fan-out's thousand writers: bench/ws_fanout.py)."""
        active = acct.active
        if active is not None:
            active.closing = True
            decide.learn_rate(acct, active, self.clock())
        with refilling(acct):
            want = decide.lease_size(price, acct.rate)
            if any(not lease.dead for lease in acct.leases):
                started = self.clock()
                grant = await self._lease(pubkey, want, price)
                if grant is not None and grant.lease_id is not None:
                    self._adopt(acct, grant, started)
                    return  # the closing leases settle at the next flush
            async with acct.settling:
                await self.flush_account(acct, pubkey)
            started = self.clock()
            self._adopt(acct, await self._lease(pubkey, want, price), started)

    def _lease(self, pubkey: str, want: int, at_least: int) -> Awaitable[LeaseGrant | None]:
        return ledger.lease(
            self.pool, pubkey, self.replica_id, want, self.lease_ttl_s, at_least=at_least, replicas=self.replicas
        )

    def _adopt(self, acct: AccountState, grant: LeaseGrant | None, started: float) -> None:
        metrics.LEASES.inc(("no_account" if grant is None else "empty" if grant.lease_id is None else "granted",))
        decide.adopt(acct, grant, started, self.lease_ttl_s, self.margin_s)

    def prefetch(self, acct: AccountState, pubkey: str, lease: Lease) -> None:
        """Take the next lease in the background (see :meth:`_prefetch`)."""
        lease.prefetched = True  # once per lease: with nothing left to lease, calls do not retry it each time
        task = asyncio.get_running_loop().create_task(self._prefetch(acct, pubkey, lease))
        self.prefetches.add(task)
        task.add_done_callback(self.prefetches.discard)

    async def _prefetch(self, acct: AccountState, pubkey: str, lease: Lease) -> None:
        """Take the next lease while ``lease`` still has some left, so that calls do not queue on the
        account lock behind a flush and a lease when it runs out. Unlike :meth:`refill` it leases
        first and flushes later: ``lease`` keeps serving until the new one is there, then closes, and
        its unspent part goes back at the next flush. With nothing left to lease, ``lease`` is spent
        out and the refill on the call path decides."""
        try:
            async with acct.lock:
                if acct.active is not lease:
                    return  # a refill replaced it meanwhile
                decide.learn_rate(acct, lease, self.clock())
                want = max(lease.granted, math.ceil(2 * acct.rate))
                started = self.clock()
                with refilling(acct):
                    grant = await self._lease(pubkey, want, 1)
                    if grant is not None and grant.lease_id is not None:
                        lease.closing = True
                    self._adopt(acct, grant, started)
        except Exception:
            log.exception("taking the next credit lease of %s ahead of time failed; calls will refill it", pubkey)

    async def give_back(self, acct: AccountState, pubkey: str) -> int:
        """Close this replica's leases of the account and settle them now (the calls in flight keep
        theirs): the credits given back."""
        async with acct.lock, acct.settling:
            unspent = sum(lease.granted - lease.spent for lease in acct.leases if not lease.dead)
            if unspent <= 0:
                return 0
            for lease in acct.leases:
                lease.closing = True
            await self.flush_account(acct, pubkey)
        return unspent

    async def carve(
        self, acct: AccountState, amount: int, take: Callable[[int | None], Awaitable[tuple[T, bool]]]
    ) -> T:
        """Run ``take``, a store transaction that holds ``amount`` credits outside any lease, offering it
        this replica's active lease (its id) to take them from when the lease covers them.

        Without this, credits leased here would count against the hold while sitting unused. ``take``
        returns its result and whether it took from the lease. The lease shrinks here before the
        await (nothing else can spend those credits meanwhile) and grows back only when ``take``
        answered that it did not use it: after a failure or cancellation it stays smaller, which can
        only leave this replica spending less than the store allows, never more.
        """
        async with acct.lock, acct.settling:  # no flush shrinks or releases the lease meanwhile
            lease = acct.active
            carved = lease if lease is not None and lease.covers(amount, self.clock()) else None
            if carved is not None:
                carved.granted -= amount
            result, used = await take(None if carved is None else carved.id)
            if carved is not None and not used:
                carved.granted += amount
            return result

    # -- settling usage -------------------------------------------------------------------------

    async def flush_account(self, acct: AccountState, pubkey: str, final: bool = False) -> None:
        for lease in list(acct.leases):
            await self._flush_lease(acct, lease, final)
        acct.leases = [lease for lease in acct.leases if not lease.dead]

    async def _flush_lease(self, acct: AccountState, lease: Lease, final: bool) -> None:
        now = self.clock()
        plan = decide.plan_settle(acct, lease, now, final, self.idle_release_s, self.lease_ttl_s, self.flush_chunk)
        if plan is None:
            return
        acct.settles += 1  # odd: the store and this replica's unsettled usage may disagree until the end
        try:
            settle_started = time.perf_counter()
            result = await ledger.settle(
                self.pool,
                lease.id,
                plan.records,
                plan.release,
                seq=lease.seq if plan.records else None,
                renew_ttl_s=None if plan.release else self.lease_ttl_s,
                shrink_to=plan.shrink,
                events=self.events,
            )
            metrics.SETTLE_SECONDS.observe(time.perf_counter() - settle_started)
            decide.settled(acct, lease, plan, result, now, now + self.lease_ttl_s - self.margin_s)
        finally:
            acct.settles += 1

    def backlogged(self, acct: AccountState) -> bool:
        """Whether the account's usage waiting for its settle is past :attr:`backlog_max`."""
        return sum(len(lease.records) for lease in acct.leases) > self.backlog_max

    async def settle_backlog(self, acct: AccountState, pubkey: str) -> None:
        """Settle the account's usage, a chunk a lease at a time, until it is back within :attr:`backlog_max`:
        the calls of an account recording usage faster than it is settled wait here, so that its backlog, and
        a stopping replica's final flush, stay bounded. Under the settling lock, as the background flush
        (one of them settles at a time; each waiter looks again when its turn comes). A failed settle is
        logged and the caller goes on: the background loop and the stop try again."""
        if self.clock() - self._backlog_failed_at < BACKLOG_RETRY_S:
            return
        try:
            while self.backlogged(acct):
                async with acct.settling:
                    if not self.backlogged(acct):
                        break
                    await self.flush_account(acct, pubkey)
        except Exception:
            self._backlog_failed_at = self.clock()
            metrics.SETTLE_FAILURES.inc()
            log.exception("settling the usage backlog of %s failed; retried next time", pubkey)

    async def flush(self, final: bool = False) -> None:
        """Flush every account; one account's failure never stops the others (or the loop)."""
        await asyncio.gather(*(self._flush_one(pubkey, acct, final) for pubkey, acct in list(self.accounts.items())))

    async def _flush_one(self, pubkey: str, acct: AccountState, final: bool) -> None:
        now = self.clock()
        decide.sample_rate(acct, now, self.flush_interval_s)
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
                        await self.flush_account(acct, pubkey, final)
                    if not any(lease.records for lease in acct.leases):
                        break
        except Exception:
            metrics.SETTLE_FAILURES.inc()
            log.exception("flushing credit usage of %s failed; retried next time", pubkey)

    # -- the background loop --------------------------------------------------------------------

    def start(self, pool: Pool | None = None) -> None:
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

    async def stop(self, attempts: int = STOP_ATTEMPTS) -> None:
        """Stop the loop, let leases being taken arrive, then settle all usage and release every lease.

        A flush that fails (the database unreachable for a moment) is tried again, ``attempts`` times in
        all, ``STOP_RETRY_S`` apart: a stopping replica (scaled in, redeployed) would otherwise leave its
        unsettled usage uncharged and its leases holding credits until they expire."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await asyncio.gather(*self.prefetches)
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(STOP_RETRY_S)
            await self.flush(final=True)
            if not self.holding():
                return
        log.warning(
            "stopping: %d credit lease(s) not released (%d credits of usage not settled); they expire by themselves",
            sum(len(acct.leases) for acct in self.accounts.values()),
            sum(decide.unsettled(acct) for acct in self.accounts.values()),
        )

    def holding(self) -> bool:
        """Whether any lease of this replica is not released yet."""
        return any(not lease.dead for acct in self.accounts.values() for lease in acct.leases)

    def kill(self) -> None:
        """Stop the background loop without flushing, as a crash would (for tests)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for prefetch in list(self.prefetches):
            prefetch.cancel()


@contextlib.contextmanager
def refilling(acct: AccountState) -> Iterator[None]:
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
