"""The features an HTTP replica serves, in one list: each one's routes (built from the replica's
:class:`GatewayApp`) and its parts of the OpenAPI document. A feature's routes and their description
are its package and one line here: ``gateway/transports/http.py`` mounts the routes in this order
(Starlette matches in order) and ``gateway/openapi.py`` describes them in the same order.

The JSON-RPC methods stay declared in ``gateway/app.py``'s ``method_registry``: the app builds the
handlers and sits below this list (the layers contract), so it cannot read it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from starlette.routing import BaseRoute

from gateway.access.api_doc import API_DOC as ACCESS_DOC
from gateway.access.routes import access_routes
from gateway.app import GatewayApp
from gateway.auth.api_doc import API_DOC as AUTH_DOC
from gateway.auth.routes import account_routes
from gateway.bulk.api_doc import API_DOC as BULK_DOC
from gateway.bulk.routes import bulk_routes
from gateway.core.api_doc import ApiDoc
from gateway.credits.api_doc import API_DOC as CREDITS_DOC
from gateway.sending.api_doc import API_DOC as RELAY_DOC
from gateway.sending.routes import relay_routes
from gateway.signals.api_doc import API_DOC as SIGNALS_DOC
from gateway.signals.routes import signal_routes
from gateway.webhooks.api_doc import API_DOC as WEBHOOKS_DOC
from gateway.webhooks.routes import webhook_routes
from gateway.webui.routes import webui_routes
from gateway.x402.api_doc import API_DOC as X402_DOC
from gateway.x402.routes import x402_routes


@dataclass(frozen=True)
class Feature:
    name: str
    routes: Callable[[GatewayApp], Sequence[BaseRoute]]
    #: its parts of the OpenAPI document (none for the web UI's pages)
    api: tuple[ApiDoc, ...] = ()


def _relay(gw: GatewayApp) -> Sequence[BaseRoute]:
    """Only with a block engine configured (the embedded default has one)."""
    return relay_routes(gw.relay_stages, gw.forwarder) if gw.engine is not None else []


FEATURES: tuple[Feature, ...] = (
    # /account/confirm-deposit is credits', mounted with the account's other routes
    Feature("accounts", lambda gw: account_routes(gw, gw.accounts, gw.confirm_deposit), (AUTH_DOC, CREDITS_DOC)),
    Feature("access", lambda gw: access_routes(gw, gw.access_endpoints, gw.spend_cap_endpoints), (ACCESS_DOC,)),
    Feature("bulk", lambda gw: bulk_routes(gw.bulk, gw.bulk_stages()), (BULK_DOC,)),
    Feature("signals", lambda gw: signal_routes(gw, lambda: gw.signal_log), (SIGNALS_DOC,)),
    Feature("webhooks", lambda gw: webhook_routes(gw, gw.webhooks), (WEBHOOKS_DOC,)),
    Feature("x402", lambda gw: x402_routes(gw, gw.x402_settle), (X402_DOC,)),
    Feature("webui", lambda gw: webui_routes()),
    Feature("relay", _relay, (RELAY_DOC,)),
)


def feature_routes(gw: GatewayApp) -> list[BaseRoute]:
    """Every feature's routes, in the list's order."""
    return [route for feature in FEATURES for route in feature.routes(gw)]
