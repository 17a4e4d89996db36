"""HTTP routes of the session and account endpoints, mounted beside the JSON-RPC routes.

Each route turns the request into a :class:`Call` and runs it through ``error_boundary`` (and the
auth stage where the spec wants credentials), so its errors have exactly the shapes of the JSON-RPC
endpoint's. The endpoints themselves are built by :class:`gateway.app.GatewayApp`.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.app import GatewayApp
from gateway.transports.routing import mount


def account_routes(gw: GatewayApp) -> list[BaseRoute]:
    """``/auth/*`` and ``/account/*``."""
    endpoints = gw.accounts
    any_mode = gw.account_stage()
    return [
        mount("/auth/challenge", "POST", [], endpoints.challenge),
        mount("/auth/verify", "POST", [], endpoints.verify),
        mount("/auth/logout", "POST", [gw.account_stage("session")], endpoints.logout),
        mount("/account/api-key", "POST", [gw.account_stage("wallet")], endpoints.create_api_key),
        mount("/account/info", "GET", [any_mode], endpoints.info),
        mount("/account/ledger", "GET", [any_mode], endpoints.ledger),
        mount("/account/history", "GET", [any_mode], endpoints.history),
        mount("/account/confirm-deposit", "POST", [any_mode], gw.confirm_deposit),
    ]
