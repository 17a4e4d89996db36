"""The WebSocket surface's rules: which subscriptions exist, what they cost, and the connection limits.

Pure data and small functions; the session (:mod:`gateway.pubsub.session`) applies them. Prices are
credits, like every other price, and are published in ``/pricing`` (``websocket``):

- a native subscription costs :data:`SUBSCRIBE_CREDITS` when the node accepts it (a refused one is
  refunded), and each notification delivered to the client :data:`NOTIFICATION_CREDITS`: the node
  did work for every one of them, and a flat per-message price is one a client can predict
  (``slotSubscribe`` at 2.5 slots per second is 9,000 credits an hour, $0.09 at the default rate);
- ``subscribeSignal`` costs :data:`SIGNAL_SUBSCRIBE_CREDITS` and each delivered event
  :data:`SIGNAL_EVENT_CREDITS` (docs/api.md's Signal billing);
- unsubscribing is free.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Native subscriptions: subscribe method -> (unsubscribe method, notification method).
NATIVE: dict[str, tuple[str, str]] = {
    "accountSubscribe": ("accountUnsubscribe", "accountNotification"),
    "logsSubscribe": ("logsUnsubscribe", "logsNotification"),
    "programSubscribe": ("programUnsubscribe", "programNotification"),
    "signatureSubscribe": ("signatureUnsubscribe", "signatureNotification"),
    "slotSubscribe": ("slotUnsubscribe", "slotNotification"),
    "rootSubscribe": ("rootUnsubscribe", "rootNotification"),
    "blockSubscribe": ("blockUnsubscribe", "blockNotification"),
    "slotsUpdatesSubscribe": ("slotsUpdatesUnsubscribe", "slotsUpdatesNotification"),
    "voteSubscribe": ("voteUnsubscribe", "voteNotification"),
}
UNSUBSCRIBE_OF: dict[str, str] = {unsub: sub for sub, (unsub, _) in NATIVE.items()}
#: Native subscriptions this gateway cannot offer on its node (``/capabilities`` says so): the local
#: chain produces neither block notifications nor votes.
UNAVAILABLE = frozenset({"blockSubscribe", "voteSubscribe"})

SIGNAL_SUBSCRIBE = "subscribeSignal"
SIGNAL_UNSUBSCRIBE = "signalUnsubscribe"
SIGNAL_NOTIFICATION = "signalNotification"
#: Sent before the socket closes 4002: which subscription ended and why.
ENDED_NOTIFICATION = "subscriptionEnded"

SUBSCRIBE_CREDITS = 1
NOTIFICATION_CREDITS = 1
SIGNAL_SUBSCRIBE_CREDITS = 5
SIGNAL_EVENT_CREDITS = 1


@dataclass(frozen=True)
class Limits:
    """Per-connection limits (docs/api.md's where it gives one)."""

    min_balance: int = 10  # close 4002 below this
    max_subscriptions: int = 100  # per connection, signals included
    messages_per_second: int = 50  # client frames; above it: close 4003
    message_burst: int = 100
    max_message_bytes: int = 64 * 1024  # a subscribe request is a few hundred bytes
    ping_interval_s: float = 25.0
    pong_timeout_s: float = 20.0
    balance_check_s: float = 5.0  # how often an idle connection's balance is looked at
    max_queued: int = 10_000  # undelivered messages before a slow client is dropped (close 1013)
    max_queued_bytes: int = 4 * 1024 * 1024  # and their bytes (at least one message is always queued)
    max_pending_calls: int = 256  # plain calls running or waiting to run; past it: close 4003
    max_connections_per_account: int = 32  # open sockets over the service (settings ws_max_connections_*)
    max_connections_per_address: int = 64


class Close:
    """Close codes (docs/api.md's Errors section, and 1013 for a client too slow to read)."""

    NORMAL = 1000
    POLICY_VIOLATION = 1008  # invalid or expired session token
    INTERNAL = 1011
    TRY_AGAIN_LATER = 1013  # the service is starting or unavailable; or the client reads too slowly
    AUTH_FAILED = 4001
    INSUFFICIENT_CREDITS = 4002
    RATE_LIMITED = 4003
    SPEND_CAP_REACHED = 4005  # the account's daily spend cap (docs/api.md, Spend cap)


def subscription_limit_message(limit: int) -> str:
    return f"Subscription limit reached ({limit}/{limit})"


def pricing_view(limits: Limits) -> dict[str, int | float]:
    """The ``websocket`` part of ``/pricing``."""
    return {
        "subscribe_credits": SUBSCRIBE_CREDITS,
        "notification_credits": NOTIFICATION_CREDITS,
        "signal_subscribe_credits": SIGNAL_SUBSCRIBE_CREDITS,
        "signal_event_credits": SIGNAL_EVENT_CREDITS,
        "unsubscribe_credits": 0,
        "minimum_balance": limits.min_balance,
        "max_subscriptions": limits.max_subscriptions,
        "max_messages_per_second": limits.messages_per_second,
        "max_connections_per_account": limits.max_connections_per_account,
        "max_connections_per_address": limits.max_connections_per_address,
        "ping_interval_s": limits.ping_interval_s,
    }
