"""The Solana credit gateway's Python client (distribution ``solana-credit-gateway-client``).

Sign requests, call the API with typed errors, follow the signal stream, verify webhooks; with the
``solana`` extra use solana-py through the gateway, with the ``grpc`` extra follow the Yellowstone
stream and resume it. Needs nothing of the server (an import contract of the server's ``make check``)::

    WalletSigner        docs/api.md's per-request signature and session challenges (signer.py; the
                        signing message in signing.py, which the server imports)
    SessionAuth         a session token renewed on a 401 and a /ws close 1008 (session.py)
    GatewayClient       async HTTP client: JSON-RPC and account routes, retries, credit headers (http.py)
    SignalStream        ``GatewayClient.signals()``: the /ws signal stream, resumed and de-duplicated
                        (signals.py; its parts without I/O in signal_parts.py)
    account             the ledger, the usage history and the prices (account.py)
    webhooks            verify_webhook: a delivery's signature, on the receiving side (webhooks.py)
    solana_client       solana-py's AsyncClient with gateway credentials; gateway_error (solana.py,
                        extra ``solana``)
    GeyserStream        the gRPC Subscribe stream resumed with from_slot (geyser.py, extra ``grpc``)
    dev_wallet_path     where the dev wallet and its API key are: GATEWAY_WALLET, GATEWAY_HOME,
                        GATEWAY_API_KEY (dev_wallet.py)
    errors              one exception per documented error (errors.py)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gateway_client.dev_wallet import (
    api_key_path,
    dev_api_key,
    dev_wallet_path,
    gateway_home,
    require_dev_api_key,
    saved_api_key,
)
from gateway_client.errors import (
    AuthFailed,
    BackendUnavailable,
    ConnectionLost,
    Forbidden,
    GatewayError,
    InsufficientCredits,
    InvalidRequest,
    NonceReused,
    NotFound,
    PaymentRequired,
    RateLimited,
    RpcError,
)
from gateway_client.http import GatewayClient, Meter
from gateway_client.session import SessionAuth
from gateway_client.signals import SignalEvent, SignalFilter, SignalStream, StreamOptions
from gateway_client.signer import WalletSigner
from gateway_client.webhooks import verify_webhook

if TYPE_CHECKING:
    from gateway_client.geyser import GeyserStream
    from gateway_client.solana import WalletAuth, gateway_error, solana_client

#: Signal helpers (``GatewayClient.signals``) exist from 0.2.8 on (docs/api.md's Client library);
#: ``GatewayClient.x402_settle`` from 0.2.9; this distribution of its own, ``SessionAuth`` and
#: ``GeyserStream`` from 0.3.0 (CHANGELOG.md).
__version__ = "0.3.0"

# The extras' names, imported when first used: ``import gateway_client`` works without solana-py or grpcio.
_LAZY = {
    "WalletAuth": "gateway_client.solana",
    "gateway_error": "gateway_client.solana",
    "solana_client": "gateway_client.solana",
    "GeyserStream": "gateway_client.geyser",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gateway_client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AuthFailed",
    "BackendUnavailable",
    "ConnectionLost",
    "Forbidden",
    "GatewayClient",
    "GatewayError",
    "GeyserStream",
    "InsufficientCredits",
    "InvalidRequest",
    "Meter",
    "NonceReused",
    "NotFound",
    "PaymentRequired",
    "RateLimited",
    "RpcError",
    "SessionAuth",
    "SignalEvent",
    "SignalFilter",
    "SignalStream",
    "StreamOptions",
    "WalletAuth",
    "WalletSigner",
    "api_key_path",
    "dev_api_key",
    "dev_wallet_path",
    "gateway_error",
    "gateway_home",
    "require_dev_api_key",
    "saved_api_key",
    "solana_client",
    "verify_webhook",
]
