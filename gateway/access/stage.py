"""``AccessMethods``: the JSON-RPC stage that applies an account's method rules and rate to each item.

Placed right after parsing (its items are classified) and before metering, so a refused item costs
nothing: no credits, no node work, no unit of the account's own rate::

    error_boundary → AuthStage → CreditHeaders → readiness → ParseStage → AccessMethods → MeteringStage → Forwarder

A method the rules do not allow: a single call stops with 403 ``ACCESS_DENIED`` (-32030), a batch item
gets that JSON-RPC error as its answer and the rest go on. The rules' rate is a bucket of its own (the
account's limiter under the key :func:`rate_key`, so the account shards make it exact over every
replica, as the account's own rate is), taken from by each item a key or session sends: past it 429
``RATE_LIMITED`` as the account's rate answers, its message naming the rules. Origins and addresses
were decided at the auth stage.

``WebhookAction`` is the ``/webhooks`` routes' counterpart: the rules' ``webhooks`` list decides each
management action a key or session takes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from gateway.access import metrics
from gateway.access.guard import AccessGuard
from gateway.access.rules import WEBHOOK_ACTIONS, access_denied, bound, method_allowed, method_denied, webhook_allowed
from gateway.core.errors import ProxyError
from gateway.core.jsonrpc import RpcItem
from gateway.credits.errors import rate_limited
from gateway.credits.stage import limits_unavailable
from gateway.limits.rules import AccountLimits
from gateway.limits.slices import ShardUnavailable
from gateway.pipeline.stages import Call, Handler, Reply

#: The concurrency the rules' bucket is asked for: none of its slots is ever held (the account's
#: concurrency is the limit), but a slice of the shard comes with some.
RATE_SLOTS = 1_000


def rate_key(pubkey: str) -> str:
    """The limiter's key of the rules' rate: a bucket beside the account's own."""
    return f"access-rate:{pubkey}"


class AccessMethods:
    def __init__(
        self,
        guard: AccessGuard,
        limiter: AccountLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.guard = guard
        self.limiter = limiter
        self.clock = clock
        self.wall = wall

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        identity, payload = call.identity, call.payload
        if identity is None or payload is None or not bound(identity):
            return await next_handler(call)
        guard = self.guard
        compiled = guard.cached(identity.pubkey) or await guard.rules_of(identity.pubkey)
        rules = compiled.rules
        if rules.methods:
            for item in payload.items:
                if item.pending and not method_allowed(rules, item.method, item.method_class):
                    metrics.ACCESS_REFUSALS.inc(("method", str(call.wire)))
                    if not payload.is_batch:
                        raise access_denied(
                            f"the account's access rules do not allow {item.method} with this credential"
                        )
                    item.error = method_denied(item.method)
        if rules.rate is not None:
            await self._rate(call, identity.pubkey, rules.rate, [item for item in payload.items if item.pending])
        return await next_handler(call)

    async def _rate(self, call: Call, pubkey: str, rps: int, items: list[RpcItem]) -> None:
        """One unit of the rules' bucket per pending item; the items past it are refused 429."""
        if not items:
            return
        key, limiter = rate_key(pubkey), self.limiter
        now = self.clock()
        pending = limiter.ready(key, len(items), now, rps=rps, concurrency=RATE_SLOTS)
        if pending is not None:
            try:
                await pending
            except ShardUnavailable as exc:
                raise limits_unavailable() from exc
            now = self.clock()
        taken = limiter.take_each(key, len(items), now, self.wall(), rps)  # units only: no slot is held
        if taken.refused is None:
            return
        error = _rules_rate(rate_limited(taken.refused), rps)
        for item in items[taken.granted :]:
            metrics.ACCESS_REFUSALS.inc(("rate", str(call.wire)))
            item.error = error.rpc_error()
        if call.payload is not None and not call.payload.is_batch:
            raise error


class WebhookAction:
    """The stage after the auth stage of a ``/webhooks`` route: a key or ordinary session of an account
    with access rules takes only the webhook actions they list (a leaked key must not read the
    receivers, take a new webhook's signing secret or rotate the owner's); the owner's own proof passes.
    Refused 403 ``ACCESS_DENIED`` before the endpoint runs, so nothing changes."""

    def __init__(self, guard: AccessGuard, action: str) -> None:
        if action not in WEBHOOK_ACTIONS:
            raise ValueError(f"not a webhook action: {action!r}")
        self.guard = guard
        self.action = action

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        identity = call.authenticated()
        if bound(identity):
            guard = self.guard
            compiled = guard.cached(identity.pubkey) or await guard.rules_of(identity.pubkey)
            if not webhook_allowed(compiled.rules, self.action):
                metrics.ACCESS_REFUSALS.inc(("webhook", str(call.wire)))
                raise access_denied(
                    f"the account's access rules do not allow the webhook action {self.action} with this credential"
                )
        return await next_handler(call)


def _rules_rate(error: ProxyError, rps: int) -> ProxyError:
    message = f"rate limit exceeded: the account's access rules allow the API key and sessions {rps} requests a second"
    return dataclasses.replace(error, message=message)
