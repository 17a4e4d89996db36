"""Webhooks' metrics: delivery attempts (the dispatcher) and the queue's backlog (the watcher's backlog
gauges, ``backlog.py``).
"""

from __future__ import annotations

from gateway.base.metrics import counter, each, gauge

WEBHOOK_DELIVERIES = counter(
    "gateway_webhook_deliveries_total",
    "Webhook delivery attempts written, by outcome (delivered, retry, dead, lost)",
    ("outcome",),
    each("delivered", "retry", "dead", "lost"),
)

WEBHOOK_QUEUE = gauge("gateway_webhook_queue_depth", "Webhook jobs pending or being delivered")

WEBHOOK_OLDEST = gauge(
    "gateway_webhook_oldest_pending_seconds", "Age of the oldest pending webhook job's event (0 when none)"
)

WEBHOOK_DEAD = gauge("gateway_webhook_dead_jobs", "Webhook jobs in the dead state (kept until retention)")
