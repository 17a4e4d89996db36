"""Per-client-address limits of the routes a caller reaches before paying (accounts and sessions).

Those routes are not billed, so what bounds the work an unpaying caller can make the service do
(Redis keys for challenges, accounts created, node reads for deposit confirmations, ledger pages) is
a token bucket per client address and route group. Replica-local soft state like the per-account
limits: each of R replicas enforces ``rps / R`` and ``ceil(burst / R)``.

Which address: the peer, or behind trusted proxies the right-most forwarded one
(:mod:`gateway.core.client_address`). Behind Ray's HAProxy (the default ingress) the peer is the
address HAProxy saw, not HAProxy's own: HAProxy passes it with a secret the replica checks
(:mod:`gateway.transports.ray_edge`, :mod:`gateway.runtime.haproxy_edge`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

from gateway.core.client_address import TrustedProxies, client_address
from gateway.core.errors import address_rate_limited
from gateway.limits.rules import KeyedBuckets
from gateway.limits.settings import IpLimit
from gateway.pipeline.stages import Call, Handler, Reply, Stage

FORWARDED_FOR = "x-forwarded-for"


class IpLimits:
    def __init__(
        self,
        limits: Mapping[str, IpLimit],
        trusted: TrustedProxies,
        replicas: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.trusted = trusted
        self.clock = clock
        self._groups = {
            name: KeyedBuckets(limit.rps / replicas, max(1, math.ceil(limit.burst / replicas)))
            for name, limit in limits.items()
        }

    def address(self, call: Call) -> str:
        return client_address(call.client, call.headers.get(FORWARDED_FOR), self.trusted)

    def client(self, peer: str | None, forwarded_for: str | None) -> str:
        """The address of a caller whose peer is ``peer`` (before a :class:`Call` exists)."""
        return client_address(peer, forwarded_for, self.trusted)

    def stage(self, group: str) -> Stage:
        """The stage limiting ``group``; it goes before authentication, so bad credentials count too."""
        buckets = self._groups[group]

        async def limit_address(call: Call, next_handler: Handler) -> Reply:
            wait = buckets.take(self.address(call), self.clock())
            if wait > 0:
                raise address_rate_limited(max(1, math.ceil(wait)))
            return await next_handler(call)

        return limit_address
