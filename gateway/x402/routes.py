"""HTTP routes of x402 settlement (``POST /x402/settle``, ``GET /x402/blockhash``), mounted beside the
JSON-RPC routes.

Unauthenticated (docs/api.md): ``error_boundary``, then the per-address limit of the ``x402_settle`` group
(each settlement makes the node simulate and send, and a sponsored one spends the fee payer's SOL; the
blockhash a payment is built on counts in the same group), then the endpoint
(:class:`gateway.x402.settle.X402Settle`, built by :class:`gateway.app.replica.GatewayApp`, and
:class:`gateway.x402.blockhash.RecentBlockhash`). The body is read up to
:data:`gateway.x402.rules.MAX_BODY_BYTES` (a base64 transaction of the largest version in
``{"transaction": ...}``); larger gets 413 unread.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.auth.stage import Gates
from gateway.pipeline.http import mount
from gateway.pipeline.stages import Call, Reply
from gateway.x402.blockhash import BLOCKHASH_PATH, RecentBlockhash
from gateway.x402.rules import MAX_BODY_BYTES
from gateway.x402.settle import X402Settle

SETTLE_PATH = "/x402/settle"


def x402_routes(gates: Gates, settle: X402Settle) -> list[BaseRoute]:
    blockhash = RecentBlockhash(settle.upstream)

    async def recent(call: Call) -> Reply:
        settle.configured()  # 503 where settlement is off: no sponsored payment to build
        return await blockhash(call)

    limit = gates.limit("x402_settle")
    return [
        mount(SETTLE_PATH, "POST", [limit], settle, MAX_BODY_BYTES),
        mount(BLOCKHASH_PATH, "GET", [limit], recent),
    ]
