"""Checking a webhook delivery's signature, on the receiving side (docs/api.md, Deliveries).

Every delivery is a ``POST`` whose ``X-Webhook-Signature`` is ``sha256=<hex>``: HMAC-SHA256 keyed with
the webhook's secret (its UTF-8 text, ``whsec_`` included) over ``{event_id}.{timestamp}.{body}``,
with the event id and timestamp of the ``X-Webhook-Event-Id`` and ``X-Webhook-Timestamp`` headers and
the body's raw bytes. Needs nothing of the server (the client library's import contract)::

    if not verify_webhook(secret, request.headers, await request.read()):
        return 401  # not from the gateway, altered, or an old attempt replayed

During a secret rotation, pass both secrets: an attempt already under way may carry the old one.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping

SIGNATURE_HEADER = "X-Webhook-Signature"
TIMESTAMP_HEADER = "X-Webhook-Timestamp"
EVENT_ID_HEADER = "X-Webhook-Event-Id"
WEBHOOK_ID_HEADER = "X-Webhook-Id"
#: How old (or how far ahead) an attempt's timestamp may be, in seconds.
DEFAULT_TOLERANCE_S = 300


def webhook_signature(secret: str, event_id: str, timestamp: int | str, body: bytes) -> str:
    """The ``X-Webhook-Signature`` value of a delivery: ``sha256=<hex>``."""
    signed = f"{event_id}.{timestamp}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify_webhook(
    secret: str | Iterable[str],
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """Whether ``body`` (the raw bytes received, before any JSON parsing) with these ``headers`` (any
    mapping; names in any case) was signed by the gateway with ``secret`` (or one of several) within
    ``tolerance_s`` of ``now`` (default: the clock). False for a missing or malformed header."""
    signature = _header(headers, SIGNATURE_HEADER)
    timestamp = _header(headers, TIMESTAMP_HEADER)
    event_id = _header(headers, EVENT_ID_HEADER)
    if signature is None or timestamp is None or event_id is None or not timestamp.isdigit():
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance_s:
        return False  # an old attempt, replayed
    secrets = [secret] if isinstance(secret, str) else list(secret)
    given = signature.encode("utf-8", "replace")  # bytes: a header of any characters compares (str must be ASCII)
    return any(hmac.compare_digest(webhook_signature(s, event_id, timestamp, body).encode(), given) for s in secrets)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        wanted = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == wanted), None)
    return None if value is None else value.strip()
