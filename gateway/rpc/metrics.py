"""The response cache's metric (the forwarder records it).

Declared with the kernel's :mod:`gateway.metrics` (which installs every declared metric) and importing
nothing else: every process declares them before it installs its backend, an actor's too
(``gateway/runtime/metrics.py``). Names and labels are docs/operations.md's.
"""

from __future__ import annotations

from gateway.metrics import counter, each

CACHE_LOOKUPS = counter(
    "gateway_response_cache_lookups_total",
    "Calls looked up in the response cache, by result (hit, partial, miss)",
    ("result",),
    each("hit", "partial", "miss"),
)
