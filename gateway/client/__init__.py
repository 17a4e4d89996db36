"""The gateway's client library: sign requests, call the API with typed errors, use solana-py.

Needs nothing of the server side (an import contract of ``make check``)::

    WalletSigner        docs/api.md's per-request signature and session challenges (signer.py)
    GatewayClient       async HTTP client: JSON-RPC and account routes, retries, credit headers (http.py)
    SignalStream        ``GatewayClient.signals()``: the /ws signal stream, resumed and de-duplicated
                        (signals.py; its parts without I/O in signal_parts.py)
    solana_client       solana-py's AsyncClient with gateway credentials; gateway_error (solana.py)
    dev_wallet_path     where the dev wallet and its API key are: GATEWAY_WALLET, GATEWAY_HOME,
                        GATEWAY_API_KEY (dev_wallet.py)
    errors              one exception per documented error (errors.py)
"""

from __future__ import annotations

from gateway.client.dev_wallet import (
    api_key_path,
    dev_api_key,
    dev_wallet_path,
    gateway_home,
    require_dev_api_key,
    saved_api_key,
)
from gateway.client.errors import (
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
from gateway.client.http import GatewayClient, Meter
from gateway.client.signals import SignalEvent, SignalFilter, SignalStream, StreamOptions
from gateway.client.signer import WalletSigner
from gateway.client.solana import WalletAuth, gateway_error, solana_client

#: Signal helpers (``GatewayClient.signals``) exist from 0.2.8 on (docs/api.md's Versioning);
#: ``GatewayClient.x402_settle`` from 0.2.9 on.
__version__ = "0.2.9"

__all__ = [
    "AuthFailed",
    "BackendUnavailable",
    "ConnectionLost",
    "Forbidden",
    "GatewayClient",
    "GatewayError",
    "InsufficientCredits",
    "InvalidRequest",
    "Meter",
    "NonceReused",
    "NotFound",
    "PaymentRequired",
    "RateLimited",
    "RpcError",
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
]
