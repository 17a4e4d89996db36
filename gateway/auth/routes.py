"""HTTP routes of the session and account endpoints, mounted beside the JSON-RPC routes.

Each route turns the request into a :class:`Call` and runs it through ``error_boundary``, the
per-address limit of its group, and the auth stage where docs/api.md wants credentials, so its errors
have exactly the shapes of the JSON-RPC endpoint's. The endpoints are built by
:class:`gateway.app.replica.GatewayApp`.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.auth.endpoints import AccountEndpoints
from gateway.auth.stage import Gates
from gateway.auth.usage_totals import usage_routes
from gateway.pipeline.http import mount


def account_routes(gates: Gates, endpoints: AccountEndpoints) -> list[BaseRoute]:
    """``/auth/*`` and the account's own ``/account/*`` (``/account/confirm-deposit`` is credits')."""
    limit = gates.limit
    any_mode = gates.account_stage()
    session, reads = limit("session"), limit("account_read")
    return [
        mount("/auth/challenge", "POST", [session], endpoints.challenge),
        mount("/auth/verify", "POST", [session], endpoints.verify),
        mount("/auth/logout", "POST", [session, gates.account_stage("session")], endpoints.logout),
        mount(
            "/account/api-key",
            "POST",
            [limit("account_create"), gates.account_stage("wallet")],
            endpoints.create_api_key,
        ),
        mount("/account/info", "GET", [reads, any_mode], endpoints.info),
        mount("/account/ledger", "GET", [reads, any_mode], endpoints.ledger),
        mount("/account/history", "GET", [reads, any_mode], endpoints.history),
        # listing is a read; ending sessions is session work (the endpoint refuses all but the owner's proof)
        mount("/account/sessions", "GET", [reads, any_mode], endpoints.list_sessions),
        mount("/account/sessions", "DELETE", [session, any_mode], endpoints.end_sessions),
        mount("/account/sessions/{id}", "DELETE", [session, any_mode], endpoints.end_session),
        *usage_routes(gates, endpoints.usage),
    ]
