"""The credit and limit errors of docs/api.md's error table, named once (see :mod:`gateway.core.errors`).

Each is a :class:`ProxyError` (a single request stops with its HTTP status); inside a batch the
same error becomes the item's JSON-RPC error via ``ProxyError.rpc_error()``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.core.errors import ProxyError, RpcCode
from gateway.limits.rules import ConcurrencyLimited, RateLimited


def account_suspended() -> ProxyError:
    return ProxyError(403, "ACCOUNT_SUSPENDED", "this account is suspended; contact the operator")


#: The JSON-RPC code of SPEND_CAP_REACHED: none of the interface's (-32001..-32015, -326xx, -32700).
SPEND_CAP_RPC = -32031
#: How a connection's charge the cap refused is told (a WebSocket's close reason, a gRPC status message).
SPEND_CAP_MESSAGE = "SPEND_CAP_REACHED: the account's daily spend cap is reached until the UTC day turns"


def spend_cap_reached(now: float | None = None) -> ProxyError:
    """403 SPEND_CAP_REACHED (-32031): the account's daily spend cap leaves too little for this today
    (docs/api.md, Spend cap); free, and ``Retry-After`` is the turn of the day (UTC midnight). Not a
    402: the interface keeps 402 for no credentials, no account or no balance, and an x402 client
    answers a 402 by paying, which would not help. Here, not in :mod:`gateway.access.spend_cap` with the
    cap's other rules: every transport's metering raises it, and credits is below access in the layers."""
    at = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    resets = (at + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    wait = max(1, math.ceil((resets - at).total_seconds()))
    when = resets.strftime("%Y-%m-%dT%H:%M:%SZ")
    return ProxyError(
        403,
        "SPEND_CAP_REACHED",
        f"the account's daily spend cap is reached; spending resumes at {when} (the UTC day's turn)",
        SPEND_CAP_RPC,
        {"resets_at": when, "retry_after_secs": wait},
        headers={"Retry-After": str(wait)},
    )


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
