"""HTTP routes of the bulk lookups (``POST /bulk/*``), mounted beside the JSON-RPC routes.

Each runs ``error_boundary``, JSON-RPC's auth stage (a funded account is needed), the credit headers
and the readiness gate, then its endpoint (built by :class:`gateway.app.replica.GatewayApp`), which meters
its items itself: all of them at once, or none. Errors have the REST body, except the 402s, which
are JSON-RPC shaped on every route.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.routing import BaseRoute

from gateway.pipeline.http import mount
from gateway.pipeline.stages import Handler, Stage


def bulk_routes(endpoints: Mapping[str, Handler], stages: list[Stage]) -> list[BaseRoute]:
    """``/bulk/getBalances``, ``/bulk/getTokenBalances``, ``/bulk/getTransactions``."""
    return [mount(f"/bulk/{name}", "POST", stages, endpoint) for name, endpoint in endpoints.items()]
