"""What a feature declares about itself, in its own ``<feature>/feature.py``: its JSON-RPC methods and
how their handlers are built, its HTTP routes and their parts of the OpenAPI document, and its settings
model. ``gateway/app/features.py`` collects every declaration in one list; ``gateway/app/replica.py`` builds the
method registry and the handlers from it, ``gateway/transports/http.py`` mounts its routes and
``gateway/transports/openapi.py`` describes them.

A feature's builders are given the replica (:class:`gateway.app.replica.GatewayApp`), typed as the
:class:`Host` protocol of what they read from it: :class:`Host` below is what every feature may read
(the node, the prices, the database pool, the 402's payment terms); a feature that reads more of the
replica (its meter, its own endpoints) extends it in its ``feature.py`` with its own members, typed by
its own classes. The list then names the protocol that joins them all, and mypy checks that the
replica is one. The kernel cannot name the features' types (it sits below them), hence one protocol
per feature rather than one here.

Not declared here: a feature's Ray actor (only the runtime may import ``actors/``, the
``actors-started-by-the-runtime`` contract: ``actors/service.py`` lists them) and its metrics
(``<feature>/metrics.py``: every process declares them before installing its backend, an actor too,
which must not import the features' list; ``actors/metrics.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from starlette.routing import BaseRoute

from gateway.base.config import ServiceSettings
from gateway.core.api_doc import ApiDoc
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import MethodSpec, PriceTable
from gateway.core.upstreams import Role
from gateway.node.http import Upstream
from gateway.pipeline.stages import Call
from gateway.storage.connections import Pool

#: A method the gateway answers itself: it sets the item's ``response`` or ``error`` (and what billing
#: needs: ``sent``, ``failure``, ``refund``); it may raise a ``ProxyError`` for a single call.
LocalMethod = Callable[[RpcItem, Call], Awaitable[None]]


class Host(Protocol):
    """What every feature's builders may read from the replica."""

    @property
    def upstream(self) -> Upstream: ...

    def upstream_for(self, role: Role) -> Upstream:
        """The nodes of ``role`` (a feature's own heavy indexed reads: ``Role.HEAVY``)."""

    @property
    def prices(self) -> PriceTable: ...

    def db(self) -> Pool | None:
        """The PostgreSQL pool, once the replica has started."""

    def top_up(self, pubkey: str | None) -> Mapping[str, Any]:
        """How to pay, for a 402's ``data`` (the payment terms)."""


#: Contravariant: a feature reading less of the replica fits in a list typed by a host offering more.
H = TypeVar("H", contravariant=True)


def _no_handlers(host: object) -> Mapping[str, LocalMethod]:
    return {}


def _no_routes(host: object) -> Sequence[BaseRoute]:
    return ()


@dataclass(frozen=True)
class Feature(Generic[H]):
    """One feature's declaration. ``H``: the protocol of what its builders read from the replica."""

    name: str
    #: its JSON-RPC methods (``MethodSpec``s of its ``methods.py``); a name declared twice stops the start
    methods: tuple[MethodSpec[Any], ...] = ()
    #: the handlers of its local methods, by name (built once per replica)
    handlers: Callable[[H], Mapping[str, LocalMethod]] = _no_handlers
    #: its HTTP routes, mounted in the list's order after the transports' own
    routes: Callable[[H], Sequence[BaseRoute]] = _no_routes
    #: its parts of the OpenAPI document, describing exactly its routes (none for pages)
    api: tuple[ApiDoc, ...] = ()
    #: its settings model (``<feature>/settings.py``): the replica's ``AppSettings`` extends it
    settings: type[ServiceSettings] | None = None
