"""Priority fees from the node's recent prioritization fees: the sample, its percentiles, the results. Pure.

Urgencies map to percentiles of the fees paid in recent slots (micro-lamports per compute unit):
low 25th, medium 50th, high 75th, critical 90th (and veryHigh 95th, as the well-known
getPriorityFeeEstimate names it). That API's levels: Min the smallest (0th), Low 25th, Medium 50th,
High 75th, VeryHigh 95th, UnsafeMax the largest (100th). Nearest-rank percentiles over integers: no floats.

The sample is one fee per slot of the node's ``getRecentPrioritizationFees`` window (150 slots).
Globally the window is used as it is. Scoped to accounts, a slot "paid" when its fee is nonzero:
when at least :data:`MIN_PAID_SLOTS` slots paid, only those are used (basis ``paid_slots``: what
transactions writing these accounts actually paid), else every slot (basis ``all_slots``, and the
estimate may be zero: nobody had to pay to write these accounts lately).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

URGENCY_PERCENTILES = {"low": 25, "medium": 50, "high": 75, "critical": 90}
#: The urgencies a call may name (suggestPriorityFee; sendSmartTransaction's ``priority_fee_urgency``).
URGENCIES = tuple(URGENCY_PERCENTILES)
VERY_HIGH_PERCENTILE = 95
#: ``all_levels`` of ``suggestPriorityFee``: the urgencies' percentiles, and veryHigh.
LEVEL_PERCENTILES = {"low": 25, "medium": 50, "high": 75, "veryHigh": VERY_HIGH_PERCENTILE}
#: ``getPriorityFeeEstimate`` priority levels (that API's names; ``Default`` is Medium there too).
ESTIMATE_PERCENTILES = {
    "Min": 0,  # the smallest fee of the sample
    "Low": 25,
    "Medium": 50,
    "High": 75,
    "VeryHigh": VERY_HIGH_PERCENTILE,
    "UnsafeMax": 100,  # the largest
}
#: The keys of ``priorityFeeLevels`` (includeAllPriorityFeeLevels).
ESTIMATE_LEVEL_KEYS = {
    "Min": "min",
    "Low": "low",
    "Medium": "medium",
    "High": "high",
    "VeryHigh": "veryHigh",
    "UnsafeMax": "unsafeMax",
}
MIN_PAID_SLOTS = 3
MAX_FEE_ACCOUNTS = 128
PAID_SLOTS = "paid_slots"
ALL_SLOTS = "all_slots"


def percentile(values: Sequence[int], pct: int) -> int:
    """The nearest-rank ``pct``th percentile of ``values`` (0 for none; the smallest for 0)."""
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


def slot_fees(answer: object) -> list[int] | None:
    """Like :func:`recent_fees`, but None for an answer that is not a well-formed list of slots:
    an estimate is never made from a broken answer (it would read as zero)."""
    if not isinstance(answer, list):
        return None
    fees = []
    for entry in answer:
        fee = entry.get("prioritizationFee") if isinstance(entry, dict) else None
        if not isinstance(fee, int) or isinstance(fee, bool) or fee < 0:
            return None
        fees.append(fee)
    return fees


@dataclass(frozen=True, slots=True)
class FeeQuery:
    """What planning read from a fee method's params (``item.parsed(FeeQuery)``)."""

    level: str  # an urgency (suggestPriorityFee) or a priority level (getPriorityFeeEstimate)
    accounts: tuple[str, ...] = ()  # empty: the global window
    include_all: bool = False  # getPriorityFeeEstimate's includeAllPriorityFeeLevels


@dataclass(frozen=True, slots=True)
class FeeSample:
    """The fees the percentiles are taken over, and how they were chosen."""

    fees: list[int]
    slot_count: int  # slots in the node's window
    paid_slot_count: int  # of those, slots with a nonzero fee
    basis: str  # PAID_SLOTS or ALL_SLOTS
    scoped: bool  # scoped to accounts

    def at(self, pct: int) -> int:
        return percentile(self.fees, pct)


def fee_sample(fees: Sequence[int], scoped: bool) -> FeeSample:
    """The sample of one window: scoped to accounts, paid slots only when at least three paid."""
    paid = [fee for fee in fees if fee > 0]
    if scoped and len(paid) >= MIN_PAID_SLOTS:
        return FeeSample(paid, len(fees), len(paid), PAID_SLOTS, scoped)
    return FeeSample(list(fees), len(fees), len(paid), ALL_SLOTS, scoped)


def suggestion(sample: FeeSample, urgency: str) -> dict[str, Any]:
    """The ``suggestPriorityFee`` result. ``sample_count``: the slots sampled (the window);
    ``paid_slot_count``: of those, the ones with a nonzero fee; ``basis``: which the levels are of."""
    levels: dict[str, Any] = {name: sample.at(pct) for name, pct in LEVEL_PERCENTILES.items()}
    levels.update(sample_count=sample.slot_count, paid_slot_count=sample.paid_slot_count, basis=sample.basis)
    return {
        "suggested_fee_microlamports": sample.at(URGENCY_PERCENTILES[urgency]),
        "urgency": urgency,
        "all_levels": levels,
        "scoped_to_accounts": sample.scoped,
    }


def estimate(sample: FeeSample, level: str, include_all: bool) -> dict[str, Any]:
    """The ``getPriorityFeeEstimate`` result at ``level`` (a key of :data:`ESTIMATE_PERCENTILES`)."""
    result: dict[str, Any] = {"priorityFeeEstimate": sample.at(ESTIMATE_PERCENTILES[level])}
    if include_all:
        result["priorityFeeLevels"] = {
            ESTIMATE_LEVEL_KEYS[name]: sample.at(pct) for name, pct in ESTIMATE_PERCENTILES.items()
        }
    return result
