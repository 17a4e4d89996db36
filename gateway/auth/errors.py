"""Auth-specific constructors on top of :mod:`gateway.core.errors` (codes and statuses stay there)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.errors import ProxyError, ReplyStyle, RpcCode, auth_failed, service_unavailable

PAYMENT_REQUIRED = "PAYMENT_REQUIRED"


def account_suspended() -> ProxyError:
    """403 ACCOUNT_SUSPENDED, as the metering stage answers it (docs/api.md, Errors)."""
    return ProxyError(403, "ACCOUNT_SUSPENDED", "this account is suspended; contact the operator")


def payment_required(
    message: str, data: dict[str, Any], headers: dict[str, str], x402: Mapping[str, Any]
) -> ProxyError:
    """402 -32002: no credentials, or a proven identity without an account record. Always a JSON-RPC
    body, on every route, so JSON-RPC and x402 clients read it alike; ``x402`` (the x402
    ``PaymentRequired`` fields other than ``error``) goes into it beside the error."""
    return ProxyError(
        402,
        PAYMENT_REQUIRED,
        message,
        rpc_code=RpcCode.PAYMENT_REQUIRED,
        data=data,
        headers=headers,
        extra_body=x402,
        style=ReplyStyle.JSONRPC,
    )


def wallet_signature_required() -> ProxyError:
    return auth_failed(
        "this endpoint requires a wallet signature (X-Pubkey, X-Signature, X-Timestamp, X-Nonce); "
        "API keys and session tokens are not accepted here"
    )


def bearer_token_required() -> ProxyError:
    return auth_failed("this endpoint requires a session token: Authorization: Bearer <token>")


def not_started() -> ProxyError:
    """Fail closed until the stores that prove credentials are open: refused, never waved through."""
    return service_unavailable("authentication is starting; retry shortly", 5)


#: The access rules' refusal (gateway.access.rules; auth cannot import it): the same code and JSON-RPC code.
ACCESS_DENIED, ACCESS_DENIED_RPC = "ACCESS_DENIED", -32030


def owner_proof_required(action: str) -> ProxyError:
    """403 ACCESS_DENIED: only the wallet's own proof (a per-request signature or an owner session) may ``action``."""
    return ProxyError(
        403,
        ACCESS_DENIED,
        f"access denied: {action} needs the wallet's own proof: sign this request with the wallet (X-Pubkey, "
        "X-Signature, X-Timestamp, X-Nonce), or use an owner session (POST /auth/verify with the Sign-In With "
        "Solana message of POST /auth/challenge's sign_in); an API key or a hex-challenge session cannot",
        ACCESS_DENIED_RPC,
    )


def sessions_full(max_sessions: int, retry_after_s: int) -> ProxyError:
    """429 CONCURRENCY_LIMITED: every live session of the account is an owner session, at the cap; an
    ordinary session never ends one (docs/api.md, Account and session routes)."""
    return ProxyError(
        429,
        "CONCURRENCY_LIMITED",
        f"this account has {max_sessions} live owner sessions, the most it keeps, and a session from the hex "
        "challenge never ends one: end one (DELETE /account/sessions/{id}), sign in with Sign-In With Solana "
        "(an owner session ends the oldest), or retry when one expires",
        RpcCode.RATE_LIMITED,
        {"max_sessions": max_sessions, "retry_after_secs": retry_after_s},
        headers={"Retry-After": str(retry_after_s)},
    )
