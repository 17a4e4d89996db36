"""Rate and concurrency from the account-shard actors: a replica spends slices of each account's limits
locally and asks the account's shard for more before it runs out (the rules and the bound are in
:mod:`gateway.limits.shards`; docs/architecture.md, Where state lives).

:class:`SlicedLimiter` is the limits of the metering stage (:class:`gateway.limits.rules.AccountLimits`)
when ``account_shards`` is set. Per account it holds ``tokens`` (rate units granted by the shard) and
``cap`` (slots granted), and spends them with no cross-process call: :meth:`take` and :meth:`acquire`
are as cheap as :class:`gateway.limits.rules.Limiter`'s. Only :meth:`ready`, when the slice cannot
decide a call (no tokens or no free slot, and the shard not known to be empty), returns an exchange to
await. Once a slice falls to half of its size the next exchange is sent in the background; a tick
gives back tokens and slots unused for ``idle_s``, reports spent tokens and renews what it holds.

Fail closed: a shard that cannot be reached (dead, being restarted, too slow) raises
:class:`ShardUnavailable` from the awaited exchange, and the stage answers 503 with ``Retry-After``.
What the replica still holds stays usable until its deadline (``sent + ttl - margin``), never after:
past it the shard may have forgotten the slice.

The shards are reached through :class:`ShardClient`: the Ray actors (``actors/shard_client.py``), or
:class:`LocalShards` in this process (tests, benches).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from gateway.base.stopping import cancel_and_wait
from gateway.limits import metrics
from gateway.limits.rules import Allowed, ConcurrencyLimited, RateLimited, Taken, allowed
from gateway.limits.shards import SLICE_TTL_S, ShardBook, SliceGrant, SliceRequest, shard_of

log = logging.getLogger(__name__)

#: A slice is this many seconds of the account's rate (at least one unit, at least what the call needs).
SLICE_S = 0.1
#: What a replica holds and has not used for this long goes back to the shard.
IDLE_S = 0.25
TICK_S = 0.1
#: A slice is not used later than this before the shard would forget it.
MARGIN_S = 0.25
#: An exchange that takes longer fails (the call is refused 503).
TIMEOUT_S = 0.5
#: After a failed exchange, calls that need the shard are refused at once for this long.
DOWN_S = 0.5
#: After the shard had no slot to give, the next ask waits this long (a flood of 429s is not a flood of calls).
SLOT_BACKOFF_S = 0.05
#: Exchanges a waiting call sits through at most (each bounded by TIMEOUT_S); then the slice decides.
FILL_ROUNDS = 4
#: The Retry-After of a refusal because the shard could not be reached.
RETRY_AFTER_S = 1


class ShardUnavailable(Exception):
    """The account's shard could not be reached: the call is refused, never admitted unmetered."""


class ShardClient(Protocol):
    shards: int

    async def exchange(self, shard: int, request: SliceRequest) -> SliceGrant:
        """Raises :class:`ShardUnavailable` when the shard cannot answer."""
        ...


class LocalShards:
    """The shards as objects of this process: the same books, no actor (tests, benches)."""

    def __init__(self, shards: int, *, ttl_s: float = SLICE_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.shards = shards
        self.books = [ShardBook(f"{n}-{uuid.uuid4().hex[:12]}", ttl_s=ttl_s) for n in range(shards)]
        self.clock = clock

    async def exchange(self, shard: int, request: SliceRequest) -> SliceGrant:
        return self.books[shard].exchange(request, self.clock())


@dataclass(slots=True)
class _Slice:
    """What this replica holds of one account's limits."""

    shard: int
    rps: int
    concurrency: int
    size: int = 0  # rate units a slice holds (:func:`slice_size` of ``rps``): set with ``rps``, read on every take
    epoch: str = ""
    lease: int = 0
    tokens: int = 0  # spendable rate units
    spent: int = 0  # spent since the last report
    cap: int = 0  # slots granted
    active: int = 0  # calls in flight
    deadline: float = 0.0  # nothing held is used from then on
    renew_at: float = 0.0
    remaining: int = 0  # the shard's bucket at the last exchange (for the headers)
    tokens_at: float = 0.0  # the shard has no token before this
    slots_at: float = 0.0  # the shard had no slot: not asked again before this
    used_at: float = 0.0
    peak: int = 0  # the most calls in flight since the last trim
    trimmed_at: float = 0.0
    failed: bool = False  # the last exchange could not reach the shard
    young_until: float = 0.0  # the shard was restarted: it grants nothing new before this
    demand: int = 0  # units of the calls waiting for an exchange
    task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.size = slice_size(self.rps)

    def step(self) -> int:
        """Slots asked for beyond those in use when the replica runs out."""
        return 1 + self.concurrency // 16


def slice_size(rps: int) -> int:
    """A slice: ``SLICE_S`` of the account's rate, at least one unit."""
    return max(1, math.ceil(rps * SLICE_S))


class SlicedLimiter:
    """Every account's slices held by this replica. ``now`` is monotonic, ``wall`` is unix time."""

    def __init__(
        self,
        client: ShardClient,
        default_rps: int,
        default_concurrency: int,
        *,
        idle_s: float = IDLE_S,
        timeout_s: float = TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.default_rps = default_rps
        self.default_concurrency = default_concurrency
        self.idle_s = idle_s
        self.timeout_s = timeout_s
        self.clock = clock
        self.holder = uuid.uuid4().hex
        self.exchanges = 0
        self._accounts: dict[str, _Slice] = {}
        self._down_until: dict[int, float] = {}
        self._ticker: asyncio.Task[None] | None = None

    # -- the hot path ---------------------------------------------------------------------------

    def ready(
        self, pubkey: str, units: int, now: float, *, rps: int | None, concurrency: int | None, whole: bool = False
    ) -> Awaitable[None] | None:
        s = self._accounts.get(pubkey)
        if s is not None and self._decides(s, units, now):
            return None  # the common case
        return self._fill(pubkey, units, now, rps, concurrency, whole)

    def acquire(
        self, pubkey: str, now: float, *, rps: int | None = None, concurrency: int | None = None
    ) -> ConcurrencyLimited | None:
        s = self._accounts.get(pubkey)
        if s is None or s.active >= s.cap or now >= s.deadline:
            return ConcurrencyLimited(concurrency or self.default_concurrency)
        s.active += 1
        s.used_at = now
        if s.active > s.peak:
            s.peak = s.active
        if s.active >= s.cap and s.task is None and now >= s.slots_at:
            self._start(pubkey, s, 0, False, now)  # the next slot before it is needed
        return None

    def release(self, pubkey: str) -> None:
        s = self._accounts.get(pubkey)
        if s is not None and s.active > 0:
            s.active -= 1

    def take(self, pubkey: str, now: float, wall: float, rps: int | None = None) -> Allowed | RateLimited:
        s = self._accounts.get(pubkey)
        if s is None or s.tokens < 1 or now >= s.deadline:
            return self._limited(s, rps, now, wall)
        s.tokens -= 1
        s.spent += 1
        s.used_at = now
        if s.tokens <= s.size // 2 and s.task is None and now >= s.tokens_at:
            self._start(pubkey, s, max(s.size, s.demand), False, now)  # prefetch at the low-water mark
        return self._allowed(s, wall)

    def take_each(self, pubkey: str, units: int, now: float, wall: float, rps: int | None = None) -> Taken:
        """As ``units`` calls of :meth:`take` in a row, in one step (a batch's items): the prefetch starts
        where the calls one at a time would start it, so it reports the same ``spent``."""
        if units <= 0:
            return Taken(0, None, None)
        s = self._accounts.get(pubkey)
        granted = 0 if s is None or now >= s.deadline else max(0, min(units, s.tokens))
        if granted:
            assert s is not None
            first = max(1, s.tokens - s.size // 2)  # the unit after which take would start the prefetch
            if first <= granted and s.task is None and now >= s.tokens_at:
                self._spend(s, first, now)
                self._start(pubkey, s, max(s.size, s.demand), False, now)
                self._spend(s, granted - first, now)
            else:
                self._spend(s, granted, now)
        last = self._allowed(s, wall) if s is not None and granted else None
        return Taken(granted, last, None if granted == units else self._limited(s, rps, now, wall))

    @staticmethod
    def _spend(s: _Slice, units: int, now: float) -> None:
        s.tokens -= units
        s.spent += units
        s.used_at = now

    def take_many(
        self, pubkey: str, units: int, now: float, wall: float, rps: int | None = None
    ) -> Allowed | RateLimited:
        s = self._accounts.get(pubkey)
        if s is None or s.tokens < units or now >= s.deadline:
            return self._limited(s, rps, now, wall)
        s.tokens -= units
        s.spent += units
        s.used_at = now
        return self._allowed(s, wall)

    def peek(self, pubkey: str, now: float, wall: float, rps: int | None = None) -> Allowed:
        s = self._accounts.get(pubkey)
        if s is None:
            limit = rps or self.default_rps
            return Allowed(limit, limit, math.ceil(wall))
        return self._allowed(s, wall)

    @staticmethod
    def _allowed(s: _Slice, wall: float) -> Allowed:
        # comparisons, not max(): this runs for every admitted item
        remaining = s.tokens + s.remaining
        if remaining < 0:
            remaining = 0
        missing = s.rps - remaining  # units until the bucket is full again
        return allowed((s.rps, remaining, math.ceil(wall + missing / s.rps) if missing > 0 else math.ceil(wall)))

    def _limited(self, s: _Slice | None, rps: int | None, now: float, wall: float) -> RateLimited:
        limit = rps or self.default_rps
        wait = max(0.0, s.tokens_at - now) if s is not None else 0.0
        return RateLimited(limit, max(1, math.ceil(wait)), math.ceil(wall + max(wait, 1 / max(1, limit))))

    # -- exchanges ------------------------------------------------------------------------------

    async def _fill(
        self, pubkey: str, units: int, now: float, rps: int | None, concurrency: int | None, whole: bool
    ) -> None:
        """Exchange with the shard until the call can be decided here; raise ShardUnavailable when it
        cannot be reached and what this replica holds does not decide the call.

        Callers waiting together add up their units (``demand``), so one exchange asks for a burst's
        worth. A caller keeps waiting until an exchange it sent itself has answered (one sent by the
        tick or by another caller may have asked for nothing: a renewal, a give-back), for at most
        ``FILL_ROUNDS`` exchanges: past them, its own account's other calls are taking every answer
        and what the slice holds decides (a 429)."""
        s = self._slice(pubkey, rps, concurrency)
        s.demand += units
        try:
            for _ in range(FILL_ROUNDS):
                if now < s.young_until:  # refused as while it was down: it grants nothing new yet
                    raise ShardUnavailable(f"account shard {s.shard} is restarting")
                own, lease = s.task is None, (s.epoch, s.lease)
                if own:
                    short = (s.tokens < units or now >= s.deadline) and now >= s.tokens_at
                    want = (units if whole else max(s.demand - s.tokens, s.size)) if short else 0
                    slot = (s.active >= s.cap and now >= s.slots_at) or now >= s.deadline
                    if self._start(pubkey, s, want, whole, now, slot=slot) is None:
                        raise ShardUnavailable(f"account shard {s.shard} is unavailable")
                task = s.task
                assert task is not None
                await asyncio.shield(task)  # one exchange at a time per account; a caller gone away leaves it be
                now = self.clock()
                if self._decides(s, units, now):
                    return
                if s.failed:
                    raise ShardUnavailable(f"account shard {s.shard} is unavailable")
                if own and (s.epoch, s.lease) == lease:  # asked for this call and given less: refused (429)
                    return
            # The account's own calls took what every answer brought: refused by the slice (429).
        finally:
            s.demand -= units

    @staticmethod
    def _decides(s: _Slice, units: int, now: float) -> bool:
        """Whether the slice decides a call of ``units`` here: admitted, or refused by what the shard said."""
        if now >= s.deadline:
            return False
        return (s.tokens >= units or now < s.tokens_at) and (s.active < s.cap or now < s.slots_at)

    def _slice(self, pubkey: str, rps: int | None, concurrency: int | None) -> _Slice:
        limit, slots = rps or self.default_rps, concurrency or self.default_concurrency
        s = self._accounts.get(pubkey)
        if s is None:
            s = self._accounts[pubkey] = _Slice(shard_of(pubkey, self.client.shards), limit, slots)
            self._start_ticker()
        if s.rps != limit:  # an override that changed reaches the shard with this exchange
            s.rps, s.size = limit, slice_size(limit)
        s.concurrency = slots
        return s

    def _start(
        self,
        pubkey: str,
        s: _Slice,
        want: int,
        whole: bool,
        now: float,
        *,
        slot: bool = True,
        give_back: bool = False,
        slots_to: int | None = None,
    ) -> asyncio.Task[None] | None:
        """Send one exchange (None when the shard is known to be down: refused at once). ``give_back``:
        the unspent tokens and unused slots go back; ``slots_to``: the slots beyond it go back."""
        if now < self._down_until.get(s.shard, 0.0):
            return None
        returned = s.tokens if give_back else 0
        s.tokens -= returned
        if give_back:
            slots_to = s.active
        if slots_to is not None:
            s.cap = want_slots = max(s.active, slots_to)  # the slots given back are not used from now on
        elif slot or s.active >= s.cap:
            want_slots = s.active + s.step()
        else:
            want_slots = s.cap
        request = SliceRequest(
            pubkey,
            self.holder,
            s.epoch,
            s.lease,
            s.rps,
            s.rps,  # the burst is the per-second rate, as in gateway/limits/rules.py
            s.concurrency,
            spent=s.spent,
            returned=returned,
            want_tokens=want,
            whole=whole,
            need_slots=s.active,
            want_slots=max(s.active, want_slots),
        )
        s.spent = 0
        s.task = asyncio.get_running_loop().create_task(self._exchange(s, request, now))
        return s.task

    async def _exchange(self, s: _Slice, request: SliceRequest, sent: float) -> None:
        started = time.perf_counter()
        try:
            self.exchanges += 1
            try:
                grant = await asyncio.wait_for(self.client.exchange(s.shard, request), self.timeout_s)
            except (ShardUnavailable, TimeoutError) as exc:
                s.failed = True
                self._down_until[s.shard] = self.clock() + DOWN_S
                log.warning("account shard %d: %s", s.shard, str(exc) or "timed out")
                metrics.SLICE_EXCHANGES.inc(("unavailable",))
                return
            s.failed = False
            self._apply(s, request, grant, sent)
            metrics.SLICE_EXCHANGES.inc(("answered",))
        finally:
            s.task = None
            metrics.SLICE_SECONDS.observe(time.perf_counter() - started)

    def _apply(self, s: _Slice, request: SliceRequest, grant: SliceGrant, sent: float) -> None:
        now = self.clock()
        if grant.epoch != s.epoch or grant.lease != s.lease:
            # A new lease: what was held belongs to an expired one or to a previous incarnation of the
            # shard (which no longer counts it): dropped, and spending since the send is not this lease's.
            s.tokens, s.spent = 0, 0
            s.epoch, s.lease = grant.epoch, grant.lease
        s.tokens += grant.tokens
        s.cap = grant.slots
        s.deadline = sent + grant.ttl_s - MARGIN_S
        s.renew_at = sent + grant.ttl_s / 2
        s.remaining = grant.remaining
        s.tokens_at = now + grant.wait_s if grant.tokens < request.want_tokens else 0.0
        s.slots_at = now + SLOT_BACKOFF_S if grant.slots < request.want_slots else 0.0
        s.young_until = now + grant.young_s
        if grant.young_s:  # calls it cannot decide go to _fill, which refuses them 503 without asking
            s.tokens_at = s.slots_at = 0.0

    # -- the tick: give back, report, renew -----------------------------------------------------

    def _start_ticker(self) -> None:
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.get_running_loop().create_task(self._tick_forever())

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self.tick(self.clock())
            except Exception:  # never let the tick die: the slices would stop being renewed
                log.exception("account slices: tick failed")

    def tick(self, now: float) -> None:
        """Give back what sat unused, report spending, renew what is held; forget idle accounts."""
        for pubkey, s in list(self._accounts.items()):
            if s.task is not None:
                continue
            idle = now - s.used_at >= self.idle_s
            holds = s.tokens > 0 or s.cap > 0
            trim, keep = now - s.trimmed_at >= self.idle_s, s.cap
            if trim:
                keep, s.peak, s.trimmed_at = s.peak + s.step(), s.active, now
            if idle and (s.tokens > 0 or s.cap > s.active):
                self._start(pubkey, s, 0, False, now, slot=False, give_back=True)
            elif trim and s.cap > keep:  # busy, but holding more slots than it used: the rest go back
                self._start(pubkey, s, 0, False, now, slot=False, slots_to=keep)
            elif (s.spent > 0 and (idle or now >= s.renew_at)) or (holds and now >= s.renew_at):
                self._start(pubkey, s, 0, False, now, slot=False)
            elif idle and not holds and s.active == 0 and s.spent == 0 and s.demand == 0:
                del self._accounts[pubkey]

    async def close(self) -> None:
        """Stop the tick, then give every shard back what this replica holds and report what it spent, so
        that the other replicas get those tokens and slots now rather than when the shard forgets this
        one (``SLICE_TTL_S``). Each exchange ends within ``timeout_s``; a shard that cannot be reached
        forgets the slices by itself. Slots of calls still in flight are kept until that expiry."""
        task, self._ticker = self._ticker, None
        await cancel_and_wait(task)
        await self._exchanges_done()  # an exchange under way decides what is held: wait for its answer
        now = self.clock()
        for pubkey, s in self._accounts.items():
            if now < s.deadline and (s.tokens > 0 or s.cap > s.active or s.spent > 0):
                self._start(pubkey, s, 0, False, now, slot=False, give_back=True)
        await self._exchanges_done()

    async def _exchanges_done(self) -> None:
        tasks = [s.task for s in self._accounts.values() if s.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
