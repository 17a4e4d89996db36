"""The access rules' metric: calls and connections an account's rules refused (its guard and its
JSON-RPC method stage record it).
"""

from __future__ import annotations

from gateway.base.metrics import counter

ACCESS_REFUSALS = counter(
    "gateway_access_refusals_total",
    "Calls and connections refused 403 ACCESS_DENIED by an account's access rules (docs/api.md), by rule and wire",
    ("rule", "wire"),
)
