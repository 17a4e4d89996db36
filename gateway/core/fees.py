"""Priority fees from the node's recent prioritization fees: percentiles by urgency. Pure.

Urgencies map to percentiles of the fees paid in recent slots (micro-lamports per compute unit):
low 25th, medium 50th, high 75th, critical 90th (and veryHigh 95th, as the well-known
getPriorityFeeEstimate names it). Nearest-rank percentiles over integers: no floats.
"""

from __future__ import annotations

from collections.abc import Sequence

URGENCY_PERCENTILES = {"low": 25, "medium": 50, "high": 75, "critical": 90}
VERY_HIGH_PERCENTILE = 95


def percentile(values: Sequence[int], pct: int) -> int:
    """The nearest-rank ``pct``th percentile of ``values`` (0 for none)."""
    if not values:
        return 0
    ordered = sorted(values)
    rank = max(1, -(-pct * len(ordered) // 100))  # ceil(pct% of n), in integers
    return ordered[rank - 1]


def recent_fees(answer: object) -> list[int]:
    """The ``prioritizationFee`` of each slot in a ``getRecentPrioritizationFees`` answer."""
    if not isinstance(answer, list):
        return []
    return [
        e["prioritizationFee"] for e in answer if isinstance(e, dict) and isinstance(e.get("prioritizationFee"), int)
    ]
