"""The limits' settings: per-account rate and concurrency, the account shards that hold them, and the
per-address limits of the routes a caller reaches before (or without) paying."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from gateway.base.config import ServiceSettings


class IpLimit(BaseModel):
    """A per-client-address token bucket: ``rps`` requests per second, up to ``burst`` at once."""

    model_config = {"extra": "forbid"}

    rps: float = Field(gt=0, le=100_000)
    burst: int = Field(ge=1, le=1_000_000)


#: Per-address limits of the routes a caller reaches before (or without) paying. Groups: ``session``
#: (/auth/*, DELETE /account/sessions[/{id}]), ``account_create`` (POST /account/api-key: creates accounts),
#: ``account_read`` (/account/info, /ledger, /history, GET /account/sessions), ``deposit_confirm``
#: (POST /account/confirm-deposit: node reads),
#: ``webhooks`` (the /webhooks management routes), ``x402_settle`` (POST /x402/settle: node sends, and
#: sponsored ones spend the fee payer's SOL), ``signals`` (GET /signals/recent: public Redis reads),
#: ``auth_failures`` (failed authentications on every transport: each unknown API key is a database lookup),
#: ``pricing`` (GET /pricing: its SOL/USD rate is a node read when stale).
DEFAULT_IP_LIMITS: dict[str, IpLimit] = {
    "session": IpLimit(rps=5, burst=30),
    "account_create": IpLimit(rps=0.2, burst=10),
    "account_read": IpLimit(rps=10, burst=50),
    "deposit_confirm": IpLimit(rps=1, burst=10),
    "webhooks": IpLimit(rps=5, burst=30),
    "x402_settle": IpLimit(rps=0.1, burst=5),
    "signals": IpLimit(rps=5, burst=30),
    "auth_failures": IpLimit(rps=1, burst=100),
    "pricing": IpLimit(rps=5, burst=30),
}


class LimitSettings(ServiceSettings):
    """Per-account and per-address limits."""

    rate_limit_rps: int = Field(
        50,
        ge=1,
        le=1_000_000,
        description="Per-account requests/s (one per batch item); per-account override.",
    )
    concurrency_limit: int = Field(
        32, ge=1, le=100_000, description="Per-account calls in flight; per-account override."
    )
    account_shards: int = Field(
        2,
        ge=0,
        le=64,
        description="Account-shard actors started by gateway up, owning each account's rate and concurrency "
        "(0: each replica enforces its share of them).",
    )
    ip_limits: dict[str, IpLimit] = Field(
        default_factory=lambda: dict(DEFAULT_IP_LIMITS),
        description="Per-client-address limits of the account and session routes, by group (JSON in the "
        "environment); groups left out keep their defaults. Each of R replicas enforces rps / R and "
        "ceil(burst / R) (R: ingress_replicas, or ingress_autoscaling.max_replicas).",
    )

    @field_validator("ip_limits")
    @classmethod
    def _check_ip_limits(cls, value: dict[str, IpLimit]) -> dict[str, IpLimit]:
        unknown = set(value) - set(DEFAULT_IP_LIMITS)
        if unknown:
            raise ValueError(f"ip_limits: unknown group {sorted(unknown)[0]!r}; known: {', '.join(DEFAULT_IP_LIMITS)}")
        return {**DEFAULT_IP_LIMITS, **value}
