"""HTTP routes of the bulk lookups (``POST /bulk/*``), mounted beside the JSON-RPC routes.

Each runs ``error_boundary``, JSON-RPC's auth stage (a funded account is needed), the credit headers
and the readiness gate, then its endpoint (built by :class:`gateway.app.GatewayApp`), which meters
its items itself: all of them at once, or none. Errors have the REST body, except the 402s, which
are JSON-RPC shaped on every route.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.app import GatewayApp
from gateway.transports.routing import mount


def bulk_routes(gw: GatewayApp) -> list[BaseRoute]:
    """``/bulk/getBalances``, ``/bulk/getTokenBalances``, ``/bulk/getTransactions``."""
    return [mount(f"/bulk/{name}", "POST", gw.bulk_stages(), endpoint) for name, endpoint in gw.bulk.items()]
