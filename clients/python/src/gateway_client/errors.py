"""One exception per documented gateway error, built from an HTTP answer or a WebSocket close
(docs/api.md, Errors).

GatewayError                      any refusal; status, code, message, request_id, data
├── InvalidRequest                400
├── AuthFailed                    401 AUTH_FAILED; /ws close 4001, or 1008 (invalid or expired session token)
├── PaymentRequired               402 -32002: no credentials or no account; ``terms`` says how to pay
│   └── InsufficientCredits       402 -32010; /ws close 4002 (balance below the socket's minimum)
├── Forbidden                     403 (NONCE_REUSED, ACCOUNT_SUSPENDED, ...)
│   └── NonceReused               403 NONCE_REUSED
├── NotFound                      404
├── RateLimited                   429; /ws close 4003 (too many messages per second); ``retry_after`` seconds
├── BackendUnavailable            502 / 503 / 504; ``retry_after`` when the gateway gave one
│   └── ConnectionLost            /ws: the connection was lost and could not be opened again
└── RpcError                      a JSON-RPC error inside HTTP 200 or on the socket (the node's, or a free refusal)

An error from ``/ws`` carries the HTTP status of the same refusal in ``status`` and the close code
(or the JSON-RPC code of an answer on the socket) in ``code``; :class:`ConnectionLost` has status 0
(no answer) and the last close code, None after a network error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson


class GatewayError(Exception):
    """A refusal or failure answered by the gateway."""

    def __init__(
        self, status: int, code: str | int | None, message: str, request_id: str | None = None, data: Any = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.data = data


class InvalidRequest(GatewayError):
    """The request was malformed (400)."""


class AuthFailed(GatewayError):
    """Credentials were presented but are invalid; the message says which and how (401)."""


class PaymentRequired(GatewayError):
    """No credits: ``terms`` is the deposit data (address, mint, minimum, instructions) (402)."""

    @property
    def terms(self) -> Mapping[str, Any]:
        return self.data if isinstance(self.data, Mapping) else {}


class InsufficientCredits(PaymentRequired):
    """The account exists but its credits do not cover the call (402 -32010)."""


class Forbidden(GatewayError):
    """Refused for good (403): a replayed nonce, a suspended account."""


class NonceReused(Forbidden):
    """This (public key, nonce) pair was used before: sign again with a new nonce (403)."""


class NotFound(GatewayError):
    """No such account or resource (404)."""


class RateLimited(GatewayError):
    """Too many requests or calls in flight (429); retry after ``retry_after`` seconds."""

    def __init__(self, *args: Any, retry_after: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class BackendUnavailable(GatewayError):
    """The node or a store is unavailable, or the call timed out (502, 503, 504)."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class ConnectionLost(BackendUnavailable):
    """A WebSocket stream lost its connection and could not open it again within its retries (status 0)."""


class RpcError(GatewayError):
    """A JSON-RPC error answered inside HTTP 200: ``code`` is the JSON-RPC code."""


def error_from_answer(status: int, headers: Mapping[str, str], body: Any) -> GatewayError | None:
    """The error an HTTP answer carries, or None for a success. ``headers`` names are lower-case;
    ``body`` is the parsed JSON (anything else is reported as it is)."""
    error = body.get("error") if isinstance(body, dict) else None
    if status == 200:
        if isinstance(error, dict):
            return RpcError(200, error.get("code"), str(error.get("message", "")), None, error.get("data"))
        return None
    if 200 < status < 300:
        return None  # 201 Created (a new webhook) and the like: a success with no JSON-RPC inside
    if not isinstance(error, dict):
        return GatewayError(status, None, str(body)[:300])
    code = error.get("code")
    message = str(error.get("message", ""))
    request_id = error.get("requestId") or headers.get("x-request-id")
    data = error.get("data")
    args = (status, code, message, request_id, data)
    retry_after = _seconds(headers.get("retry-after"))
    if status == 402:
        return InsufficientCredits(*args) if code in (-32010, "INSUFFICIENT_CREDITS") else PaymentRequired(*args)
    if status == 429:
        return RateLimited(*args, retry_after=retry_after or 1.0)
    if status in (502, 503, 504):
        return BackendUnavailable(*args, retry_after=retry_after)
    if status == 403:
        return NonceReused(*args) if code == "NONCE_REUSED" else Forbidden(*args)
    kind = {400: InvalidRequest, 401: AuthFailed, 404: NotFound}.get(status, GatewayError)
    return kind(*args)


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


#: WebSocket close codes after which reconnecting cannot help (docs/api.md, Errors).
AUTH_CLOSE_CODES = frozenset({1008, 4001})
INSUFFICIENT_CREDITS_CLOSE = 4002
RATE_LIMITED_CLOSE = 4003


def error_from_close(code: int | None, reason: str) -> GatewayError | None:
    """The error a ``/ws`` close code stands for, or None for one that says nothing about the caller
    (normal, going away, abnormal, restart, try again later: the caller may connect again)."""
    message = reason or f"closed {code}"
    if code in AUTH_CLOSE_CODES:
        return AuthFailed(401, code, message)
    if code == INSUFFICIENT_CREDITS_CLOSE:
        return InsufficientCredits(402, code, message)
    if code == RATE_LIMITED_CLOSE:
        return RateLimited(429, code, message, retry_after=1.0)
    return None


def answer_or_raise(status: int, headers: Mapping[str, str], raw: bytes) -> Any:
    """An answer's body, decoded (JSON, else its text), or its typed error raised."""
    try:
        answer: Any = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        answer = raw.decode("utf-8", "replace")
    error = error_from_answer(status, headers, answer)
    if error is not None:
        raise error
    return answer
