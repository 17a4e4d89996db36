"""The response cache's metric (the forwarder records it)."""

from __future__ import annotations

from gateway.base.metrics import counter, each

CACHE_LOOKUPS = counter(
    "gateway_response_cache_lookups_total",
    "Calls looked up in the response cache, by result (hit, partial, miss)",
    ("result",),
    each("hit", "partial", "miss"),
)
