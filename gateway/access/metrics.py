"""The access rules' metric: calls and connections an account's rules refused (its guard and its
JSON-RPC method stage record it).

Declared with the kernel's :mod:`gateway.metrics` (which installs every declared metric) and importing
nothing else: every process declares them before it installs its backend, an actor's too
(``gateway/runtime/metrics.py``). Names and labels are docs/operations.md's.
"""

from __future__ import annotations

from gateway.metrics import counter

ACCESS_REFUSALS = counter(
    "gateway_access_refusals_total",
    "Calls and connections refused 403 ACCESS_DENIED by an account's access rules (docs/api.md), by rule and wire",
    ("rule", "wire"),
)
