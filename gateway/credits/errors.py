"""The credit and limit errors of docs/api.md's error table, named once (see :mod:`gateway.core.errors`).

Each is a :class:`ProxyError` (a single request stops with its HTTP status); inside a batch the
same error becomes the item's JSON-RPC error via ``ProxyError.rpc_error()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.errors import ProxyError, RpcCode
from gateway.limits.rules import ConcurrencyLimited, RateLimited


def account_suspended() -> ProxyError:
    return ProxyError(403, "ACCOUNT_SUSPENDED", "this account is suspended; contact the operator")


def insufficient_credits(price: int, available: int | None, top_up: Mapping[str, Any]) -> ProxyError:
    """-32010 'insufficient credits', with what the call needs, what is left and how to top up."""
    data: dict[str, Any] = {"required": price}
    if available is not None:
        data["available"] = max(0, available)
    data.update(top_up)
    return ProxyError(402, "INSUFFICIENT_CREDITS", "insufficient credits", RpcCode.INSUFFICIENT_CREDITS, data)


def payment_required(data: Mapping[str, Any] | None = None) -> ProxyError:
    """No account record for this public key: -32002 with the deposit instructions as ``data``."""
    return ProxyError(
        402,
        "PAYMENT_REQUIRED",
        "payment required: no credits for this public key; deposit USDC to the deposit address",
        RpcCode.PAYMENT_REQUIRED,
        dict(data) if data else None,
    )


def rate_limited(decision: RateLimited) -> ProxyError:
    return ProxyError(
        429,
        "RATE_LIMITED",
        "rate limit exceeded",
        RpcCode.RATE_LIMITED,
        {"retry_after_secs": decision.retry_after_s},
        headers={
            "Retry-After": str(decision.retry_after_s),
            "X-Ratelimit-Limit": str(decision.limit),
            "X-Ratelimit-Remaining": "0",
            "X-Ratelimit-Reset": str(decision.reset_at),
        },
    )


def concurrency_limited(decision: ConcurrencyLimited) -> ProxyError:
    return ProxyError(
        429,
        "CONCURRENCY_LIMITED",
        "concurrency limit exceeded",
        RpcCode.RATE_LIMITED,
        {"concurrency_limit": decision.limit, "retry_after_secs": 1},
        headers={"Retry-After": "1"},
    )
