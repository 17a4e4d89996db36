"""Error vocabulary of the gateway.

Two families, matching docs/api.md's two error shapes::

    RpcError            a JSON-RPC error object, answered inside HTTP 200 (per item in a batch)
    ProxyError          stops a request before the node; has an HTTP status and renders either
                        as a JSON-RPC body (when it has a JSON-RPC code, e.g. -32010 at 402, on the
                        JSON-RPC routes) or as the HTTP body {error: {code, message, requestId,
                        rpcCode?}} (INVALID_REQUEST at 400 on every route, AUTH_FAILED, NONCE_REUSED...)

Constructors below name each documented error once, so codes, statuses and messages live here only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any


class ConfigError(Exception):
    """Configuration that cannot be used; the message is meant for the operator (it names the setting)."""


class RpcCode(IntEnum):
    """JSON-RPC codes the gateway itself answers with (the node may answer with the same numbers)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    METHOD_NOT_ALLOWED = -32001
    PAYMENT_REQUIRED = -32002
    BACKEND_UNAVAILABLE = -32003
    SERVICE_PROFILE_DISABLED = -32004
    RATE_LIMITED = -32005
    TIMED_OUT = -32007
    INSUFFICIENT_CREDITS = -32010


class ReplyStyle(StrEnum):
    """How a refusal is rendered: as a JSON-RPC error object where docs/api.md gives one a code
    (``jsonrpc``), or as the HTTP error body ``{error: {code, message, requestId}}`` (``rest``)."""

    JSONRPC = "jsonrpc"
    REST = "rest"


@dataclass(frozen=True)
class RpcError:
    """A JSON-RPC error object (answered with HTTP 200)."""

    code: int
    message: str
    data: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


#: Where the methods and their prices are listed (what an unknown method's answer points to).
PRICING_PATH = "/pricing"


def method_not_found(method: str, suggestions: Sequence[str] = ()) -> RpcError:
    """-32601 for a method the gateway does not know, with the closest known names (all in the message:
    solders' ``MethodNotFoundMessage`` keeps only the message) and where the known ones are listed."""
    names = ", ".join(suggestions[:-1]) + " or " + suggestions[-1] if len(suggestions) > 1 else "".join(suggestions)
    hint = f" Did you mean {names}?" if names else ""
    message = f"Method not found: {method}.{hint} The methods and their prices: GET {PRICING_PATH}"
    return RpcError(RpcCode.METHOD_NOT_FOUND, message, {"did_you_mean": list(suggestions), "pricing": PRICING_PATH})


def method_denied(method: str) -> RpcError:
    return RpcError(RpcCode.METHOD_NOT_FOUND, f"Method not found: {method} is not available on this gateway")


def profile_disabled(method: str, profile: str) -> RpcError:
    return RpcError(
        RpcCode.SERVICE_PROFILE_DISABLED,
        f"{method} is disabled by the service profile: {profile} is not enabled",
    )


def invalid_params(message: str) -> RpcError:
    return RpcError(RpcCode.INVALID_PARAMS, f"Invalid params: {message}")


def invalid_request_item(message: str) -> RpcError:
    return RpcError(RpcCode.INVALID_REQUEST, f"Invalid Request: {message}")


@dataclass
class ProxyError(Exception):
    """A request stopped by the gateway before (or instead of) the node."""

    status: int
    constant: str
    message: str
    rpc_code: int | None = None
    data: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # top-level fields beside the error (x402's)
    style: ReplyStyle | None = None  # rendered this way whatever the route's style (the 402 with terms)

    def __str__(self) -> str:
        return f"{self.status} {self.constant}: {self.message}"

    def http_body(self, request_id: str | None) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.constant, "message": self.message}
        if request_id is not None:
            error["requestId"] = request_id
        if self.data is not None:
            error["data"] = self.data
        if self.rpc_code is not None:  # the JSON-RPC code beside the constant (docs/api.md, Errors)
            error["rpcCode"] = int(self.rpc_code)
        return {"error": error}

    def rpc_error(self) -> RpcError:
        assert self.rpc_code is not None
        return RpcError(self.rpc_code, self.message, self.data)


def invalid_request(message: str) -> ProxyError:
    return ProxyError(400, "INVALID_REQUEST", message)


def parse_error(detail: str) -> ProxyError:
    """400 for a JSON-RPC body that is not JSON: ``INVALID_REQUEST`` in the HTTP error body on every
    route (the interface's table), -32700 in its ``rpcCode``; a JSON-RPC error on a WebSocket."""
    return ProxyError(400, "INVALID_REQUEST", f"Parse error (-32700): {detail}", rpc_code=RpcCode.PARSE_ERROR)


def invalid_rpc_request(detail: str) -> ProxyError:
    """400 for a JSON-RPC body that is not a valid request or batch (an empty batch, one over 100):
    -32600 in ``rpcCode``, as :func:`parse_error`."""
    return ProxyError(400, "INVALID_REQUEST", f"Invalid Request (-32600): {detail}", rpc_code=RpcCode.INVALID_REQUEST)


def auth_failed(message: str) -> ProxyError:
    return ProxyError(401, "AUTH_FAILED", message)


def nonce_reused() -> ProxyError:
    return ProxyError(403, "NONCE_REUSED", "nonce already used for this public key; sign again with a new nonce")


def account_not_found() -> ProxyError:
    return ProxyError(404, "ACCOUNT_NOT_FOUND", "no account for this public key; deposit USDC or create an API key")


def not_found(message: str) -> ProxyError:
    """404 for a resource the caller cannot see: missing or another account's, alike (never 403)."""
    return ProxyError(404, "NOT_FOUND", message)


def internal_error() -> ProxyError:
    return ProxyError(500, "INTERNAL_ERROR", "internal error")


def backend_unavailable(message: str = "upstream node unreachable") -> ProxyError:
    return ProxyError(502, "UPSTREAM_ERROR", message, rpc_code=RpcCode.BACKEND_UNAVAILABLE)


def service_unavailable(message: str, retry_after_secs: int) -> ProxyError:
    return ProxyError(
        503,
        "SERVICE_TEMPORARILY_UNAVAILABLE",
        message,
        rpc_code=RpcCode.BACKEND_UNAVAILABLE,
        data={"retry_after_secs": retry_after_secs},
        headers={"Retry-After": str(retry_after_secs)},
    )


def timed_out(method: str, seconds: float) -> ProxyError:
    return ProxyError(504, "TIMEOUT", f"{method} timed out after {seconds:g} s", rpc_code=RpcCode.TIMED_OUT)


def address_rate_limited(retry_after_s: int) -> ProxyError:
    """429 for a client address over the per-address limit of a route group (the account routes)."""
    return ProxyError(
        429,
        "RATE_LIMITED",
        f"too many requests from this address; retry in {retry_after_s} s",
        rpc_code=RpcCode.RATE_LIMITED,
        data={"retry_after_secs": retry_after_s},
        headers={"Retry-After": str(retry_after_s)},
    )
