"""Auth-specific constructors on top of :mod:`gateway.errors` (codes and statuses stay there)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.errors import ProxyError, RpcCode, auth_failed, service_unavailable

PAYMENT_REQUIRED = "PAYMENT_REQUIRED"


@dataclass
class PaymentRequiredError(ProxyError):
    """402 -32002 carrying the x402 ``PaymentRequired`` document (see :mod:`gateway.auth.payment_terms`).

    Transports that cannot show the document (WebSocket close codes, gRPC statuses) can treat it as
    the plain :class:`ProxyError` it also is.
    """

    document: dict[str, Any] = field(default_factory=dict)


def payment_required(
    message: str, data: dict[str, Any], headers: dict[str, str], document: dict[str, Any]
) -> PaymentRequiredError:
    """402 -32002: no credentials, or a proven identity without an account record."""
    return PaymentRequiredError(
        402, PAYMENT_REQUIRED, message, rpc_code=RpcCode.PAYMENT_REQUIRED, data=data, headers=headers, document=document
    )


def wallet_signature_required() -> ProxyError:
    return auth_failed(
        "this endpoint requires a wallet signature (X-Pubkey, X-Signature, X-Timestamp, X-Nonce); "
        "API keys and session tokens are not accepted here"
    )


def bearer_token_required() -> ProxyError:
    return auth_failed("this endpoint requires a session token: Authorization: Bearer <token>")


def store_unavailable(what: str) -> ProxyError:
    """Fail closed: without the store that proves a credential, the request is refused, never waved through."""
    return service_unavailable(f"{what} is unavailable; retry shortly", 5)


def database_unavailable() -> ProxyError:
    return store_unavailable("the account database")
