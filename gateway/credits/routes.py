"""``POST /account/confirm-deposit``, mounted after the account's other routes: the per-address limit of
the ``deposit_confirm`` group, then the auth stage (any credential mode, no account needed: a first
deposit makes it), then the endpoint (:class:`gateway.credits.confirm.ConfirmDepositEndpoint`)."""

from __future__ import annotations

from typing import Protocol

from starlette.routing import BaseRoute

from gateway.pipeline.http import mount
from gateway.pipeline.stages import Handler, Stage

CONFIRM_DEPOSIT_PATH = "/account/confirm-deposit"


class DepositGates(Protocol):
    """What the route is put behind (the replica's, as ``gateway.auth.stage.Gates``, which credits,
    beside auth in the layers, cannot import)."""

    def limit(self, group: str) -> Stage: ...

    def account_stage(self) -> Stage: ...


def confirm_deposit_routes(gates: DepositGates, endpoint: Handler) -> list[BaseRoute]:
    return [mount(CONFIRM_DEPOSIT_PATH, "POST", [gates.limit("deposit_confirm"), gates.account_stage()], endpoint)]
