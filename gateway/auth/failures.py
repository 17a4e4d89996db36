"""Failed authentications per client address (docs/api.md, Limits): past a burst, an address is
refused 429 with ``Retry-After`` before its credentials are looked at, on every transport that
authenticates through :class:`gateway.auth.authenticator.Authenticator` (JSON-RPC, MCP, ``/ws``, gRPC).

A well-formed made-up API key costs a PostgreSQL lookup, and a valid signature of a fresh keypair an
Ed25519 check and one (its 402 is then remembered a few seconds, :class:`gateway.auth.cache.NoAccounts`);
without this a caller could make as many as it liked, for free. The bucket is taken from only by a
failure (401) or a proven key without an account (402 -32002), so an address whose calls succeed is
never slowed, and a new user's first calls before its deposit are far within the burst; a blocked
address's calls with an API key this replica has cached as active still pass (they never reach the
authenticator). Replica-local, like the per-address limits: each of R replicas allows ``rps / R`` and
``ceil(burst / R)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

from gateway.core.client_address import TrustedProxies, client_address, grpc_peer_host
from gateway.core.errors import ProxyError, address_rate_limited
from gateway.limits.rules import KeyedBuckets
from gateway.limits.settings import IpLimit
from gateway.pipeline.stages import Call, Wire

#: Blocked addresses remembered at once; past it the lapsed ones are forgotten.
PRUNE_AT = 10_000


class FailedAuths:
    def __init__(
        self,
        limit: IpLimit,
        trusted: TrustedProxies,
        replicas: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.trusted = trusted
        self.clock = clock
        self._buckets = KeyedBuckets(limit.rps / replicas, max(1, math.ceil(limit.burst / replicas)))
        self._blocked: dict[str, float] = {}  # address -> when its next failure is allowed

    def address(self, call: Call) -> str:
        peer = call.client
        if call.wire is Wire.GRPC and peer is not None:
            peer = grpc_peer_host(peer)
        return client_address(peer, call.headers.get("x-forwarded-for"), self.trusted)

    def check(self, address: str) -> None:
        """Raise 429 while ``address`` has used up its failures."""
        until = self._blocked.get(address)
        if until is None:
            return
        now = self.clock()
        if now >= until:
            del self._blocked[address]
            return
        raise refused(max(1, math.ceil(until - now)))

    def failed(self, address: str) -> None:
        """Count one failed authentication of ``address``."""
        now = self.clock()
        wait = self._buckets.take(address, now)
        if wait > 0:
            if len(self._blocked) >= PRUNE_AT:
                self._blocked = {a: until for a, until in self._blocked.items() if until > now}
            self._blocked[address] = now + wait


def refused(retry_after_s: int) -> ProxyError:
    message = (
        "too many failed authentications (or calls of keys without an account) from this address; "
        f"retry in {retry_after_s} s"
    )
    return replace(address_rate_limited(retry_after_s), message=message)
