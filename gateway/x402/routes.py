"""HTTP route of x402 settlement (``POST /x402/settle``), mounted beside the JSON-RPC routes.

Unauthenticated (docs/api.md): ``error_boundary``, then the per-address limit of the ``x402_settle`` group
(each settlement makes the node simulate and send, and a sponsored one spends the fee payer's SOL),
then the endpoint (:class:`gateway.x402.settle.X402Settle`, built by
:class:`gateway.app.GatewayApp`). The body is read up to :data:`gateway.x402.rules.MAX_BODY_BYTES`
(a base64 transaction of the largest version in ``{"transaction": ...}``); larger gets 413 unread.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.auth.stage import Gates
from gateway.pipeline import Handler
from gateway.pipeline_http import mount
from gateway.x402.rules import MAX_BODY_BYTES

SETTLE_PATH = "/x402/settle"


def x402_routes(gates: Gates, settle: Handler) -> list[BaseRoute]:
    return [mount(SETTLE_PATH, "POST", [gates.limit("x402_settle")], settle, MAX_BODY_BYTES)]
