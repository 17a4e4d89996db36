"""Webhooks' rules: subscription kinds, prices and caps, the delivery signature, event ids, the retry
schedule, and which addresses a delivery may never reach. Pure; storage, sources and the dispatcher build on it.

Delivery headers (docs/api.md's Events section)::

    X-Webhook-Signature: sha256=<hex HMAC-SHA256, keyed with the subscription's secret, over
                         "{event_id}.{timestamp}.{body}">
    X-Webhook-Timestamp: <unix seconds at signing>
    X-Webhook-Event-Id:  evt_{webhook_id}_{job_id}   (the same on every attempt: receivers de-duplicate)
    X-Webhook-Id:        <webhook id>
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import random
import secrets
from datetime import datetime
from typing import Any

import orjson

from gateway.core.subscriptions import NOTIFICATION_CREDITS, SIGNAL_EVENT_CREDITS
from gateway.webhooks.events import LIFECYCLE_EVENTS, SIGNAL_EVENT_PREFIX

FILTER_TYPES = ("account", "program", "my_account", "lifecycle", "signal")
#: Subscriptions an account may hold (deleted ones do not count). Chosen here.
MAX_WEBHOOKS_PER_ACCOUNT = 25
#: Addresses the transaction watches follow at most, over every account (the longest-watched first).
MAX_WATCHED_ADDRESSES = 5_000
#: A webhook is created only with a balance of at least this: its deliveries are paid (docs/api.md).
MIN_BALANCE_TO_CREATE = 1

#: Credits per delivery, charged once per event before its first attempt. A transaction delivery
#: costs what a ``logsSubscribe`` notification of the same transaction costs on ``/ws``; a signal
#: delivery what a ``signalNotification`` costs. Lifecycle deliveries are the account's own news: free.
TRANSACTION_DELIVERY_CREDITS = NOTIFICATION_CREDITS
SIGNAL_DELIVERY_CREDITS = SIGNAL_EVENT_CREDITS


SIGNATURE_HEADER = "X-Webhook-Signature"
TIMESTAMP_HEADER = "X-Webhook-Timestamp"
EVENT_ID_HEADER = "X-Webhook-Event-Id"
WEBHOOK_ID_HEADER = "X-Webhook-Id"

#: Seconds before attempt n+1 after attempt n failed (n = 1..): then the job is dead. Chosen here:
#: eight attempts over about an hour and a half, each delay with up to 20% jitter.
RETRY_DELAYS_S = (5, 30, 120, 300, 600, 1200, 3600)
MAX_ATTEMPTS = len(RETRY_DELAYS_S) + 1
#: A receiver's Retry-After is honoured up to this many seconds.
MAX_RETRY_AFTER_S = 3600


def pricing_view() -> dict[str, Any]:
    """The ``webhooks`` part of ``/pricing``. ``lifecycle_events`` is the list a lifecycle subscription may
    name (an addition to the interface): the account page offers them from here, not from a copy."""
    return {
        "transaction_delivery_credits": TRANSACTION_DELIVERY_CREDITS,
        "signal_delivery_credits": SIGNAL_DELIVERY_CREDITS,
        "lifecycle_delivery_credits": 0,
        "lifecycle_events": list(LIFECYCLE_EVENTS),
        "management_credits": 0,
        "minimum_balance_to_create": MIN_BALANCE_TO_CREATE,
        "charged": "once per event, before its first attempt, however many attempts it takes; refunded only when "
        "no attempt reached the receiver (every attempt a DNS, connect or TLS failure, or a refused address) and "
        "the delivery ends dead or is cancelled; a request written to the receiver stays charged, answered or not",
    }


def new_secret() -> str:
    """A subscription's signing secret: 32 random bytes, URL-safe text (``whsec_`` marks what it is)."""
    return "whsec_" + secrets.token_urlsafe(32)


def event_id(webhook_id: int, job_id: int) -> str:
    return f"evt_{webhook_id}_{job_id}"


def delivery_body(webhook_id: int, job_id: int, event_type: str, payload: Any, created_at: datetime) -> bytes:
    """The bytes a delivery posts (and signs), the same on every attempt.

    A signal delivery (``event_type`` ``signal.<kind>``) is the Signal event itself, as docs/api.md says.
    Every other event is an envelope: ``{event_id, type, created_at (unix seconds), webhook_id, data}``.
    """
    if event_type.startswith(SIGNAL_EVENT_PREFIX):
        return orjson.dumps(payload)
    return orjson.dumps(
        {
            "event_id": event_id(webhook_id, job_id),
            "type": event_type,
            "created_at": int(created_at.timestamp()),
            "webhook_id": webhook_id,
            "data": payload,
        }
    )


def signature(secret: str, event: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex>`` over ``{event_id}.{timestamp}.{body}``."""
    signed = f"{event}.{timestamp}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify(secret: str, event: str, timestamp: int, body: bytes, header: str) -> bool:
    """What a receiver does (constant-time compare)."""
    return hmac.compare_digest(signature(secret, event, timestamp, body), header)


def retry_delay_s(attempts: int, retry_after_s: float | None = None, rng: random.Random | None = None) -> float | None:
    """Seconds until the next attempt after ``attempts`` failed ones, or None when the job is dead.

    A receiver's ``Retry-After`` (429, 503) wins when it asks for longer, up to ``MAX_RETRY_AFTER_S``.
    """
    if attempts >= MAX_ATTEMPTS:
        return None
    base = RETRY_DELAYS_S[max(0, attempts - 1)]
    delay = base * (1 + 0.2 * (rng or random).random())
    if retry_after_s is not None:
        delay = max(delay, min(float(retry_after_s), MAX_RETRY_AFTER_S))
    return delay


_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


def forbidden_address(address: str) -> str | None:
    """Why a delivery may not go to ``address`` (an IP literal), or None when it may.

    Refused: loopback, private (RFC 1918, unique-local), link-local (cloud metadata lives there),
    multicast, unspecified, reserved, shared (CGNAT), and the same behind IPv4-mapped, 6to4 and
    NAT64-style IPv6 forms.
    """
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or _nat64(ip)
        if embedded is not None:
            return forbidden_address(str(embedded))
    if ip in _METADATA:
        return "a cloud metadata address"
    for test, why in (
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    ):
        if test:
            return why
    return None


def _nat64(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip in ipaddress.ip_network("64:ff9b::/96"):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None
