"""Credits, as the one list (``gateway/app/features.py``) takes them: ``/account/confirm-deposit`` and its part
of the OpenAPI document, and the metering settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.routing import BaseRoute

from gateway.credits.api_doc import API_DOC
from gateway.credits.confirm import ConfirmDepositEndpoint
from gateway.credits.routes import DepositGates, confirm_deposit_routes
from gateway.credits.settings import CreditSettings
from gateway.pipeline.declaration import Feature


class CreditsHost(DepositGates, Protocol):
    @property
    def confirm_deposit(self) -> ConfirmDepositEndpoint: ...


def _routes(host: CreditsHost) -> Sequence[BaseRoute]:
    return confirm_deposit_routes(host, host.confirm_deposit)


FEATURE: Feature[CreditsHost] = Feature("credits", routes=_routes, api=(API_DOC,), settings=CreditSettings)
