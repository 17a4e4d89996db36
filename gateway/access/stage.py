"""``AccessMethods``: the JSON-RPC stage that applies an account's method rules to each item.

Placed right after parsing (its items are classified) and before metering, so a refused item costs
nothing: no rate unit, no credits, no node work::

    error_boundary → AuthStage → CreditHeaders → readiness → ParseStage → AccessMethods → MeteringStage → Forwarder

A refused single call stops with 403 ``ACCESS_DENIED`` (-32030); a refused batch item gets the same
JSON-RPC error as its answer and the rest go on. Origins and addresses were decided at the auth stage.
"""

from __future__ import annotations

from gateway import metrics
from gateway.access.guard import AccessGuard
from gateway.access.rules import BOUND_MODES, access_denied, method_allowed, method_denied
from gateway.pipeline import Call, Handler, Reply


class AccessMethods:
    def __init__(self, guard: AccessGuard) -> None:
        self.guard = guard

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        identity, payload = call.identity, call.payload
        if identity is None or payload is None or identity.mode not in BOUND_MODES:
            return await next_handler(call)
        guard = self.guard
        compiled = guard.cached(identity.pubkey) or await guard.rules_of(identity.pubkey)
        rules = compiled.rules
        if not rules.methods:
            return await next_handler(call)
        for item in payload.items:
            if item.pending and not method_allowed(rules, item.method, item.method_class):
                metrics.ACCESS_REFUSALS.inc(("method", str(call.wire)))
                if not payload.is_batch:
                    raise access_denied(f"the account's access rules do not allow {item.method} with this credential")
                item.error = method_denied(item.method)
        return await next_handler(call)
