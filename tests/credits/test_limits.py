"""Rate and concurrency limits: the pure token bucket and counter (no clock, no I/O)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from gateway.limits.rules import Allowed, ConcurrencyLimited, Limiter, RateLimited, TokenBucket, share

WALL = 1_700_000_000.0


def test_bucket_starts_full_and_refills_at_rate() -> None:
    bucket = TokenBucket.full(rate=10, burst=10, now=0.0)
    assert all(bucket.take(0.0) == 0.0 for _ in range(10))
    assert bucket.take(0.0) == 0.1  # one unit comes back in 1/10 s
    assert bucket.take(0.05) > 0
    assert bucket.take(0.1) == 0.0
    bucket.refill(100.0)
    assert bucket.tokens == 10  # never beyond the burst


def test_limiter_rate_limits_with_retry_after_at_least_one_second() -> None:
    limiter = Limiter(default_rps=5, default_concurrency=2)
    decisions = [limiter.take("a", 0.0, WALL) for _ in range(6)]
    assert all(isinstance(d, Allowed) for d in decisions[:5])
    assert [d.remaining for d in decisions[:5] if isinstance(d, Allowed)] == [4, 3, 2, 1, 0]
    limited = decisions[5]
    assert isinstance(limited, RateLimited)
    assert limited.retry_after_s == 1 and limited.limit == 5 and limited.reset_at >= WALL + 1
    assert isinstance(limiter.take("b", 0.0, WALL), Allowed)  # accounts are independent
    assert isinstance(limiter.take("a", 0.2, WALL + 0.2), Allowed)  # 0.2 s at 5/s is one unit
    peek = limiter.peek("a", 0.2, WALL + 0.2)
    assert peek.remaining == 0 and peek.reset_at == math.ceil(WALL + 1.2)


def test_per_account_override_applies() -> None:
    limiter = Limiter(default_rps=50, default_concurrency=2)
    assert limiter.peek("a", 0.0, WALL).limit == 50
    assert limiter.peek("a", 0.0, WALL, rps=2).limit == 2
    assert [isinstance(limiter.take("a", 0.0, WALL, rps=2), Allowed) for _ in range(3)] == [True, True, False]


def test_concurrency_slots() -> None:
    limiter = Limiter(default_rps=50, default_concurrency=2)
    assert limiter.acquire("a", 0.0) is None
    assert limiter.acquire("a", 0.0) is None
    blocked = limiter.acquire("a", 0.0)
    assert isinstance(blocked, ConcurrencyLimited) and blocked.limit == 2
    assert limiter.acquire("a", 0.0, concurrency=3) is None  # an override raises the cap
    limiter.release("a")
    limiter.release("a")
    limiter.release("a")
    limiter.release("a")  # extra releases never go below zero
    assert limiter.acquire("a", 0.0) is None


def test_replica_shares() -> None:
    assert share(50, 1) == 50
    assert share(50, 3) == 17
    assert share(1, 4) == 1
    limiter = Limiter(default_rps=10, default_concurrency=4, replicas=2)
    allowed = sum(isinstance(limiter.take("a", 0.0, WALL), Allowed) for _ in range(20))
    assert allowed == 5
    assert limiter.acquire("a", 0.0) is None and limiter.acquire("a", 0.0) is None
    assert isinstance(limiter.acquire("a", 0.0), ConcurrencyLimited)


def test_prune_forgets_only_idle_accounts() -> None:
    limiter = Limiter(default_rps=10, default_concurrency=4)
    limiter.take("busy", 0.0, WALL)
    limiter.acquire("inflight", 0.0)
    limiter.peek("idle", 0.0, WALL)
    assert limiter.prune(0.0) == 1  # only idle: busy's bucket is not full, inflight holds a slot
    assert limiter.prune(1.0) == 1  # busy has refilled
    limiter.release("inflight")
    assert limiter.prune(1.0) == 1


@given(
    rate=st.integers(min_value=1, max_value=100),
    steps=st.lists(st.floats(min_value=0.0, max_value=2.0, allow_nan=False), min_size=1, max_size=200),
)
def test_bucket_never_admits_more_than_rate_allows(rate: int, steps: list[float]) -> None:
    limiter = Limiter(default_rps=rate, default_concurrency=1)
    now = 0.0
    allowed = 0
    for step in steps:
        now += step
        decision = limiter.take("a", now, WALL + now)
        if isinstance(decision, Allowed):
            allowed += 1
        else:
            assert decision.retry_after_s >= 1
    assert allowed <= rate + rate * now + 1e-9


def test_take_many_is_all_or_none() -> None:
    limiter = Limiter(default_rps=10, default_concurrency=4)
    assert isinstance(limiter.take_many("a", 6, 0.0, 1_000.0), Allowed)
    refused = limiter.take_many("a", 6, 0.0, 1_000.0)  # 4 left: none taken
    assert isinstance(refused, RateLimited) and refused.retry_after_s == 1
    assert limiter.peek("a", 0.0, 1_000.0).remaining == 4
    assert isinstance(limiter.take_many("a", 4, 0.0, 1_000.0), Allowed)


def test_take_many_beyond_the_burst_needs_a_full_bucket_and_leaves_debt() -> None:
    """100 items against a burst of 10: admitted once the bucket is full, then 9 s of debt to pay."""
    limiter = Limiter(default_rps=10, default_concurrency=4)
    limiter.take("a", 0.0, 1_000.0)
    refused = limiter.take_many("a", 100, 0.0, 1_000.0)
    assert isinstance(refused, RateLimited) and refused.retry_after_s == 1  # until the bucket is full again
    allowed = limiter.take_many("a", 100, 0.1, 1_000.1)
    assert isinstance(allowed, Allowed) and allowed.remaining == 0
    later = limiter.take("a", 5.0, 1_005.0)  # 10 - 100 + 49 tokens: still in debt
    assert isinstance(later, RateLimited) and later.retry_after_s == 5
    assert isinstance(limiter.take("a", 9.3, 1_009.3), Allowed)


@given(units=st.lists(st.integers(min_value=1, max_value=30), max_size=40), gaps=st.floats(0.0, 2.0))
def test_take_many_keeps_the_average_rate(units: list[int], gaps: float) -> None:
    """Over any run, what take_many admitted is at most burst + rate × elapsed (+ one list's overshoot)."""
    limiter = Limiter(default_rps=10, default_concurrency=4)
    now, taken = 0.0, 0
    for n in units:
        now += gaps
        if isinstance(limiter.take_many("a", n, now, now), Allowed):
            taken += n
    assert taken <= 10 + 10 * now + max(units, default=0)


@given(
    rate=st.integers(min_value=1, max_value=120),
    replicas=st.integers(min_value=1, max_value=3),
    earlier=st.lists(st.tuples(st.floats(0.0, 1.5), st.integers(0, 130)), max_size=6),
    units=st.integers(min_value=0, max_value=130),
    gap=st.floats(0.0, 1.5),
)
def test_take_each_answers_as_take_one_at_a_time(
    rate: int, replicas: int, earlier: list[tuple[float, int]], units: int, gap: float
) -> None:
    """A batch's units at once (take_each) leave the bucket and answer every item as ``units`` calls of
    take would: the same grants, the same last header values, the same refusal, the same tokens after."""
    one, each = Limiter(rate, 4, replicas), Limiter(rate, 4, replicas)
    now = 0.0
    for step, n in earlier:  # the same history on both: some of it takes the bucket into debt
        now += step
        one.take_many("a", n, now, WALL + now)
        each.take_many("a", n, now, WALL + now)
    now += gap
    answers = [one.take("a", now, WALL + now) for _ in range(units)]
    granted = [a for a in answers if isinstance(a, Allowed)]
    refused = [a for a in answers if isinstance(a, RateLimited)]
    assert answers == granted + refused  # the granted ones come first
    taken = each.take_each("a", units, now, WALL + now)
    assert taken.granted == len(granted)
    assert taken.last == (granted[-1] if granted else None)
    assert all(r == taken.refused for r in refused) and (taken.refused is None) == (not refused)
    assert each._accounts.get("a") == one._accounts.get("a")
