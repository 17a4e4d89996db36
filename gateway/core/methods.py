"""Method classes and what each costs (the one pricing table of the gateway), and the method registry.

Pure data and lookups, no I/O. Prices are positive integer credits. A class without a price in the
table (denied, disabled, or outcome-priced and not built yet) is refused before admission: planning
asks :meth:`PriceTable.price` and refuses what has none, so nothing unpriced is ever forwarded free.
Each method is declared once (:class:`MethodSpec`: its name, class, parameter parser and who answers
it) by the package that owns it, and the app assembles them into one :class:`Registry`.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from gateway.core.errors import RpcError

T = TypeVar("T")
H = TypeVar("H")


class MethodClass(StrEnum):
    READ_CHEAP = "READ_CHEAP"
    READ_MEDIUM = "READ_MEDIUM"
    READ_HEAVY = "READ_HEAVY"
    SEND = "SEND"
    SEND_AND_CONFIRM = "SEND_AND_CONFIRM"
    SEND_BUNDLE = "SEND_BUNDLE"
    BUNDLE_STATUS = "BUNDLE_STATUS"
    TRADE_BUILD = "TRADE_BUILD"
    ARCHIVE_HISTORY = "ARCHIVE_HISTORY"
    DENIED = "DENIED"


DEFAULT_CLASS_CREDITS: Mapping[MethodClass, int] = {
    MethodClass.READ_CHEAP: 1,
    MethodClass.READ_MEDIUM: 5,
    MethodClass.READ_HEAVY: 25,
    MethodClass.SEND: 2,
    MethodClass.SEND_AND_CONFIRM: 10,  # the landing price; a failed send pays SEND's price (the base fee)
    MethodClass.SEND_BUNDLE: 10,
    MethodClass.BUNDLE_STATUS: 2,
    MethodClass.TRADE_BUILD: 50,  # the build fee; each build adds a share of its notional (gateway/trades/fees.py)
}
#: Classes billed by a durable hold at the store, settled when the outcome is known (not from a lease).
HELD_CLASSES = frozenset({MethodClass.SEND_AND_CONFIRM})
#: Classes whose handler prices each call from what it reads (the table's price is the fixed part), then
#: admits that price from the lease and completes it itself (``Meter.admit`` / ``Meter.complete``).
PRODUCT_PRICED_CLASSES = frozenset({MethodClass.TRADE_BUILD})
#: Classes the metering stage takes only a rate unit for: their handlers bill them.
SELF_BILLED_CLASSES = HELD_CLASSES | PRODUCT_PRICED_CLASSES

#: Classes whose calls the node may be asked twice with the effect of once (reads): one lost on a
#: connection the node closed while idle is sent again (docs/reliability.md).
REPLAYABLE_CLASSES: frozenset[MethodClass] = frozenset(
    {
        MethodClass.READ_CHEAP,
        MethodClass.READ_MEDIUM,
        MethodClass.READ_HEAVY,
        MethodClass.ARCHIVE_HISTORY,
        MethodClass.BUNDLE_STATUS,
    }
)

#: Per-class upstream timeouts in seconds (docs/api.md, Limits).
CLASS_TIMEOUT_S: Mapping[MethodClass, float] = {
    MethodClass.READ_CHEAP: 5.0,
    MethodClass.READ_MEDIUM: 15.0,
    MethodClass.READ_HEAVY: 30.0,
    MethodClass.ARCHIVE_HISTORY: 30.0,
    MethodClass.SEND: 10.0,
    MethodClass.SEND_AND_CONFIRM: 15.0,
    MethodClass.SEND_BUNDLE: 10.0,
    MethodClass.BUNDLE_STATUS: 10.0,
    MethodClass.TRADE_BUILD: 10.0,  # each of a build's node reads
}


#: A method's parameter parser: its params (an array: planning made an absent one empty) to the value its
#: handler reads (``None`` when the params are only checked, or normalised in place), or why they are
#: refused (free: planning refuses before admission).
Parser = Callable[[list[Any]], T | RpcError]


@dataclass(frozen=True, slots=True)
class MethodSpec(Generic[T]):
    """One JSON-RPC method, declared once by the package that answers it or parses its params (a
    ``methods.py``: ``gateway/rpc/`` for the node's reads, each feature for its own)."""

    name: str
    cls: MethodClass
    parse: Parser[T] | None = None  # None: any params array
    local: bool = False  # True: the gateway answers it (a handler the app registers); False: the node does


def node_methods(cls: MethodClass, names: str) -> tuple[MethodSpec[None], ...]:
    """Methods of ``cls`` the node answers, any params array (``names``: separated by whitespace)."""
    return tuple(MethodSpec(name, cls) for name in names.split())


class Registry(Generic[H]):
    """Every method the gateway knows, each declared once, and the handlers of the ones it answers itself.

    Planning classifies, prices and parses from it; ``/pricing`` lists it. A name declared twice is
    refused when the registry is built (at start). A local method is answerable once its handler is
    registered (:meth:`register`); until then planning refuses it, free, with -32601.
    """

    def __init__(self, *groups: Iterable[MethodSpec[Any]]) -> None:
        specs: dict[str, MethodSpec[Any]] = {}
        for group in groups:
            for spec in group:
                if spec.name in specs:
                    raise ValueError(f"method {spec.name} is declared twice")
                specs[spec.name] = spec
        self._specs = specs
        self._handlers: dict[str, H] = {}
        #: Methods worth suggesting for a misspelt name, by lower-case name: the denied ones never answer.
        self._suggestable = {name.lower(): name for name, s in specs.items() if s.cls is not MethodClass.DENIED}
        self._closest = functools.lru_cache(maxsize=1024)(self._nearest)

    def register(self, name: str, handler: H) -> None:
        """Answer the local method ``name`` with ``handler`` (a name not declared local is refused)."""
        spec = self._specs.get(name)
        if spec is None or not spec.local:
            raise ValueError(f"{name} is not declared as a method the gateway answers itself")
        if name in self._handlers:
            raise ValueError(f"{name} has a handler already")
        self._handlers[name] = handler

    def spec(self, name: str) -> MethodSpec[Any] | None:
        return self._specs.get(name)

    def registered(self, name: str) -> bool:
        """Whether the local method ``name`` has its handler."""
        return name in self._handlers

    def class_of(self, name: str) -> MethodClass | None:
        """The class of a JSON-RPC method, or ``None`` for a method the gateway does not know."""
        spec = self._specs.get(name)
        return spec.cls if spec is not None else None

    @property
    def handlers(self) -> Mapping[str, H]:
        """The registered handlers of the local methods, by name."""
        return MappingProxyType(self._handlers)

    @property
    def not_available(self) -> frozenset[str]:
        """Local methods without a handler: refused for now (published in /pricing)."""
        return frozenset(n for n, s in self._specs.items() if s.local and n not in self._handlers)

    def members(self, cls: MethodClass) -> list[str]:
        return sorted(name for name, spec in self._specs.items() if spec.cls is cls)

    def __iter__(self) -> Iterator[MethodSpec[Any]]:
        return iter(self._specs.values())

    def closest(self, method: str, limit: int = 3) -> tuple[str, ...]:
        """The known methods nearest to an unknown name (case aside), best first; at most ``limit``. Up to
        about 0.1 ms a name (a refusal is free: the cache spares the repeated misspellings of a client)."""
        return self._closest(method, limit)

    def _nearest(self, method: str, limit: int) -> tuple[str, ...]:
        if len(method) > 64:  # no method name is that long; and difflib's cost grows with the length
            return ()
        close = difflib.get_close_matches(method.lower(), self._suggestable.keys(), n=limit, cutoff=0.75)
        return tuple(self._suggestable[name] for name in close)


@dataclass(frozen=True)
class PriceTable:
    """Credits per method class; configurable, positive integers only (checked when built)."""

    class_credits: Mapping[MethodClass, int]

    def __post_init__(self) -> None:
        for cls, credits in self.class_credits.items():
            if isinstance(credits, bool) or not isinstance(credits, int) or credits <= 0:
                raise ValueError(f"price of {cls}: {credits!r} is not a positive integer number of credits")

    @classmethod
    def default(cls) -> PriceTable:
        return cls(dict(DEFAULT_CLASS_CREDITS))

    def with_overrides(self, overrides: Mapping[str, int]) -> PriceTable:
        merged = dict(self.class_credits)
        for name, credits in overrides.items():
            merged[MethodClass(name)] = credits
        return PriceTable(merged)

    def price(self, cls: MethodClass) -> int | None:
        """The class's price, or None: the class is not sold here and its calls must be refused."""
        return self.class_credits.get(cls)

    def document(self, methods: Registry[Any]) -> dict[str, object]:
        """The class part of the ``GET /pricing`` document: each class's price (null: not sold, its
        calls are refused) and members, and which members are not available on this gateway yet."""
        classes: dict[str, object] = {}
        not_available = methods.not_available
        for cls in MethodClass:
            members = methods.members(cls)
            classes[cls.value] = {
                "credits": self.class_credits.get(cls),
                "methods": members,
                "not_available": [m for m in members if m in not_available],
            }
        return classes
