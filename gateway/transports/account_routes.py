"""HTTP routes of the session and account endpoints, mounted beside the JSON-RPC routes.

Each route turns the request into a :class:`Call` and runs it through ``error_boundary`` (and
``AuthStage`` where the spec wants credentials), so its errors have exactly the shapes of the
JSON-RPC endpoint's. Mount with ``routes.extend(auth_routes(gw.auth))`` in ``build_http_app``.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.auth.endpoints import AccountEndpoints
from gateway.auth.services import AuthServices
from gateway.auth.stage import AuthStage
from gateway.transports.routing import mount


def auth_routes(services: AuthServices) -> list[BaseRoute]:
    """``/auth/challenge``, ``/auth/verify``, ``/auth/logout`` and the ``/account/*`` reads and key creation."""
    endpoints = AccountEndpoints(services)
    any_mode = AuthStage(services, require_account=False)
    wallet_only = AuthStage(services, require_account=False, only="wallet")
    bearer_only = AuthStage(services, require_account=False, only="session")
    return [
        mount("/auth/challenge", "POST", [], endpoints.challenge),
        mount("/auth/verify", "POST", [], endpoints.verify),
        mount("/auth/logout", "POST", [bearer_only], endpoints.logout),
        mount("/account/api-key", "POST", [wallet_only], endpoints.create_api_key),
        mount("/account/info", "GET", [any_mode], endpoints.info),
        mount("/account/ledger", "GET", [any_mode], endpoints.ledger),
        mount("/account/history", "GET", [any_mode], endpoints.history),
    ]
