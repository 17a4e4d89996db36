"""Metering's settings: method prices, credit leases and their flushes, expiry sweeps, referral
bonuses, how long usage rows are kept."""

from __future__ import annotations

from typing import Self

from pydantic import Field, field_validator, model_validator

from gateway.base.config import ServiceSettings


class CreditSettings(ServiceSettings):
    """Prices, leases and the books of usage (the payment terms themselves are shared: gateway/base/config.py)."""

    pricing: dict[str, int] = Field(
        default_factory=dict, description="Credits per method class, overriding the defaults."
    )
    lease_ttl_s: float = Field(
        30.0,
        ge=2,
        le=600,
        description="Credit lease lifetime; a crashed replica's lease holds credits this long.",
    )
    credit_flush_interval_s: float = Field(1.0, gt=0, le=60, description="Seconds between usage flushes.")
    credit_recall_wait_s: float = Field(
        0.25,
        ge=0,
        le=5,
        description="How long a call short of credits waits for other replicas to give back the credits their "
        "leases of the account hold (0: never asks; the credits then come back when those leases go idle).",
    )
    credit_expiry_check_s: float = Field(
        60.0, ge=0, description="How often each replica sweeps expired credit batches; 0 turns the sweep off here."
    )
    referral_bonus_percent: int = Field(10, ge=0, le=100, description="Default referral bonus on deposits.")
    usage_retention_days: float = Field(
        90.0,
        ge=1,
        le=3650,
        description="Usage history rows (one per call, GET /account/history) older than this are deleted "
        "(hourly, by the send reconciler). Ledger entries and balances are kept.",
    )

    @field_validator("pricing")
    @classmethod
    def _check_pricing(cls, value: dict[str, int]) -> dict[str, int]:
        from gateway.core.methods import DEFAULT_CLASS_CREDITS

        known = {c.value for c in DEFAULT_CLASS_CREDITS}
        for name, credits in value.items():
            if name not in known:
                raise ValueError(f"pricing: unknown method class {name!r}; known: {', '.join(sorted(known))}")
            if credits <= 0:
                raise ValueError(f"pricing: {name} must be a positive integer (a free class would be an open door)")
        return value

    @model_validator(mode="after")
    def _check_lease_timing(self) -> Self:
        # Usage is settled at the flush: a lease must outlive several flushes, or a retired lease could
        # expire before its usage settles, and that usage would be dropped.
        if self.credit_flush_interval_s * 4 > self.lease_ttl_s:
            raise ValueError(
                f"credit_flush_interval_s ({self.credit_flush_interval_s:g}) must be at most a quarter of "
                f"lease_ttl_s ({self.lease_ttl_s:g})"
            )
        return self
