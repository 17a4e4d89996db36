"""The public documents' routes: ``GET /health``, ``/pricing`` and ``/capabilities``, free and without
credentials (their bodies: :mod:`gateway.public.documents`; ``/pricing`` under its per-address limit)."""

from __future__ import annotations

from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.auth.services import AuthServices
from gateway.base.config import ServiceSettings
from gateway.core.errors import ProxyError
from gateway.core.methods import PriceTable, Registry
from gateway.core.subscriptions import Limits
from gateway.grpc.rules import StreamLimits
from gateway.node.pool import NodePool
from gateway.pipeline.declaration import LocalMethod
from gateway.pipeline.http import call_from_scope, to_response
from gateway.pipeline.stages import Call, Reply, Stage, json_reply
from gateway.public.documents import ServiceProfile, capabilities_document, health_document, pricing_document


class PublicHost(Protocol):
    """What the public documents read from the replica."""

    @property
    def settings(self) -> ServiceSettings: ...

    @property
    def upstream(self) -> NodePool: ...

    @property
    def profile(self) -> ServiceProfile: ...

    @property
    def started_at(self) -> float: ...

    @property
    def auth(self) -> AuthServices: ...

    @property
    def prices(self) -> PriceTable: ...

    @property
    def methods(self) -> Registry[LocalMethod]: ...

    @property
    def ws_limits(self) -> Limits: ...

    @property
    def grpc_limits(self) -> StreamLimits: ...

    def limit(self, group: str) -> Stage:
        """The per-address limit of ``group`` (settings ``ip_limits``)."""

    async def trade_pricing(self) -> dict[str, Any]:
        """The trade builders' part of ``GET /pricing``."""


def public_routes(host: PublicHost) -> list[BaseRoute]:
    async def health(request: Request) -> Response:
        status, doc = health_document(host.upstream.view, host.profile, host.started_at, host.auth.keys_view())
        return to_response(json_reply(status, doc))

    limit_pricing = host.limit("pricing")

    async def pricing(request: Request) -> Response:
        try:
            reply = await limit_pricing(call_from_scope(request.scope, b""), pricing_reply)
        except ProxyError as exc:  # 429 with Retry-After; like the 200, no X-Request-Id (docs/api.md)
            reply = json_reply(exc.status, exc.http_body(None), dict(exc.headers))
        return to_response(reply)

    async def pricing_reply(call: Call) -> Reply:
        s = host.settings
        document = pricing_document(
            host.prices,
            s.credits_per_usdc,
            s.credit_expiry_seconds,
            host.methods,
            await host.trade_pricing(),  # concurrent callers share one node read (CachedRate)
            ws_limits=host.ws_limits,
            grpc_limits=host.grpc_limits,
        )
        return json_reply(200, document)

    async def capabilities(request: Request) -> Response:
        return to_response(json_reply(200, capabilities_document(host.profile, host.ws_limits, host.grpc_limits)))

    return [
        Route("/health", health, methods=["GET"]),
        Route("/pricing", pricing, methods=["GET"]),
        Route("/capabilities", capabilities, methods=["GET"]),
    ]
