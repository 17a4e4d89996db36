"""Access rules and the daily spend cap, as the one list (``gateway/app/features.py``) takes them: their
``/account/*`` routes and their part of the OpenAPI document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.routing import BaseRoute

from gateway.access.api_doc import API_DOC
from gateway.access.endpoints import AccessEndpoints, SpendCapEndpoints
from gateway.access.routes import access_routes
from gateway.auth.stage import Gates
from gateway.pipeline.declaration import Feature


class AccessHost(Gates, Protocol):
    @property
    def access_endpoints(self) -> AccessEndpoints: ...

    @property
    def spend_cap_endpoints(self) -> SpendCapEndpoints: ...


def _routes(host: AccessHost) -> Sequence[BaseRoute]:
    return access_routes(host, host.access_endpoints, host.spend_cap_endpoints)


FEATURE: Feature[AccessHost] = Feature("access", routes=_routes, api=(API_DOC,))
