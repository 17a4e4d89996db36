"""Which credentials a request carries, per transport. Pure: no lookups, no verification here.

Every transport reduces its request to one :class:`Credentials` value, so the strategies that check
credentials are shared by HTTP, WebSocket and gRPC:

    HTTP        ``X-Api-Key`` header, else the ``api-key`` query parameter; the four ``X-*`` wallet
                headers; ``Authorization: Bearer <session token>``
    WebSocket   the same, plus ``Sec-WebSocket-Protocol: auth.<api key>, solana-rpc`` (browsers cannot
                set headers on a WebSocket, so the key travels as an offered subprotocol)
    gRPC        metadata ``x-token``, which may be an API key or a session token

A header that is present but empty still counts as a presented credential: it is refused with 401,
not answered with the 402 meant for callers that brought nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gateway.core.wallet_headers import WALLET_HEADERS, has_wallet_headers

API_KEY_HEADER = "x-api-key"
API_KEY_QUERY = "api-key"
AUTHORIZATION = "authorization"
WS_PROTOCOL = "sec-websocket-protocol"
WS_AUTH_PREFIX = "auth."
GRPC_TOKEN = "x-token"


@dataclass(frozen=True, slots=True)
class Credentials:
    """Credentials as presented, unverified. ``authorization`` is the raw header (scheme included)."""

    api_key: str | None = None
    wallet: Mapping[str, str] | None = None  # whichever of the four wallet headers are present
    authorization: str | None = None
    token: str | None = None  # gRPC ``x-token``: an API key or a session token

    @property
    def empty(self) -> bool:
        return self.api_key is None and self.wallet is None and self.authorization is None and self.token is None


def _wallet(headers: Mapping[str, str]) -> Mapping[str, str] | None:
    if not has_wallet_headers(headers):
        return None
    return {name: headers[name] for name in WALLET_HEADERS if name in headers}


def bearer_token(authorization: str) -> str | None:
    """The token of ``Bearer <token>`` (scheme case-insensitive), or None for any other form."""
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def http_credentials(headers: Mapping[str, str], query: Mapping[str, str]) -> Credentials:
    """Credentials of an HTTP request; ``headers`` has lower-case names."""
    api_key = headers.get(API_KEY_HEADER)
    if api_key is None:
        api_key = query.get(API_KEY_QUERY)
    return Credentials(api_key=api_key, wallet=_wallet(headers), authorization=headers.get(AUTHORIZATION))


@dataclass(frozen=True, slots=True)
class WebSocketAuth:
    """What a WebSocket upgrade carries: its credentials, and the subprotocol to accept (echo) if any."""

    credentials: Credentials
    subprotocol: str | None


def websocket_credentials(headers: Mapping[str, str], query: Mapping[str, str] | None = None) -> WebSocketAuth:
    """Credentials of a WebSocket upgrade request.

    ``Sec-WebSocket-Protocol: auth.<key>, solana-rpc`` yields the API key ``<key>`` and the subprotocol
    ``solana-rpc`` to echo: the server must accept one of the offered entries, and never the one that
    holds the key (it would be echoed back in clear). With no other entry, nothing is echoed.
    """
    base = http_credentials(headers, query or {})
    offered = [p.strip() for p in headers.get(WS_PROTOCOL, "").split(",") if p.strip()]
    key_entries = [p[len(WS_AUTH_PREFIX) :] for p in offered if p.startswith(WS_AUTH_PREFIX)]
    others = [p for p in offered if not p.startswith(WS_AUTH_PREFIX)]
    api_key = base.api_key
    if api_key is None and key_entries:
        api_key = key_entries[0]
    credentials = Credentials(api_key=api_key, wallet=base.wallet, authorization=base.authorization)
    return WebSocketAuth(credentials, others[0] if others else None)


def grpc_credentials(metadata: Mapping[str, str] | Iterable[tuple[str, str | bytes]]) -> Credentials:
    """Credentials of a gRPC call from its metadata (a mapping or grpc's sequence of pairs)."""
    pairs = metadata.items() if isinstance(metadata, Mapping) else metadata
    for name, value in pairs:
        if name.lower() == GRPC_TOKEN:
            text = value.decode("latin-1") if isinstance(value, bytes) else value
            return Credentials(token=text.strip())
    return Credentials()
