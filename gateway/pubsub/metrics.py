"""The WebSocket's metrics: open sockets (its caps), their subscriptions and the sockets closed behind
(a session's).
"""

from __future__ import annotations

from gateway.base.metrics import counter, each, gauge

WS_CONNECTIONS = gauge("gateway_ws_connections", "Open WebSockets of this replica")

WS_SUBSCRIPTIONS = gauge(
    "gateway_ws_subscriptions",
    "Client subscriptions open on this replica's WebSockets, by subscribe method",
    ("method",),
)

WS_OVERFLOW_CLOSES = counter(
    "gateway_ws_overflow_closes_total",
    "WebSockets closed 1013 with 10,000 undelivered messages, by whose fault (client: not reading; gateway: behind)",
    ("cause",),
    each("client", "gateway"),
)
