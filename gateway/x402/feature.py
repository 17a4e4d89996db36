"""x402, as the one list (``gateway/app/features.py``) takes it: ``/x402/*`` and its part of the OpenAPI
document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.routing import BaseRoute

from gateway.auth.stage import Gates
from gateway.pipeline.declaration import Feature
from gateway.x402.api_doc import API_DOC
from gateway.x402.routes import x402_routes
from gateway.x402.settle import X402Settle


class X402Host(Gates, Protocol):
    @property
    def x402_settle(self) -> X402Settle: ...


def _routes(host: X402Host) -> Sequence[BaseRoute]:
    return x402_routes(host, host.x402_settle)


FEATURE: Feature[X402Host] = Feature("x402", routes=_routes, api=(API_DOC,))
