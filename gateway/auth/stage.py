"""``AuthStage``: the pipeline stage that sets ``call.identity`` (or refuses with 401/402/403/503).

It sits right after ``error_boundary``, so every refusal renders like every other error, the 402
with its payment terms included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from gateway.auth.authenticator import Only
from gateway.core.identity import Identity
from gateway.pipeline.stages import Call, Handler, Reply, Stage

if TYPE_CHECKING:
    from gateway.auth.services import AuthServices


class AuthStage:
    """``async (call, next) -> Reply``; built before start-up, it reads the services' stores per call."""

    def __init__(
        self,
        services: AuthServices,
        *,
        require_account: bool = True,
        require_funds: bool = False,
        only: Only | None = None,
        payment: PaymentHook | None = None,
    ) -> None:
        self.services = services
        self.require_account = require_account
        self.require_funds = require_funds  # the route bills its calls: an account known to have none is refused
        self.only = only
        self.payment = payment

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        authenticator = self.services.authenticator
        identity = authenticator.from_cache(call) if self.only is None else None
        if identity is None and self.payment is not None and self.payment.offered(call):
            identity = await self.payment(call)  # x402: settled and credited, the call is its payer's
        if identity is None:
            identity = await authenticator.authenticate(
                call, require_account=self.require_account, require_funds=self.require_funds, only=self.only
            )
        call.identity = identity
        access = self.services.access  # the account's access rules (gateway.access): 403 ACCESS_DENIED
        if access is not None and (pending := access.check(call, identity)) is not None:
            await pending
        return await next_handler(call)


class PaymentHook(Protocol):
    """Pays for a call that carries an x402 payment and no credentials (gateway.x402.paid), or raises."""

    def offered(self, call: Call) -> bool: ...

    async def __call__(self, call: Call) -> Identity: ...


class Gates(Protocol):
    """What a feature's routes put in front of their endpoints: the per-address limit of a group and the
    auth stage (:class:`gateway.app.replica.GatewayApp` is one)."""

    def limit(self, group: str) -> Stage: ...

    def account_stage(self, only: Only | None = None, *, require_account: bool = False) -> AuthStage: ...
