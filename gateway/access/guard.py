"""Each serving process's enforcement of the account access rules (docs/api.md, "Access rules").

The rules are read from PostgreSQL once per account and kept in the process's memory while the
``REVOKED_KEYS`` channel is followed (the way API keys are cached: :mod:`gateway.auth.api_keys`). A
change is published there after it commits (:mod:`gateway.access.store`); every process then drops
the account's rules and re-checks the connections the account holds open here, ending those the new
rules forbid, within the channel's delivery (well under a second). While the channel is lost the
cache is not used (each call reads the table), and when it is back every held connection is checked
again, since changes may have been missed meanwhile.

Only the credentials that leak are bound: an API key and an ordinary session token. A wallet-signed
request or an owner session (Sign-In With Solana) is the owner's and passes whatever the rules say.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.access import metrics, store
from gateway.access.rules import (
    BULK_METHODS,
    GRPC,
    NO_RULES,
    AccessRules,
    IpNetwork,
    access_denied,
    address_allowed,
    bound,
    method_allowed,
    origin_allowed,
    own_origins,
)
from gateway.auth.services import AuthServices
from gateway.core.client_address import TrustedProxies, client_address, grpc_peer_host
from gateway.core.errors import ProxyError
from gateway.core.identity import Identity
from gateway.pipeline.stages import Call, Wire
from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)

#: Accounts whose rules are kept at once; past it the cache starts again (a miss costs one read).
CACHE_ENTRIES = 10_000
#: The reason a connection a rules change forbids ends with (its close message).
ENDED = "ACCESS_DENIED: the account's access rules no longer allow this connection"


@dataclass(frozen=True, slots=True)
class Compiled:
    rules: AccessRules
    networks: tuple[IpNetwork, ...]


@dataclass(frozen=True, slots=True)
class _Held:
    """What a held connection was admitted with: enough to decide it again under new rules."""

    origin: str | None
    host: str | None  # compared with the gateway's own origins only for a same-origin request without Origin
    fetch_site: str | None  # its Sec-Fetch-Site: a browser's request from another site without an Origin
    address: str
    wire: Wire
    path: str
    end: Callable[[str], None]


class AccessGuard:
    """Args:
    trusted: the proxies whose ``X-Forwarded-For`` is believed (settings ``trusted_proxies``).
    live: whether the ``REVOKED_KEYS`` channel is followed right now (the cache is used only then).
    own: the gateway's own origins (settings ``public_url`` and ``public_origins``), which an origin rule
        never refuses: :func:`gateway.access.rules.own_origins`.
    """

    def __init__(self, trusted: TrustedProxies, live: Callable[[], bool], own: Callable[[], frozenset[str]]) -> None:
        self.trusted = trusted
        self.live = live
        self.own = own
        self.pool: Pool | None = None
        self.generation = 0
        self._cache: dict[str, Compiled] = {}
        self._held: dict[str, dict[int, _Held]] = {}
        self._ids = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- deciding -------------------------------------------------------------------------------

    def check(self, call: Call, identity: Identity) -> Awaitable[None] | None:
        if not bound(identity):
            return None
        compiled = self._cache.get(identity.pubkey) if self.live() else None
        if compiled is None:
            return self._check_loaded(call, identity.pubkey)
        if not compiled.rules.empty:
            self._decide(compiled, call)
        return None

    async def _check_loaded(self, call: Call, pubkey: str) -> None:
        compiled = await self.rules_of(pubkey)
        if not compiled.rules.empty:
            self._decide(compiled, call)

    def _decide(self, compiled: Compiled, call: Call) -> None:
        headers = call.headers
        error = refusal(
            compiled,
            headers.get("origin"),
            self.own(),
            self.address(call),
            call.wire,
            call.path,
            headers.get("sec-fetch-site"),
            headers.get("host"),
        )
        if error is not None:
            metrics.ACCESS_REFUSALS.inc((error[0], str(call.wire)))
            raise error[1]

    def address(self, call: Call) -> str:
        """The client address the rules match (the real client behind the bundled HAProxy or a trusted proxy)."""
        peer = call.client
        if call.wire is Wire.GRPC and peer is not None:
            peer = grpc_peer_host(peer)
        return client_address(peer, call.headers.get("x-forwarded-for"), self.trusted)

    async def permits(self, identity: Identity, method: str, method_class: str | None) -> bool:
        if not bound(identity):
            return True
        compiled = self.cached(identity.pubkey) or await self.rules_of(identity.pubkey)
        allowed = method_allowed(compiled.rules, method, method_class)
        if not allowed:
            metrics.ACCESS_REFUSALS.inc(("method", "ws"))
        return allowed

    def cached(self, pubkey: str) -> Compiled | None:
        """The account's rules when this process may use its cached copy, else None."""
        return self._cache.get(pubkey) if self.live() else None

    async def rules_of(self, pubkey: str) -> Compiled:
        """The account's rules from the table (cached unless a change was heard meanwhile)."""
        if self.pool is None:
            raise StoreUnavailable(store.WHAT)  # not started, or no database configured
        generation = self.generation
        rules = await store.load(self.pool, pubkey)
        compiled = Compiled(rules, rules.networks()) if not rules.empty else _NONE
        if self.live() and generation == self.generation:
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.clear()
            self._cache[pubkey] = compiled
        return compiled

    # -- connections ------------------------------------------------------------------------------

    def watch(self, call: Call, identity: Identity, end: Callable[[str], None], generation: int) -> Callable[[], None]:
        if not bound(identity):
            return _nothing
        token = next(self._ids)
        pubkey = identity.pubkey
        headers = call.headers
        held = _Held(
            headers.get("origin"),
            headers.get("host"),
            headers.get("sec-fetch-site"),
            self.address(call),
            call.wire,
            call.path,
            end,
        )
        self._held.setdefault(pubkey, {})[token] = held
        if generation != self.generation:  # a change was heard while it was checked: check it again
            self._spawn(self._recheck(pubkey))

        def release() -> None:
            holders = self._held.get(pubkey)
            if holders is not None:
                holders.pop(token, None)
                if not holders:
                    del self._held[pubkey]

        return release

    @property
    def held(self) -> int:
        return sum(len(holders) for holders in self._held.values())

    def changed(self, pubkey: str) -> None:
        """The account's rules changed (here or in another process): forget them and re-check its connections."""
        self.generation += 1
        self._cache.pop(pubkey, None)
        if pubkey in self._held:
            self._spawn(self._recheck(pubkey))

    def resync(self) -> None:
        """Changes may have been missed (the channel was lost): forget every rule, re-check every connection."""
        self.generation += 1
        self._cache.clear()
        for pubkey in list(self._held):
            self._spawn(self._recheck(pubkey))

    async def _recheck(self, pubkey: str) -> None:
        try:
            compiled = await self.rules_of(pubkey)
        except Exception as exc:  # the table unreachable: the next change or resync checks again
            log.warning("could not re-check the access rules of %s: %s", pubkey, exc)
            return
        for held in list(self._held.get(pubkey, {}).values()):
            error = refusal(
                compiled, held.origin, self.own(), held.address, held.wire, held.path, held.fetch_site, held.host
            )
            if error is not None:
                metrics.ACCESS_REFUSALS.inc((error[0], str(held.wire)))
                held.end(ENDED)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


_NONE = Compiled(NO_RULES, ())


def _nothing() -> None:
    return None


def refusal(
    compiled: Compiled,
    origin: str | None,
    own: frozenset[str],
    address: str,
    wire: Wire,
    path: str,
    fetch_site: str | None,
    host: str | None,
) -> tuple[str, ProxyError] | None:
    """Which rule refuses a request (its kind and error), or None: origin, then address, then the
    gRPC stream and the bulk routes' methods (a JSON-RPC call's methods are decided per item, later:
    :class:`gateway.access.stage.AccessMethods`; a webhook action by :class:`gateway.access.stage.WebhookAction`)."""
    rules = compiled.rules
    if rules.empty:
        return None
    if not origin_allowed(rules, origin, own, fetch_site, host):
        if origin is None:
            message = f"another site's page (Sec-Fetch-Site: {fetch_site}) sent this request without an Origin"
            return "origin", access_denied(f"the account's access rules list origins, and {message}")
        return "origin", access_denied(f"the account's access rules do not allow the origin {origin}")
    if not address_allowed(compiled.networks, address):
        return "address", access_denied(f"the account's access rules do not allow the client address {address}")
    if rules.methods:
        if wire is Wire.GRPC and not method_allowed(rules, GRPC, GRPC):
            return "method", access_denied("the account's access rules do not allow the gRPC stream")
        bulk = BULK_METHODS.get(path)
        if bulk is not None and not method_allowed(rules, *bulk):
            return "method", access_denied(f"the account's access rules do not allow {bulk[0]} ({path})")
    return None


def guard_of(trusted: TrustedProxies, auth: Callable[[], AuthServices]) -> AccessGuard:
    """The process's guard, built before the :class:`AuthServices` it is given to. Auth asks the guard
    (its checks) and the guard asks auth (whether its API-key cache is live): ``auth`` answers the
    services when a check runs, after both exist, so neither is changed after construction; the gateway's
    own origins are read from auth's settings at the first check. :meth:`AccessGuard.pool` is set at start."""

    def live() -> bool:
        keys = auth().api_keys
        return keys is not None and keys.cache_live

    @functools.cache
    def own() -> frozenset[str]:
        settings = auth().settings
        return own_origins(settings.public_url, settings.public_origins, settings.port)

    return AccessGuard(trusted, live, own)


def follow_changes(auth: AuthServices, guard: AccessGuard) -> None:
    """Tell the guard of the rules changes heard on ``REVOKED_KEYS`` and of the channel's resubscriptions."""
    auth.revocations.handlers[store.CHANGED_PREFIX] = guard.changed
    auth.revocations.resync_hooks.append(guard.resync)
