"""The gRPC stream's rules: its prices, its limits, and how a refusal reads as a gRPC status.

Pure data and small functions; :mod:`gateway.grpc` applies them. Prices are docs/api.md's "Signal billing"
line for Yellowstone-type gRPC, in credits like every other price, and are published in ``/pricing``
(``grpc``):

- each unary call costs :data:`UNARY_CREDITS` (refunded when the node failed it);
- a ``Subscribe`` stream costs :data:`SUBSCRIBE_CREDITS` when it is established, which pays its first
  interval, then :data:`INTERVAL_CREDITS` at the start of each further interval while it is open (60 s
  by default): an hour of one stream is 1 + 59 × 60 = 3,541 credits, about $0.035 at the default rate.
  A stream whose account cannot pay the next interval ends with ``RESOURCE_EXHAUSTED``.
  Intervals count the time a stream covers, not only the time it is open: a ``from_slot`` replay
  covers from when the replayed slot came, and a stream counts as held already what its account's ended
  streams held past their last paid interval (:mod:`gateway.grpc.store`), so an account pays
  for the stream time it held, summed over its reconnects; an account opens at most
  ``max_opens_per_minute`` streams a minute.

Refusals map onto gRPC's codes: no or a bad ``x-token`` is ``UNAUTHENTICATED``; no account, no
credits, a rate limit, the per-account stream cap, the filter budget and a client too slow to read are
``RESOURCE_EXHAUSTED`` (a quota ran out: the status message says which); a suspended account is
``PERMISSION_DENIED`` with ``ACCOUNT_SUSPENDED`` in the message, and its open streams end so at once;
the stores or the node being down is ``UNAVAILABLE``.

The filter budget: a process asks the node for the union of its streams' filters in one subscription,
so the union may hold no more distinct filters of a kind than the node accepts in one request
(``max_filters``), and one account's streams together at most ``account_filters`` of them, so that no
account can take the whole budget (docs/api.md, gRPC).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gateway.core.errors import ProxyError, RpcCode
from geyser_proto.filters import Filters

SUBSCRIBE_CREDITS = 1
INTERVAL_CREDITS = 60
UNARY_CREDITS = 1
#: Bytes waiting for one stream before it is cut off (besides the count, ``grpc_max_queued``).
MAX_QUEUED_BYTES = 64 * 2**20

MISSING_TOKEN = "missing x-token metadata: send a session token or an API key as `x-token`"
INSUFFICIENT = f"insufficient credits ({int(RpcCode.INSUFFICIENT_CREDITS)})"


@dataclass(frozen=True)
class StreamLimits:
    """One gRPC server process's limits (settings ``grpc_*``)."""

    max_streams_per_account: int = 10
    max_streams_per_address: int = 40  # open streams from one client address on this process
    billing_interval_s: float = 60.0
    ping_interval_s: float = 15.0
    max_queued: int = 10_000
    max_queued_bytes: int = MAX_QUEUED_BYTES
    max_filters: int = 64  # distinct filters of a kind in the process's upstream subscription
    account_filters: int = 16  # of which one account's streams may use together
    max_opens_per_minute: int = 30  # Subscribe streams one account may open per minute, over the service


def account_share(max_filters: int, share: float) -> int:
    """One account's part of ``max_filters`` (at least one filter)."""
    return max(1, math.floor(max_filters * share))


def account_budget_message(kind: str, count: int, limits: StreamLimits) -> str:
    return (
        f"filter budget exceeded: this account's streams on this server would use {count} distinct {kind} "
        f"filters (at most {limits.account_filters} per account; the stream is closed: ask for fewer)"
    )


def process_budget_message(kind: str, count: int, limits: StreamLimits, keyless: bool = False) -> str:
    if keyless:
        return (
            f"filter budget exceeded: this server's streams would use {count} distinct {kind} filters without "
            f"keys (at most {limits.max_filters}: each is tried on every update; the stream is closed: name the "
            "accounts, owners or transaction keys to watch, or retry later)"
        )
    return (
        f"filter budget exceeded: this server's streams would use {count} distinct {kind} filters (at most "
        f"{limits.max_filters}, what the node accepts in one subscription; the stream is closed: retry later)"
    )


def address_limit_message(limit: int) -> str:
    return f"stream limit reached: {limit} open Subscribe streams from this address ({limit}/{limit})"


#: Filter changes (SubscribeRequests other than pings) one stream may send: this many at once, then this many a
#: second (docs/api.md, gRPC limits): each one re-indexes the stream's keys and may reopen the upstream subscription.
FILTER_CHANGES_BURST = 10
FILTER_CHANGES_PER_S = 1.0


#: Keys an account's filter changes may re-index on one server process (the keys a change drops plus the
#: keys it sets): this many at once, then this many a second, over all the account's streams, reopened ones
#: included (docs/api.md, gRPC limits). A change of the largest request (10,000 keys in place of 10,000)
#: costs 20,000: one at once, then one every 10 s. Index work grows with keys, not requests.
KEY_CHANGES_BURST = 20_000
KEY_CHANGES_PER_S = 2_000.0
_IDLE_ACCOUNTS = 10_000  # buckets kept before the full ones (nothing spent lately) are forgotten


class ChangeRate:
    """A token bucket (pure: the caller gives the time): one stream's filter changes, or an account's keys."""

    def __init__(self, burst: float = FILTER_CHANGES_BURST, per_s: float = FILTER_CHANGES_PER_S) -> None:
        self.burst, self.per_s = burst, per_s
        self.tokens = float(burst)
        self.at: float | None = None

    def take(self, now: float, cost: float = 1) -> bool:
        self.refill(now)
        if self.tokens < cost:
            return False
        self.tokens -= cost
        return True

    def refill(self, now: float) -> None:
        if self.at is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_s)
        self.at = now


class KeyChanges:
    """Each account's bucket of re-indexed keys on this process (:data:`KEY_CHANGES_BURST`)."""

    def __init__(self, burst: float = KEY_CHANGES_BURST, per_s: float = KEY_CHANGES_PER_S) -> None:
        self.burst, self.per_s = burst, per_s
        self._accounts: dict[str, ChangeRate] = {}

    def take(self, pubkey: str, now: float, cost: int) -> bool:
        bucket = self._accounts.get(pubkey)
        if bucket is None:
            if len(self._accounts) >= _IDLE_ACCOUNTS:
                self._forget_full(now)
            bucket = self._accounts[pubkey] = ChangeRate(self.burst, self.per_s)
        return bucket.take(now, cost)

    def _forget_full(self, now: float) -> None:
        for pubkey, bucket in list(self._accounts.items()):
            bucket.refill(now)
            if bucket.tokens >= bucket.burst:
                del self._accounts[pubkey]


def filter_keys(filters: Filters) -> int:
    """The keys ``filters`` put in the fan-out's indexes."""
    keys = sum(len(f.accounts) + len(f.owners) for _, f in filters.accounts)
    for _, t in (*filters.transactions, *filters.transactions_status):
        keys += len(t.include) + len(t.exclude) + len(t.required)
    return keys


def key_rate_message() -> str:
    return (
        f"filter key rate exceeded: an account's filter changes may re-index at most {KEY_CHANGES_BURST:,} keys "
        f"at once and {KEY_CHANGES_PER_S:,.0f} a second (the keys a change drops plus those it sets); the "
        "stream is closed"
    )


def change_rate_message() -> str:
    return (
        f"filter change rate exceeded: at most {FILTER_CHANGES_BURST} SubscribeRequests at once and "
        f"{FILTER_CHANGES_PER_S:g} a second on one stream (pings excepted); the stream is closed"
    )


def open_rate_message(limit: int) -> str:
    return (
        f"stream open rate exceeded: {limit} Subscribe streams opened by this account in the last minute "
        f"(at most {limit} a minute); retry shortly"
    )


def stream_limit_message(limit: int) -> str:
    return f"stream limit reached: {limit} open Subscribe streams per account ({limit}/{limit})"


def interval_unpaid_message(interval_s: float) -> str:
    return (
        f"{INSUFFICIENT}: the stream's next {interval_s:g} s interval costs {INTERVAL_CREDITS} credits; "
        "the stream is closed (deposit USDC, then subscribe again)"
    )


def replay_out_of_range_message(from_slot: int, oldest: int, newest: int, commitment: int, window: int) -> str:
    level = ("processed", "confirmed", "finalized")[commitment]
    return (
        f"from_slot {from_slot} is not available: the oldest slot available is {oldest} (at {level} commitment; "
        f"newest {newest}; this server keeps the last {window} slots of the feed, less under a flood, and none "
        "from before it started); subscribe with a from_slot from it on, or without from_slot"
    )


def replay_unavailable_message() -> str:
    return (
        "from_slot: this server's replay log holds no slot yet (it just started, or its feed from the node just "
        "resumed); retry in a moment"
    )


def replay_gap_refusal(emptied: bool, oldest: int | None) -> tuple[str, str]:
    """How a replay that lost the updates it had still to send ends (the status's name, its message)."""
    now = f"the oldest slot available is now {oldest}" if oldest is not None else "no slot is held now"
    if emptied:
        return "UNAVAILABLE", (
            "the replay log was emptied before this replay was sent (the feed from the node was interrupted, or one "
            f"slot outgrew the log): {now}; subscribe again with from_slot"
        )
    return "OUT_OF_RANGE", (
        f"the client read its replay too slowly: the updates it had still to receive left the replay log; {now}"
    )


def refusal(exc: ProxyError) -> tuple[str, str]:
    """The gRPC status (code name, message) of a refusal of the shared auth and billing stages."""
    if exc.status == 401:
        return "UNAUTHENTICATED", exc.message
    if exc.status == 402:
        if exc.rpc_code == RpcCode.PAYMENT_REQUIRED:
            deposit = exc.data.get("deposit_address") if isinstance(exc.data, dict) else None
            where = f" (deposit address {deposit})" if deposit else ""
            return "RESOURCE_EXHAUSTED", f"payment required ({int(RpcCode.PAYMENT_REQUIRED)}): {exc.message}{where}"
        return "RESOURCE_EXHAUSTED", f"{INSUFFICIENT}: {exc.message}"
    if exc.status == 403:
        return "PERMISSION_DENIED", f"{exc.constant}: {exc.message}"
    if exc.status == 429:
        return "RESOURCE_EXHAUSTED", exc.message
    if exc.status in (502, 503, 504):
        return "UNAVAILABLE", exc.message
    return "INTERNAL", exc.message


def pricing_view(limits: StreamLimits) -> dict[str, int | float | str]:
    """The ``grpc`` part of ``/pricing``."""
    return {
        "unary_credits": UNARY_CREDITS,
        "subscribe_credits": SUBSCRIBE_CREDITS,
        "interval_credits": INTERVAL_CREDITS,
        "interval_s": limits.billing_interval_s,
        "max_streams_per_account": limits.max_streams_per_account,
        "max_streams_per_address": limits.max_streams_per_address,
        "max_stream_opens_per_minute": limits.max_opens_per_minute,
        "billed": "stream time covered: a from_slot replay counts from the replayed slot, and what an account's "
        "ended streams held past their last paid interval counts in its next stream (summed over reconnects)",
        "ping_interval_s": limits.ping_interval_s,
        "max_queued_updates": limits.max_queued,
        "max_filters_per_server": limits.max_filters,
        "max_filters_per_account": limits.account_filters,
    }
