"""The parts of the signal stream that do no I/O: the event type, the filter, the memory of events
yielded, the backoff, the bounds, the socket's URL (:mod:`gateway_client.signals` uses them)."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NotRequired, TypedDict
from urllib.parse import urlsplit, urlunsplit

#: The signal kinds of docs/api.md (``newPair`` first; the others once their classifiers are live).
KINDS: Final = ("newPair", "graduation", "largeSwap", "walletActivity")
WS_PATH: Final = "/ws"


class SignalEvent(TypedDict):
    """A signal event (docs/api.md, Signals): a plain dict, ``event["mint"]``. Fields the gateway could
    not establish are None; ``block_time``, ``sol_amount`` and ``side`` are this gateway's additions."""

    kind: str
    program: str
    signature: str
    slot: int
    mint: str | None
    accounts: list[str]
    quote_asset: str | None
    curve_type: str | None
    complete: bool | None
    block_time: NotRequired[int | None]
    sol_amount: NotRequired[int | None]
    side: NotRequired[str | None]


@dataclass(frozen=True)
class SignalFilter:
    """``subscribeSignal``'s filter: a field left None matches everything; the fields combine with AND."""

    kinds: frozenset[str] | None = None
    mint: str | None = None
    programs: frozenset[str] | None = None

    @classmethod
    def of(
        cls,
        kinds: str | Iterable[str] | None = None,
        mint: str | None = None,
        programs: str | Iterable[str] | None = None,
    ) -> SignalFilter:
        """From what a caller writes: one name or several."""
        return cls(_names(kinds), mint, _names(programs))

    def params(self) -> list[dict[str, Any]]:
        """``subscribeSignal``'s params: ``[{kinds?, mint?, programs?}]``."""
        spec: dict[str, Any] = {}
        if self.kinds is not None:
            spec["kinds"] = sorted(self.kinds)
        if self.mint is not None:
            spec["mint"] = self.mint
        if self.programs is not None:
            spec["programs"] = sorted(self.programs)
        return [spec]

    def matches(self, event: Mapping[str, Any]) -> bool:
        """As the gateway matches: the gap-fill reads every event and keeps these."""
        if self.kinds is not None and event.get("kind") not in self.kinds:
            return False
        if self.mint is not None and event.get("mint") != self.mint:
            return False
        return self.programs is None or event.get("program") in self.programs

    @property
    def kind(self) -> str | None:
        """The one kind asked for, which ``GET /signals/recent`` filters by itself."""
        return next(iter(self.kinds)) if self.kinds is not None and len(self.kinds) == 1 else None


def _names(value: str | Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset({value}) if isinstance(value, str) else frozenset(value)


def event_key(event: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """What makes an event itself: its transaction, its kind and its mint (a transaction may create
    several pairs)."""
    return event.get("signature"), event.get("kind"), event.get("mint")


class SeenEvents:
    """The keys of the last ``capacity`` events let through: bounded memory for de-duplication."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._keys: OrderedDict[tuple[Any, Any, Any], None] = OrderedDict()

    def first_time(self, event: Mapping[str, Any]) -> bool:
        """True, and remembered, unless an event with the same key was let through before."""
        key = event_key(event)
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > self.capacity:
            self._keys.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._keys)


@dataclass
class Backoff:
    """Exponential delays with jitter (half to all of ``first_s * 2**n``, at most ``max_s``), so that
    the clients of a restarted gateway do not all come back at once."""

    first_s: float = 0.5
    max_s: float = 30.0
    attempt: int = 0

    def next_delay(self) -> float:
        base = min(self.max_s, self.first_s * 2.0 ** min(self.attempt, 30))
        self.attempt += 1
        return base * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.attempt = 0


@dataclass(frozen=True)
class StreamOptions:
    """Bounds and timings of a :class:`SignalStream`."""

    open_timeout_s: float = 10.0  # the TCP, TLS and WebSocket handshakes
    subscribe_timeout_s: float = 10.0  # the answer to subscribeSignal
    http_timeout_s: float = 15.0  # each GET /signals/recent
    close_wait_s: float = 2.0  # after a subscriptionEnded notice, how long to wait for the close
    max_queue: int = 1024  # frames the socket holds while the consumer does not read
    max_reconnects: int = 10  # failed attempts in a row before ConnectionLost
    first_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    gap_margin_slots: int = 4  # the gap-fill starts this many slots before the last slot seen
    max_gap_fill: int = 5000  # events one gap-fill delivers at most (the newest)
    dedup_window: int = 10_000  # keys of recent events remembered


def websocket_url(url: str) -> str:
    """``/ws`` of a gateway's base URL: ``http://h:p`` → ``ws://h:p/ws``, ``https`` → ``wss``."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + WS_PATH, "", ""))


__all__ = [
    "KINDS",
    "WS_PATH",
    "Backoff",
    "SeenEvents",
    "SignalEvent",
    "SignalFilter",
    "StreamOptions",
    "event_key",
    "websocket_url",
]
