"""Sending's metrics: sendAndConfirm's races and their legs (``race.py``), and its holds still pending
(set by the webhook watcher's backlog gauges, ``gateway/webhooks/backlog.py``, which read both tables).
"""

from __future__ import annotations

from gateway.base.metrics import LATENCY_BUCKETS, counter, each, gauge, histogram

SEND_RACES = counter(
    "gateway_send_races_total",
    "sendAndConfirm races, by outcome (confirmed, failed, unknown)",
    ("outcome",),
    each("confirmed", "failed", "unknown"),
)

SEND_LANDING_SECONDS = histogram(
    "gateway_send_landing_duration_seconds",
    "From a sendAndConfirm race's first broadcast to the slot its transaction landed in being seen",
    LATENCY_BUCKETS,
)

SEND_LEG_SENDS = counter(
    "gateway_send_leg_sends_total",
    "Broadcasts of a race on one leg (local_rpc, jito, tpu_quic), by result (accepted, refused, failed)",
    ("leg", "result"),
    tuple((leg, result) for leg in ("local_rpc", "jito", "tpu_quic") for result in ("accepted", "refused", "failed")),
)

SEND_HOLDS = gauge("gateway_send_holds_pending", "sendAndConfirm charges held and not settled yet")

SEND_HOLD_OLDEST = gauge(
    "gateway_send_hold_oldest_seconds", "Age of the oldest pending sendAndConfirm hold (0 when none)"
)
