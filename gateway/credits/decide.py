"""The meter's decisions over one account's state: can it pay, spend from a lease, is it short, ask whom.

Functions of an :class:`AccountState` (its leases, the store's last answer) and the time given to them:
no await, no clock read, no store, no Ray. :class:`gateway.credits.meter.Meter` applies them to the
accounts it holds and :mod:`gateway.credits.leases` does the I/O they call for (a lease, a flush), so
that the rules are tested on their own (``tests/credits/test_decide.py``) and the I/O on the store.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import NamedTuple

from gateway.core.credits import LeaseGrant, SettleResult, Standing, UsageRecord, tally
from gateway.credits.local import AccountState, Admission, Lease, Outcome

#: A :class:`UsageRecord` from a tuple of all its fields (``calls`` included): ``tuple.__new__`` costs
#: half of the named tuple's own constructor, and every call's outcome makes one.
_record: Callable[[tuple[str, int, bool, str, datetime, int]], UsageRecord] = partial(tuple.__new__, UsageRecord)

#: The next lease is taken in the background once less than this share of the active one is left.
PREFETCH_LEFT = 0.5


@dataclass(slots=True)
class Rules:
    """What the decisions read besides the account: the meter's settings and what it is connected to."""

    negative_ttl_s: float = 1.0  # how long an empty store answer is kept
    max_negative_ttl_s: float = 30.0  # ... at most, doubling, while every credited deposit is heard of
    hears_credits: bool = False  # the CREDITED channel is followed
    can_recall: bool = False  # other replicas can be asked for the credits their leases hold


class Verdict(StrEnum):
    """What a call of some price gets from an account's state."""

    SPEND = "spend"  # the active lease covers it
    ASK = "ask"  # ask the store (a new lease) or the other replicas: the state does not say no
    REFUSE = "refuse"  # known short, from a fresh store answer, and no replica's lease to ask back


def decide(acct: AccountState, total: int, now: float, rules: Rules) -> Verdict:
    """The admission of ``total`` credits at ``now``."""
    lease = acct.active
    if lease is not None and lease.covers(total, now):
        return Verdict.SPEND
    known_short = not acct.exists or potential(acct) < total
    if known_short and fresh(acct, now, rules) and not may_recall(acct, now, rules):
        return Verdict.REFUSE
    return Verdict.ASK


def short_of(acct: AccountState, price: int, now: float, rules: Rules) -> bool:
    """Whether an account that exists and is not suspended is refused ``price`` without asking anyone:
    a call refused so costs no store trip, no shard exchange and no node work."""
    if not acct.exists or acct.suspended:
        return False
    lease = acct.active
    if lease is not None and lease.covers(price, now):
        return False
    return fresh(acct, now, rules) and potential(acct) < price and not may_recall(acct, now, rules)


def refused(acct: AccountState) -> Outcome:
    """Why an account's call could not be admitted: no account, the daily spend cap, or its balance."""
    if not acct.exists:
        return Outcome.NO_ACCOUNT
    return Outcome.CAPPED if acct.capped else Outcome.INSUFFICIENT


def wait(acct: AccountState, rules: Rules) -> float:
    """How long an answer of the store stays good for an account it had nothing for."""
    if not rules.hears_credits or acct.empty_streak <= 1:
        return rules.negative_ttl_s
    return min(rules.max_negative_ttl_s, rules.negative_ttl_s * float(2 ** (acct.empty_streak - 1)))


def fresh(acct: AccountState, now: float, rules: Rules) -> bool:
    """Whether the store's last answer for the account is recent enough to act on without asking again."""
    return now - acct.checked_at < wait(acct, rules)


def known(acct: AccountState, now: float, rules: Rules) -> bool:
    """Whether the account's state can be used without the store: it holds a lease, or the answer is fresh."""
    return bool(acct.exists and acct.leases) or fresh(acct, now, rules)


def may_recall(acct: AccountState, now: float, rules: Rules) -> bool:
    """Other replicas' leases hold credits of the account, and no ask of them came back empty lately (a
    crashed holder answers nothing: its calls would otherwise each wait for it)."""
    return (
        rules.can_recall
        and acct.elsewhere > 0
        and not acct.suspended
        and now - acct.recall_failed_at >= rules.negative_ttl_s
    )


def potential(acct: AccountState) -> int:
    """What this replica could still spend: the store's unheld credits and its own leases' rest."""
    local = 0
    for lease in acct.leases:
        if not lease.dead:
            local += lease.granted - lease.spent
    return acct.store_available + local + acct.refunds_pending


def unsettled(acct: AccountState) -> int:
    """Credits this replica has taken but not yet charged at the store (in flight included)."""
    spent = 0
    for lease in acct.leases:  # a loop, not sum() over a generator: this runs for every call's headers
        if not lease.dead:
            spent += lease.spent - lease.settled
    return spent - acct.refunds_pending


def remaining(acct: AccountState) -> int | None:
    """X-Credits-Remaining: the balance less pending sends' holds and this replica's unsettled spending."""
    if not acct.exists or acct.standing is None:
        return None
    return max(0, acct.standing.balance - acct.standing.pending_sends - unsettled(acct))


# -- spending from a lease and recording the outcome ------------------------------------------------


def spend(acct: AccountState, lease: Lease, price: int, now: float, at: datetime) -> Admission:
    """Reserve ``price`` from ``lease``, which covers it at ``now``."""
    lease.spent += price
    lease.inflight += 1
    acct.window += price
    acct.last_used = now
    return Admission(Outcome.ADMITTED, price, acct, lease, at)


def spend_each(acct: AccountState, lease: Lease, prices: list[int], now: float, at: datetime) -> list[Admission]:
    """:func:`spend` of each of ``prices`` (their sum covered by ``lease``) in one step: the same books."""
    total = sum(prices)
    lease.spent += total
    lease.inflight += len(prices)
    acct.window += total
    if prices:
        acct.last_used = now
    shared: dict[int, Admission] = {}  # the items of one price share one (equal, and never changed)
    admissions = []
    for price in prices:
        admission = shared.get(price)
        if admission is None:
            admission = shared[price] = Admission(Outcome.ADMITTED, price, acct, lease, at)
        admissions.append(admission)
    return admissions


def spend_covered(
    acct: AccountState, lease: Lease, prices: list[int], now: float, at: datetime
) -> list[Admission] | None:
    """:func:`spend_each` of ``prices`` when ``lease`` covers their sum at ``now``; else None, nothing spent."""
    if not lease.covers(sum(prices), now):
        return None
    return spend_each(acct, lease, prices, now, at)


def next_lease_due(lease: Lease) -> bool:
    """Whether the next lease should be taken now, in the background (once a lease)."""
    return not lease.prefetched and lease.granted - lease.spent < lease.granted * PREFETCH_LEFT


def record(
    admission: Admission, method: str, request_id: str, refunded: bool, tallied: bool, part: int, calls: int
) -> bool:
    """Book an admitted call's outcome on its lease; False when the lease had ended (its usage dropped).

    ``tallied``: a delivery of a connection (``request_id``), one of many a second (a WebSocket's
    notifications): its usage is one record per connection and method per flush, with the count,
    instead of a record each (a thousand subscribers' record per notification was most of what a
    fan-out wrote to PostgreSQL, and its settles held the account row the next lease needed).
    ``calls``: how many deliveries a tallied admission paid for (a socket's batch of them, reserved
    together).

    ``part``: of a charged call, the credits given back (its failed items): two records, the rest
    charged and ``part`` refunded (a ``refund`` ledger entry at the flush, as for a refunded call)."""
    lease, acct, at = admission.lease, admission.account, admission.at
    if lease is None or acct is None or at is None:
        return True
    lease.inflight -= 1
    if lease.dead:
        return False
    price = admission.price
    if tallied and not refunded:
        tally = lease.tallies.get((method, request_id))
        if tally is None:
            lease.tallies[(method, request_id)] = [price, calls, at]
        else:
            tally[0] += price
            tally[1] += calls
        return True
    if not refunded and 0 < part < price:
        lease.records.append(UsageRecord(method, price - part, False, request_id, at))
        lease.records.append(UsageRecord(method, part, True, request_id, at))
        acct.refunds_pending += part
        return True
    refunded = refunded or part >= price > 0
    lease.records.append(_record((method, price, refunded, request_id, at, 1)))
    if refunded:
        acct.refunds_pending += price
    return True


def record_charged(done: list[tuple[Admission, str, str]]) -> list[tuple[Admission, str]]:
    """:func:`record` of each ``(admission, method, request id)``, every one charged in full, in one step
    (a batch's answered items); the ``(admission, method)`` whose lease had ended, their usage dropped."""
    dropped: list[tuple[Admission, str]] = []
    for admission, method, request_id in done:
        lease = admission.lease
        if lease is None or admission.account is None or admission.at is None:
            continue
        lease.inflight -= 1
        if lease.dead:
            dropped.append((admission, method))
            continue
        lease.records.append(_record((method, admission.price, False, request_id, admission.at, 1)))
    return dropped


# -- settling a lease's usage ------------------------------------------------------------------------


class SettlePlan(NamedTuple):
    """What one settle of a lease asks of the store."""

    records: list[UsageRecord]  # the chunk sent (``lease.sent``): retried as is, with the same seq
    release: bool  # the lease ends: its unspent part goes back to the balance
    shrink: int | None  # a closing lease keeps only what it spent
    renew: bool


def plan_settle(
    acct: AccountState, lease: Lease, now: float, final: bool, idle_release_s: float, lease_ttl_s: float, chunk: int
) -> SettlePlan | None:
    """The next settle of ``lease`` (None: nothing to ask): an idle lease closes; the connections' tallies
    become records; the next ``chunk`` of records is sent unless a sent chunk is not confirmed yet."""
    if lease.dead:
        return None
    if final or (now - acct.last_used > idle_release_s and lease.inflight == 0):
        lease.closing = True
    if lease.tallies:
        lease.records.extend(
            UsageRecord(method, credits, False, request_id, at, calls)
            for (method, request_id), (credits, calls, at) in lease.tallies.items()
        )
        lease.tallies = {}
    if lease.sent is None and lease.records:
        lease.seq += 1
        if len(lease.records) <= chunk:  # the common flush: the list itself, not a copy of it
            lease.sent, lease.records = lease.records, []
        else:
            lease.sent, lease.records = lease.records[:chunk], lease.records[chunk:]
    records = lease.sent or []
    release = lease.closing and (lease.inflight == 0 or final) and not lease.records
    shrink = lease.spent if lease.closing and not release and lease.granted > lease.spent else None
    renew = not release and lease.deadline - now < lease_ttl_s / 2
    if not (records or release or shrink is not None or renew):
        return None
    return SettlePlan(records, release, shrink, renew)


def settled(
    acct: AccountState, lease: Lease, plan: SettlePlan, result: SettleResult, now: float, deadline: float
) -> None:
    """Take in the store's answer to ``plan``: what it charged counts as settled (usage of an ended lease
    was dropped), a released or ended lease is dead, a shrunk one keeps what it spent, until ``deadline``."""
    lease.sent = None
    gross, refunded = tally(plan.records)
    lease.settled += gross if result.applied else 0
    acct.refunds_pending -= refunded
    acct.store_available, acct.checked_at = result.available, now
    observe(acct, result.standing)
    if plan.release or not result.applied:
        lease.dead = True
        return
    if plan.shrink is not None:
        lease.granted = plan.shrink
    lease.deadline = deadline


# -- what the store's answers mean -------------------------------------------------------------------


def lease_size(price: int, rate: float) -> int:
    """The credits a lease taken on the call path asks for: about 2 s of the account's spending."""
    return max(price, 20 * price, math.ceil(2 * rate))


def learn_rate(acct: AccountState, lease: Lease, now: float) -> None:
    """A lease used up quickly says more about the account's rate than the last flush did."""
    used_for = now - lease.started
    if used_for > 0:
        acct.rate = max(acct.rate, lease.spent / used_for)


def sample_rate(acct: AccountState, now: float, interval_s: float) -> None:
    """Fold the credits spent since the last sample into the account's smoothed rate."""
    elapsed = now - acct.sampled_at if acct.sampled_at else interval_s
    acct.rate = 0.5 * acct.rate + 0.5 * acct.window / max(elapsed, 0.001)
    acct.window, acct.sampled_at = 0, now


def adopt(acct: AccountState, grant: LeaseGrant | None, started: float, lease_ttl_s: float, margin_s: float) -> None:
    """Take in what the store answered to a lease request made at ``started``."""
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
    observe(acct, grant.standing)
    acct.rate_limit_rps, acct.concurrency_limit = grant.rate_limit_rps, grant.concurrency_limit
    if acct.suspended_at >= started and not grant.suspended:
        return  # asked before a suspension was announced: its grant is stale (it expires unspent)
    acct.suspended = grant.suspended
    if grant.lease_id is not None:
        acct.leases.append(Lease(grant.lease_id, grant.granted, started + lease_ttl_s - margin_s, started))


def invalidate(acct: AccountState, now: float) -> None:
    """Forget cached shortness: a deposit was credited to the account (here or on another replica)."""
    acct.checked_at = -math.inf
    acct.empty_streak = 0
    acct.invalidated_at = now


def suspend(acct: AccountState, suspended: bool, now: float) -> None:
    """The account was suspended (or resumed) on some replica: its leases here take no new call at once
    (the store grants a suspended account nothing), instead of at their deadline."""
    acct.suspended = suspended
    if suspended:
        acct.suspended_at = acct.checked_at = now
        for lease in acct.leases:
            lease.closing = True
    else:
        invalidate(acct, now)


def observe(acct: AccountState, standing: Standing | None) -> None:
    """Keep the newest standing: answers can arrive out of the order their transactions committed in
    (a flush's answer after a send's settlement that committed later)."""
    if standing is not None and (acct.standing is None or standing.as_of >= acct.standing.as_of):
        acct.standing = standing
