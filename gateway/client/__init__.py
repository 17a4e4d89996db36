"""``gateway.client``, kept importable for one release (0.2.9 → 0.3.0): the client library is now a
distribution of its own, ``solana-credit-gateway-client``, imported as ``gateway_client``
(clients/python/). Import from ``gateway_client``; this package only re-exports it.

Its submodules (``gateway.client.signals``, ``.errors``, ...) are the client's own module objects under
the old names, so that code importing or patching them sees the same objects.
"""

from __future__ import annotations

import importlib
import sys

from gateway_client import *  # noqa: F403  # the re-export is the point
from gateway_client import __all__ as __all__
from gateway_client import __version__ as __version__

_SUBMODULES = (
    "account",
    "dev_wallet",
    "errors",
    "http",
    "session",
    "signal_parts",
    "signals",
    "signer",
    "signing",
    "solana",
    "webhooks",
)
for _name in _SUBMODULES:
    _module = importlib.import_module(f"gateway_client.{_name}")
    sys.modules[f"{__name__}.{_name}"] = _module
    globals()[_name] = _module
