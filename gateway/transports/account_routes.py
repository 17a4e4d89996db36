"""HTTP routes of the session and account endpoints, mounted beside the JSON-RPC routes.

Each route turns the request into a :class:`Call` and runs it through ``error_boundary``, the
per-address limit of its group, and the auth stage where the spec wants credentials, so its errors
have exactly the shapes of the JSON-RPC endpoint's. The endpoints are built by
:class:`gateway.app.GatewayApp`.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.app import GatewayApp
from gateway.transports.routing import mount


def account_routes(gw: GatewayApp) -> list[BaseRoute]:
    """``/auth/*`` and ``/account/*``."""
    endpoints = gw.accounts
    limit = gw.ip_limits.stage
    any_mode = gw.account_stage()
    session, reads = limit("session"), limit("account_read")
    return [
        mount("/auth/challenge", "POST", [session], endpoints.challenge),
        mount("/auth/verify", "POST", [session], endpoints.verify),
        mount("/auth/logout", "POST", [session, gw.account_stage("session")], endpoints.logout),
        mount(
            "/account/api-key", "POST", [limit("account_create"), gw.account_stage("wallet")], endpoints.create_api_key
        ),
        mount("/account/info", "GET", [reads, any_mode], endpoints.info),
        mount("/account/ledger", "GET", [reads, any_mode], endpoints.ledger),
        mount("/account/history", "GET", [reads, any_mode], endpoints.history),
        mount("/account/confirm-deposit", "POST", [limit("deposit_confirm"), any_mode], gw.confirm_deposit),
    ]
