"""The features a replica serves, in one list: each one's declaration (``<feature>/feature.py``, a
:class:`gateway.pipeline.declaration.Feature`) names its JSON-RPC methods and how their handlers are built, its
routes and their parts of the OpenAPI document, and its settings model. Adding a feature touches its
folder and this list.

Below the app (``gateway/app/replica.py``), which builds from it the method registry (:func:`method_registry`)
and its handlers; ``gateway/transports/http.py`` mounts the routes in the list's order (Starlette
matches in order) and ``gateway/transports/openapi.py`` describes them in the same order.

A feature's builders read the replica through the protocol its declaration names; :class:`Host` joins
them, and the app hands itself as one (mypy checks that it is). Its routes are declared there too,
typed the same way: the endpoints they mount are built by the app, which wires what they share (the
meter, the stores, the stages), and a feature's protocol names the ones it mounts. :class:`AppSettings` joins the
features' settings models: an explicit class, so that mypy types every ``settings.<field>``
(``tests/test_features.py`` fails when a declared model is not among its bases).
"""

from __future__ import annotations

from typing import Protocol

from starlette.routing import BaseRoute

from gateway.access.feature import FEATURE as ACCESS
from gateway.access.feature import AccessHost
from gateway.auth.authenticator import Only
from gateway.auth.feature import FEATURE as AUTH
from gateway.auth.feature import AuthHost
from gateway.auth.stage import AuthStage
from gateway.bulk.feature import FEATURE as BULK
from gateway.bulk.feature import BulkHost
from gateway.callers.services import AccountSettings
from gateway.core.methods import Registry
from gateway.credits.feature import FEATURE as CREDITS
from gateway.credits.feature import CreditsHost
from gateway.fees.feature import FEATURE as FEES
from gateway.grpc.feature import FEATURE as GRPC
from gateway.grpc.settings import GrpcSettings
from gateway.history.feature import FEATURE as HISTORY
from gateway.limits.feature import FEATURE as LIMITS
from gateway.pipeline.declaration import Feature, LocalMethod
from gateway.public.feature import FEATURE as PUBLIC
from gateway.public.routes import PublicHost
from gateway.rpc.feature import FEATURE as RPC
from gateway.rpc.settings import RpcSettings
from gateway.sending.feature import FEATURE as SENDING
from gateway.sending.feature import SendingHost
from gateway.sending.settings import SendingSettings
from gateway.signals.feature import FEATURE as SIGNALS
from gateway.signals.feature import SignalsHost
from gateway.signals.settings import SignalSettings
from gateway.trades.feature import FEATURE as TRADES
from gateway.trades.feature import TradesHost
from gateway.trades.settings import TradeSettings
from gateway.webhooks.feature import FEATURE as WEBHOOKS
from gateway.webhooks.feature import WebhooksHost
from gateway.webhooks.settings import WebhookSettings
from gateway.webui.feature import FEATURE as WEBUI
from gateway.x402.feature import FEATURE as X402
from gateway.x402.feature import X402Host


class AppSettings(
    AccountSettings, GrpcSettings, RpcSettings, SendingSettings, SignalSettings, TradeSettings, WebhookSettings
):
    """What a replica reads: the settings of every feature it serves (the gRPC stream's limits for /pricing;
    auth's, credits' and the limits' through :class:`AccountSettings`)."""


class Host(
    PublicHost,
    AuthHost,
    CreditsHost,
    AccessHost,
    BulkHost,
    SignalsHost,
    WebhooksHost,
    X402Host,
    TradesHost,
    SendingHost,
    Protocol,
):
    """Everything the features' builders read from the replica (:class:`gateway.app.replica.GatewayApp`)."""

    @property
    def settings(self) -> AppSettings: ...

    def account_stage(self, only: Only | None = None, *, require_account: bool = False) -> AuthStage:
        """Auth's (``Gates``), which also serves credits' route (``DepositGates``: credits cannot name it)."""


#: In the order their routes are mounted and described (the methods' order is not seen: every list of
#: them a client gets is sorted).
FEATURES: tuple[Feature[Host], ...] = (
    PUBLIC,  # /health, /pricing, /capabilities: first, as they were mounted before the list
    RPC,
    FEES,
    HISTORY,
    TRADES,
    AUTH,
    CREDITS,
    LIMITS,
    ACCESS,
    BULK,
    SIGNALS,
    WEBHOOKS,
    X402,
    GRPC,
    WEBUI,
    SENDING,  # its /relay/* routes last, as they were mounted before the list
)


def method_registry(host: Host | None = None) -> Registry[LocalMethod]:
    """Every JSON-RPC method, each declared once by its feature (a name declared twice is refused here,
    at start), with the handlers each feature builds from ``host`` registered (none without one: the
    local methods are then refused, as planning and /pricing say)."""
    methods: Registry[LocalMethod] = Registry(*(feature.methods for feature in FEATURES))
    if host is not None:
        for feature in FEATURES:
            for name, handler in feature.handlers(host).items():
                methods.register(name, handler)
    return methods


def feature_routes(host: Host) -> list[BaseRoute]:
    """Every feature's routes, in the list's order."""
    return [route for feature in FEATURES for route in feature.routes(host)]
