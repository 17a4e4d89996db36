"""The meter's decisions (gateway/credits/decide.py) on drawn account states, with no store and no clock.

Each property is one the meter relies on: a lease never pays for more than it holds, a refund gives back
exactly what was spent, and the early refusal (``short_of``) refuses only what could not be paid here.
Derandomized by tests/conftest.py's ``replay`` profile (checked below).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.credits import LeaseGrant, SettleResult
from gateway.credits.decide import (
    Rules,
    SettlePlan,
    Verdict,
    adopt,
    decide,
    invalidate,
    plan_settle,
    potential,
    record,
    refused,
    settled,
    short_of,
    spend,
    spend_covered,
    spend_each,
    unsettled,
    wait,
)
from gateway.credits.local import AccountState, Lease, Outcome

NOW = 1_000.0
AT = datetime(2026, 11, 25, tzinfo=UTC)

prices = st.integers(min_value=1, max_value=40)
rules = st.builds(
    Rules,
    negative_ttl_s=st.sampled_from([0.5, 1.0, 2.0]),
    max_negative_ttl_s=st.sampled_from([1.0, 8.0, 30.0]),
    hears_credits=st.booleans(),
    can_recall=st.booleans(),
)


@st.composite
def leases(draw: st.DrawFn) -> Lease:
    granted = draw(st.integers(min_value=0, max_value=60))
    spent = draw(st.integers(min_value=0, max_value=granted))
    return Lease(
        id=draw(st.integers(min_value=1, max_value=10**6)),
        granted=granted,
        deadline=NOW + draw(st.sampled_from([-1.0, 0.0, 0.001, 5.0, 28.0])),
        started=NOW - 2.0,
        spent=spent,
        settled=draw(st.integers(min_value=0, max_value=spent)),
        closing=draw(st.booleans()),
        dead=draw(st.booleans()),
        prefetched=draw(st.booleans()),
    )


@st.composite
def accounts(draw: st.DrawFn) -> AccountState:
    held = draw(st.lists(leases(), max_size=3))
    for older in held[:-1]:
        older.closing = True  # a new lease is taken only once the one before it closed (gateway/credits/leases.py)
    return AccountState(
        leases=held,
        exists=draw(st.sampled_from([True, True, True, False])),
        checked_at=NOW - draw(st.sampled_from([0.0, 0.4, 0.9, 1.5, 3.0, 20.0, math.inf])),
        empty_streak=draw(st.integers(min_value=0, max_value=7)),
        store_available=draw(st.integers(min_value=0, max_value=40)),
        elsewhere=draw(st.sampled_from([0, 0, 12])),
        recall_failed_at=NOW - draw(st.sampled_from([0.1, 1.0, 5.0, math.inf])),
        suspended=draw(st.sampled_from([False, False, False, True])),
        capped=draw(st.booleans()),
        refunds_pending=draw(st.integers(min_value=0, max_value=5)),
    )


def live_lease(granted: int) -> AccountState:
    return AccountState(leases=[Lease(1, granted, NOW + 10.0, NOW - 1.0)], store_available=0, checked_at=NOW)


def test_the_replay_profile_is_in_force() -> None:
    assert settings.default.derandomize, "tests/conftest.py's replay profile: hypothesis draws the same examples"


@settings(max_examples=300)
@given(granted=st.integers(min_value=0, max_value=200), asked=st.lists(prices, max_size=40), rules=rules)
def test_spending_never_exceeds_the_lease(granted: int, asked: list[int], rules: Rules) -> None:
    """Calls admitted by the decision are paid from the lease, which never pays out more than it was granted,
    and a call is refused from the lease only when what is left does not cover it."""
    acct = live_lease(granted)
    lease = acct.leases[0]
    admitted = calls = 0
    for price in asked:
        verdict = decide(acct, price, NOW, rules)
        if verdict is Verdict.SPEND:
            admission = spend(acct, lease, price, NOW, AT)
            assert admission.ok and admission.price == price and admission.lease is lease
            admitted, calls = admitted + price, calls + 1
        else:
            assert lease.granted - lease.spent < price, "refused what the lease covers"
        assert lease.spent == admitted <= lease.granted
    assert lease.inflight == calls
    assert potential(acct) == granted - admitted


@settings(max_examples=300)
@given(
    granted=st.integers(min_value=0, max_value=400),
    calls=st.lists(
        st.tuples(prices, st.sampled_from(["charged", "refunded", "part"]), st.integers(0, 45)), max_size=30
    ),
)
def test_a_refund_gives_back_exactly_what_was_spent(granted: int, calls: list[tuple[int, str, int]]) -> None:
    """Spent, then charged, refunded or charged with a part given back: what the replica can spend again and
    what it has yet to settle move by exactly the credits refunded, and the usage records say the same."""
    acct = live_lease(granted)
    lease = acct.leases[0]
    before = potential(acct)
    charged = refunded = 0
    for n, (price, outcome, part) in enumerate(calls):
        if decide(acct, price, NOW, Rules()) is not Verdict.SPEND:
            continue
        admission = spend(acct, lease, price, NOW, AT)
        if outcome == "refunded":
            assert record(admission, "getSlot", f"r{n}", True, False, 0, 1)
            refunded += price
        elif outcome == "part":
            assert record(admission, "getSlot", f"r{n}", False, False, part, 1)
            back = min(part, price)
            refunded, charged = refunded + back, charged + price - back
        else:
            assert record(admission, "getSlot", f"r{n}", False, False, 0, 1)
            charged += price
    assert lease.inflight == 0
    assert potential(acct) == before - charged
    assert unsettled(acct) == charged
    assert sum(r.credits for r in lease.records if not r.refunded) == charged
    assert sum(r.credits for r in lease.records if r.refunded) == refunded == acct.refunds_pending


@settings(max_examples=500)
@given(acct=accounts(), price=prices, rules=rules)
def test_short_of_refuses_only_what_could_not_be_paid_here(acct: AccountState, price: int, rules: Rules) -> None:
    """The early refusal agrees with the admission's decision, refuses nothing a lease covers or the store's
    last answer could still grant, and refuses every dearer call too."""
    short = short_of(acct, price, NOW, rules)
    verdict = decide(acct, price, NOW, rules)
    assert short == (acct.exists and not acct.suspended and verdict is Verdict.REFUSE)
    # the rule as docs/architecture.md states it, computed here on its own
    backoff = rules.negative_ttl_s
    if rules.hears_credits and acct.empty_streak > 1:
        backoff = min(rules.max_negative_ttl_s, rules.negative_ttl_s * 2 ** (acct.empty_streak - 1))
    left = sum(lease.granted - lease.spent for lease in acct.leases if not lease.dead)
    can_ask_back = rules.can_recall and acct.elsewhere > 0 and NOW - acct.recall_failed_at >= rules.negative_ttl_s
    assert short == (
        acct.exists
        and not acct.suspended
        and not (acct.leases and acct.leases[-1].covers(price, NOW))
        and NOW - acct.checked_at < backoff
        and acct.store_available + left + acct.refunds_pending < price
        and not can_ask_back
    )
    if short:
        assert acct.active is None or not acct.active.covers(price, NOW), "refused what the lease covers"
        assert potential(acct) < price
        assert NOW - acct.checked_at < wait(acct, rules), "refused on a stale answer"
        assert short_of(acct, price + 1, NOW, rules)
    if verdict is Verdict.SPEND:
        active = acct.active
        assert active is not None and active.covers(price, NOW) and not short
    if verdict is Verdict.REFUSE:
        assert refused(acct) is (
            Outcome.NO_ACCOUNT if not acct.exists else Outcome.CAPPED if acct.capped else Outcome.INSUFFICIENT
        )


@settings(max_examples=300)
@given(acct=accounts(), rules=rules)
def test_the_store_is_asked_again_within_the_backoff(acct: AccountState, rules: Rules) -> None:
    """An empty answer is kept from ``negative_ttl_s`` up to ``max_negative_ttl_s``, doubling with each only
    while every credited deposit is heard of; a credited deposit makes the next call ask the store."""
    kept = wait(acct, rules)
    assert kept >= min(rules.negative_ttl_s, rules.max_negative_ttl_s)
    assert kept <= max(rules.negative_ttl_s, rules.max_negative_ttl_s)
    if not rules.hears_credits:
        assert kept == rules.negative_ttl_s
    longer = AccountState(empty_streak=acct.empty_streak + 1)
    assert wait(longer, rules) >= kept or acct.empty_streak <= 1
    invalidate(acct, NOW)
    covered = acct.active is not None and acct.active.covers(1, NOW)
    assert decide(acct, 1, NOW, rules) is (Verdict.SPEND if covered else Verdict.ASK)


@settings(max_examples=200)
@given(granted=st.integers(min_value=0, max_value=300), asked=st.lists(prices, max_size=30))
def test_a_batch_spent_at_once_books_as_spent_in_turn(granted: int, asked: list[int]) -> None:
    one, each = live_lease(granted), live_lease(granted)
    if not one.leases[0].covers(sum(asked), NOW):
        return
    at_once = spend_each(one, one.leases[0], asked, NOW, AT)
    in_turn = [spend(each, each.leases[0], price, NOW, AT) for price in asked]
    assert [a.price for a in at_once] == [a.price for a in in_turn] == asked
    a, b = one.leases[0], each.leases[0]
    assert (a.spent, a.inflight, one.window) == (b.spent, b.inflight, each.window)


def test_a_recall_that_came_back_empty_is_not_asked_again_at_once() -> None:
    """Short, with other replicas' leases holding some: asked back (not refused) unless an ask came back
    empty within ``negative_ttl_s`` (a crashed holder answers nothing)."""
    acct = AccountState(checked_at=NOW, store_available=2, elsewhere=30)
    rules = Rules(negative_ttl_s=1.0, can_recall=True)
    assert not short_of(acct, 5, NOW, rules) and decide(acct, 5, NOW, rules) is Verdict.ASK
    acct.recall_failed_at = NOW - 0.5
    assert short_of(acct, 5, NOW, rules) and decide(acct, 5, NOW, rules) is Verdict.REFUSE
    acct.recall_failed_at = NOW - 1.0
    assert not short_of(acct, 5, NOW, rules)
    rules.can_recall = False  # no recall running: nothing to ask
    assert short_of(acct, 5, NOW, rules)


def test_an_empty_answer_that_crossed_a_deposit_notice_is_not_kept() -> None:
    """A lease request answered empty while a deposit was announced may predate the credit: the next call
    asks again at once instead of refusing on it."""
    acct = AccountState(exists=True)
    rules = Rules(hears_credits=True)
    empty = LeaseGrant(None, 0, 0, 0, None, None)
    adopt(acct, empty, NOW - 1.0, 30.0, 2.0)
    assert decide(acct, 5, NOW - 0.5, rules) is Verdict.REFUSE  # an empty answer, kept
    invalidate(acct, NOW - 0.2)
    adopt(acct, empty, NOW - 0.3, 30.0, 2.0)  # asked before the notice, answered after it
    assert decide(acct, 5, NOW, rules) is Verdict.ASK
    adopt(acct, LeaseGrant(7, 10, 10, 0, None, None), NOW, 30.0, 2.0)
    assert decide(acct, 5, NOW, rules) is Verdict.SPEND and acct.active is not None
    assert acct.active.deadline == NOW + 30.0 - 2.0


@given(granted=st.integers(min_value=1, max_value=60), price=prices, rules=rules)
def test_a_dead_lease_admits_nothing(granted: int, price: int, rules: Rules) -> None:
    """A lease whose flush was not applied (the store no longer holds it) is dead: a call admitted on it
    would have its usage dropped at completion, a call nobody pays for. It stays in the account's list
    until that account's flush is over, and other leases' flushes are awaited meanwhile."""
    acct = live_lease(granted)
    acct.leases[0].dead = True
    assert acct.active is None
    assert not acct.leases[0].covers(price, NOW)
    assert decide(acct, price, NOW, rules) is not Verdict.SPEND


# -- the books of a call, from its hold to its settle ----------------------------------------------

#: one call: its price, how it ended (charged, refunded, or charged with a part given back), that part
calls = st.lists(
    st.tuples(prices, st.sampled_from(["charged", "refunded", "part", "tallied"]), st.integers(0, 40)), max_size=30
)


def _settle_all(acct: AccountState, lease: Lease) -> SettlePlan:
    """The final settle of ``lease``, answered by a store that applied it."""
    plan = plan_settle(acct, lease, NOW, True, 5.0, 30.0, 10_000)
    assert plan is not None
    settled(acct, lease, plan, SettleResult(True, 0, 0, 0, 0), NOW, NOW + 28.0)
    return plan


@settings(max_examples=300)
@given(granted=st.integers(min_value=0, max_value=400), asked=calls)
def test_credits_held_are_charged_or_refunded_never_more_never_negative(
    granted: int, asked: list[tuple[int, str, int]]
) -> None:
    """Held = charged + refunded, per call and in all; no record is negative, no charge exceeds its
    hold, and once settled nothing is left unsettled."""
    acct = live_lease(granted)
    lease = acct.leases[0]
    held, holds = 0, dict[str, int]()
    for n, (price, ending, part) in enumerate(asked):
        admitted = spend_covered(acct, lease, [price], NOW, AT)
        if admitted is None:
            continue
        held, holds[f"r{n}"] = held + price, price
        (admission,) = admitted
        assert record(
            admission, "getSlot", f"r{n}", ending == "refunded", ending == "tallied", part * (ending == "part"), 1
        )
        assert 0 <= unsettled(acct) <= held
    plan = _settle_all(acct, lease)
    charged = sum(r.credits for r in plan.records if not r.refunded)
    refunded = sum(r.credits for r in plan.records if r.refunded)
    assert all(r.credits >= 0 for r in plan.records)
    assert charged + refunded == held == lease.spent <= granted
    for request_id, price in holds.items():
        mine = [r for r in plan.records if r.request_id == request_id]
        assert sum(r.credits for r in mine) == price >= sum(r.credits for r in mine if not r.refunded)
    assert unsettled(acct) == 0 and acct.refunds_pending == 0 and lease.dead


@given(granted=st.integers(min_value=0, max_value=200), asked=st.lists(prices, min_size=1, max_size=20))
def test_a_batch_is_admitted_whole_for_its_sum_or_refused_charging_nothing(granted: int, asked: list[int]) -> None:
    acct = live_lease(granted)
    lease = acct.leases[0]
    admitted = spend_covered(acct, lease, asked, NOW, AT)
    if sum(asked) > granted:
        assert admitted is None and lease.spent == 0 and lease.inflight == 0 and acct.window == 0
        assert plan_settle(acct, lease, NOW, True, 5.0, 30.0, 10_000) == SettlePlan([], True, None, False)
        return
    assert admitted is not None and [a.price for a in admitted] == asked
    assert lease.spent == acct.window == sum(asked) and lease.inflight == len(asked)


@given(granted=st.integers(min_value=1, max_value=200), asked=st.lists(prices, max_size=20), inflight=st.booleans())
def test_a_settle_never_releases_a_lease_with_calls_in_flight(granted: int, asked: list[int], inflight: bool) -> None:
    """A lease closes, not ends, while calls it paid for run; a closing lease shrinks to what it spent."""
    acct = live_lease(granted)
    lease = acct.leases[0]
    admitted = spend_covered(acct, lease, asked, NOW, AT) or []
    for n, admission in enumerate(admitted[: len(admitted) - inflight]):
        record(admission, "getSlot", f"r{n}", False, False, 0, 1)
    lease.closing = True
    plan = plan_settle(acct, lease, NOW, False, 5.0, 30.0, 10_000)
    calls_in_flight = lease.inflight > 0
    assert plan is not None and plan.release is not calls_in_flight
    if calls_in_flight and lease.granted > lease.spent:
        assert plan.shrink == lease.spent
