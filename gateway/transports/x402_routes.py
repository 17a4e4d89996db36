"""HTTP route of x402 settlement (``POST /x402/settle``), mounted beside the JSON-RPC routes.

Unauthenticated (spec): ``error_boundary``, then the per-address limit of the ``x402_settle`` group
(each settlement makes the node simulate and send, and a sponsored one spends the fee payer's SOL),
then the endpoint (:class:`gateway.products.x402_settle.X402Settle`, built by
:class:`gateway.app.GatewayApp`). The body is read up to :data:`gateway.core.x402.MAX_BODY_BYTES`
(a base64 transaction of the largest version in ``{"transaction": ...}``); larger gets 413 unread.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.app import GatewayApp
from gateway.core.x402 import MAX_BODY_BYTES
from gateway.transports.routing import mount

SETTLE_PATH = "/x402/settle"


def x402_routes(gw: GatewayApp) -> list[BaseRoute]:
    return [mount(SETTLE_PATH, "POST", [gw.ip_limits.stage("x402_settle")], gw.x402_settle, MAX_BODY_BYTES)]
