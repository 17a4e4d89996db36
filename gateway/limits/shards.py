"""Account-owner shards: one owner per account of its rate bucket and concurrency budget, handing out
slices to the replicas. Pure: no I/O, clocks passed in (the actor is :mod:`gateway.limits.shard_actor`, the
replica's side :mod:`gateway.limits.slices`).

An account belongs to shard ``shard_of(pubkey, N)``. The shard keeps, per account, a token bucket
(``rps`` per second, holding at most ``burst``) and the concurrency limit, and per replica (a
*holder*) the tokens it was granted and has not reported spent or returned, and the slots it holds.
A replica asks with :class:`SliceRequest` and gets a :class:`SliceGrant`; it spends the tokens and
slots locally, with no call per request.

The rate bound. Let ``O`` be the tokens granted and not yet reported (outstanding). The bucket never
refills past ``burst - O``, so ``bucket + O <= burst`` always. Granting moves tokens from the bucket
to ``O``, a return moves them back, a report of spent tokens or an expiry removes them from ``O``;
only the refill (at most ``rps * t`` in ``t`` seconds) adds. Tokens spendable at the replicas are
part of ``O``, so over any window of ``W`` seconds the calls admitted by all replicas together are at
most ``burst + rps * W``: the bound of one process's bucket.

Expiry. Each exchange renews its holder for ``ttl_s``; a holder not heard from for that long is
dropped (its outstanding tokens and slots with it). The replica stops using what it holds at
``sent + ttl_s - margin`` (``sent``: when it sent the exchange, before the shard saw it), so it never
spends a token the shard has already forgotten.

A restarted shard (soft state, new ``epoch``) knows no holders, but slices the previous incarnation
granted stay spendable at the replicas until their deadline, at most ``ttl_s`` after it died. So a
restarted shard is *young* for ``ttl_s``: its buckets hold nothing and fill at ``rps`` only from the
end of that period, and it grants no new slots, taking each holder's slots in use (``need_slots``) as
given. The bound therefore holds across a restart too (tokens of the old incarnation and of the new
are never spendable beyond ``burst`` together), at the price of ``ttl_s`` of refusals after it (503,
as while it was down).
Replicas renew at least every ``ttl_s / 2`` while they hold slots, so by the end of the young period
the calls in flight everywhere are counted again (docs/architecture.md, Where state lives).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field

#: How long a holder's slice lives at the shard without an exchange.
SLICE_TTL_S = 1.0
#: Idle accounts (no holders, full bucket) are forgotten once this many are tracked.
PRUNE_AT = 10_000


def shard_of(pubkey: str, shards: int) -> int:
    """The shard that owns ``pubkey``: stable across processes and restarts (CRC-32 of the key)."""
    return zlib.crc32(pubkey.encode()) % max(1, shards)


def shard_name(index: int) -> str:
    return f"account-shard-{index}"


@dataclass(frozen=True, slots=True)
class SliceRequest:
    """One replica's exchange with an account's shard: what it did with its slice, what it wants.

    ``epoch`` and ``lease`` are the ones of its last grant (empty and 0 at first); reports under
    another lease are ignored (those tokens belong to an expired holder or a previous incarnation).
    """

    pubkey: str
    holder: str  # the replica's limiter (one id per process)
    epoch: str
    lease: int
    rps: int
    burst: int
    concurrency: int
    spent: int = 0  # tokens spent since the last report
    returned: int = 0  # unspent tokens given back
    want_tokens: int = 0
    whole: bool = False  # want_tokens all or none (a bulk request's items)
    need_slots: int = 0  # slots in use now: kept whatever the budget says
    want_slots: int = 0  # slots wanted in all (at least need_slots)


@dataclass(frozen=True, slots=True)
class SliceGrant:
    epoch: str
    lease: int
    tokens: int  # granted by this exchange
    slots: int  # the holder's slots in all
    remaining: int  # whole tokens left in the account's bucket
    wait_s: float  # until the bucket holds a token again (0.0 when it holds one)
    ttl_s: float
    young_s: float = 0.0  # a restarted shard: how long it still grants nothing new


@dataclass(slots=True)
class _Holder:
    lease: int
    expires: float
    tokens: int = 0  # granted, not reported spent or returned
    slots: int = 0


@dataclass(slots=True)
class _Account:
    rps: int
    burst: int
    tokens: float
    updated: float
    outstanding: int = 0  # sum of the holders' tokens
    slots: int = 0  # sum of the holders' slots
    holders: dict[str, _Holder] = field(default_factory=dict)

    def refill(self, now: float) -> None:
        if now > self.updated:
            cap = max(0.0, float(self.burst - self.outstanding))
            if self.tokens < cap:
                self.tokens = min(cap, self.tokens + (now - self.updated) * self.rps)
            self.updated = now

    def drop(self, holder: str) -> None:
        h = self.holders.pop(holder)
        self.outstanding -= h.tokens
        self.slots -= h.slots


class ShardBook:
    """The accounts one shard owns. ``restarted_at``: when this incarnation started, if it replaces
    one that may have granted slices (None: the first start, buckets start full)."""

    def __init__(self, epoch: str, *, ttl_s: float = SLICE_TTL_S, restarted_at: float | None = None) -> None:
        self.epoch = epoch
        self.ttl_s = ttl_s
        self.young_until = restarted_at + ttl_s if restarted_at is not None else -math.inf
        self._accounts: dict[str, _Account] = {}
        self._leases = 0
        self._prune_at = PRUNE_AT

    def exchange(self, req: SliceRequest, now: float) -> SliceGrant:
        acct = self._account(req, now)
        for name in [name for name, h in acct.holders.items() if h.expires <= now]:
            acct.drop(name)
        h = acct.holders.get(req.holder)
        if h is not None and req.epoch == self.epoch and req.lease == h.lease:
            spent = min(req.spent, h.tokens)
            returned = min(req.returned, h.tokens - spent)
            h.tokens -= spent + returned
            acct.outstanding -= spent + returned
            acct.tokens += returned  # bucket + outstanding unchanged
        else:  # a holder the shard does not know under that lease: what it reports is not this lease's
            if h is not None:
                acct.drop(req.holder)
            self._leases += 1
            h = acct.holders[req.holder] = _Holder(self._leases, now)
        acct.refill(now)  # after the reports: spending reported frees the room it took (bucket + O <= burst)
        granted = self._tokens(acct, req)
        acct.tokens -= granted
        acct.outstanding += granted
        h.tokens += granted
        others = acct.slots - h.slots
        if now < self.young_until:  # young: the calls in flight are being counted again
            slots = max(req.need_slots, min(req.want_slots, h.slots))
        else:
            slots = max(req.need_slots, min(req.want_slots, req.concurrency - others))
        acct.slots += slots - h.slots
        h.slots = slots
        h.expires = now + self.ttl_s
        wait = 0.0 if acct.tokens >= 1 else (1 - acct.tokens) / acct.rps
        young = max(0.0, self.young_until - now)
        return SliceGrant(self.epoch, h.lease, granted, slots, max(0, int(acct.tokens)), wait, self.ttl_s, young)

    @staticmethod
    def _tokens(acct: _Account, req: SliceRequest) -> int:
        """What the bucket gives. All or none, a request of more than the burst is given when the bucket
        is full and leaves it in debt (as :meth:`gateway.limits.rules.Limiter.take_many`): the calls after
        it wait until the rate has paid for it, so the average rate holds."""
        want = max(0, req.want_tokens)
        if not req.whole:
            return min(want, max(0, int(acct.tokens)))
        if acct.tokens >= min(want, acct.burst):
            return want
        return 0

    def _account(self, req: SliceRequest, now: float) -> _Account:
        acct = self._accounts.get(req.pubkey)
        rps, burst = max(1, req.rps), max(1, req.burst)
        if acct is None:
            if len(self._accounts) >= self._prune_at:
                self.prune(now)
                self._prune_at = max(PRUNE_AT, 2 * len(self._accounts))
            tokens = min(float(burst), max(0.0, (now - self.young_until) * rps))  # full unless just restarted
            acct = self._accounts[req.pubkey] = _Account(rps, burst, tokens, max(now, self.young_until))
        elif acct.rps != rps or acct.burst != burst:  # the per-account override changed
            acct.refill(now)
            acct.rps, acct.burst = rps, burst
            acct.tokens = min(acct.tokens, float(max(0, burst - acct.outstanding)))
        return acct

    def prune(self, now: float) -> int:
        """Forget idle accounts: no live holder and a full bucket (their state equals a fresh one)."""
        idle = []
        for pubkey, acct in self._accounts.items():
            for name in [name for name, h in acct.holders.items() if h.expires <= now]:
                acct.drop(name)
            acct.refill(now)
            if not acct.holders and acct.tokens >= acct.burst:
                idle.append(pubkey)
        for pubkey in idle:
            del self._accounts[pubkey]
        return len(idle)

    def status(self, now: float) -> dict[str, object]:
        return {"epoch": self.epoch, "accounts": len(self._accounts), "young": now < self.young_until}
