"""Which node answers can be cached and for how long, and how a cached answer is put back. Pure.

An answer that can no longer change is *final*: ``getTransaction`` and ``getBlock`` read at
``finalized`` commitment (the node's default for both), ``getBlockTime`` of a slot at or below the
newest finalized slot the replica knows, each finalized entry of ``getSignatureStatuses``,
``getGenesisHash`` and ``getEpochSchedule``. Final answers are kept :data:`FINAL_TTL_S`. Anything
else of those methods (``confirmed`` or ``processed`` reads, a status not finalized yet) is kept
only for the configured short TTL, which is off by default. A ``null`` result ("not found" or "not
finalized yet") and an error are never kept: the next call asks the node again.

Keys are the method and its params after planning's normalisation, as canonical JSON (sorted keys),
so equal requests share an entry. Planning refuses config fields these methods do not read
(:mod:`gateway.rpc.methods`), and a key longer than :data:`MAX_KEY_BYTES` is neither looked up nor
kept: a caller cannot make keys large. ``getSignatureStatuses`` is cached per signature: a call is
answered from the cache for the signatures it has, and the node is asked only for the others.
Values are the exact bytes of the ``result`` (or of one status entry), put back with
:class:`orjson.Fragment`, so a hit renders byte for byte what the miss rendered.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.core.jsonrpc import RpcItem

FINAL_TTL_S = 3600.0
#: Answers larger than this are not cached (a full block can be megabytes: it would evict everything else).
MAX_ENTRY_BYTES = 1 << 20
#: Keys longer than this are not cached (a real one is under 200 bytes: a method, a signature, a config).
MAX_KEY_BYTES = 1024
#: The replica's cache holds at most this many bytes of keys and answers, whatever its entry count.
LRU_MAX_BYTES = 64 << 20
STATUSES = "getSignatureStatuses"
MAX_SIGNATURE_CHARS = 88  # a base58 signature of 64 bytes
MAX_STATUSES = 256  # the node's limit per getSignatureStatuses: beyond it, the node's error
#: Methods whose answers may be cached; the rest always go to the node.
CACHED_METHODS = frozenset(
    {"getTransaction", "getBlock", "getBlockTime", STATUSES, "getGenesisHash", "getEpochSchedule"}
)
_ALWAYS_FINAL = frozenset({"getGenesisHash", "getEpochSchedule"})
_AT_COMMITMENT = frozenset({"getTransaction", "getBlock"})  # final when read at finalized commitment


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing to remember: ``value`` (JSON bytes) under ``key`` for ``ttl_s``; ``final`` ones are shared."""

    key: bytes
    value: bytes
    ttl_s: float
    final: bool


@dataclass(slots=True)
class Lookup:
    """What one item may take from the cache: its keys (one, or one per signature) and what was found."""

    item: RpcItem
    keys: list[bytes]
    found: list[bytes | None] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return bool(self.found) and all(v is not None for v in self.found)

    @property
    def partial(self) -> bool:
        return any(v is not None for v in self.found)


def cache_key(method: str, params: Any) -> bytes:
    return method.encode() + b":" + orjson.dumps(params, option=orjson.OPT_SORT_KEYS)


def status_key(signature: str) -> bytes:
    """A finalized status is the same whatever else the call asked (``searchTransactionHistory``)."""
    return f"{STATUSES}:{signature}".encode()


def lookup_of(item: RpcItem) -> Lookup | None:
    """The cache keys of a pending item, or None when its answer is never cached."""
    if item.method not in CACHED_METHODS or not isinstance(item.params, list):
        return None
    if item.method != STATUSES:
        key = cache_key(item.method, item.params)
        return Lookup(item, [key]) if len(key) <= MAX_KEY_BYTES else None
    signatures = item.params[0] if item.params else None
    if not isinstance(signatures, list) or not 0 < len(signatures) <= MAX_STATUSES:
        return None  # the node judges malformed params
    if not all(isinstance(s, str) and len(s) <= MAX_SIGNATURE_CHARS for s in signatures):
        return None
    return Lookup(item, [status_key(s) for s in signatures])


def hit_response(item: RpcItem, result: bytes) -> dict[str, Any]:
    """The answer of ``item`` from a cached result, keys in the node's order (jsonrpc, result, id)."""
    return {"jsonrpc": "2.0", "result": orjson.Fragment(result), "id": item.id}


def statuses_response(item: RpcItem, entries: list[bytes], context: dict[str, Any]) -> dict[str, Any]:
    """A ``getSignatureStatuses`` answer wholly from cached entries, with the replica's newest context."""
    result = {"context": context, "value": [orjson.Fragment(e) for e in entries]}
    return {"jsonrpc": "2.0", "result": result, "id": item.id}


def ask_node_for_missing(lookup: Lookup) -> None:
    """Keep in the item's params only the signatures the cache did not have (order kept)."""
    params: list[Any] = lookup.item.params
    params[0] = [s for s, v in zip(params[0], lookup.found, strict=True) if v is None]


def merge_statuses(lookup: Lookup, signatures: list[str]) -> None:
    """Put the cached entries back among the node's answer for the missing ones (``signatures``: all of
    them, as the caller sent them). An error or a malformed answer is left as the node sent it."""
    item = lookup.item
    item.params[0] = signatures
    result = item.response.get("result") if item.response is not None else None
    value = result.get("value") if isinstance(result, dict) else None
    missing = sum(1 for v in lookup.found if v is None)
    if not isinstance(value, list) or len(value) != missing:
        return
    answered = iter(value)
    assert isinstance(result, dict)
    result["value"] = [next(answered) if v is None else orjson.Fragment(v) for v in lookup.found]


def commitment_of(params: list[Any]) -> str:
    """The commitment of a ``getTransaction``/``getBlock`` read (absent: the node's default, finalized)."""
    config = params[1] if len(params) > 1 else None
    commitment = config.get("commitment") if isinstance(config, dict) else None
    return commitment if isinstance(commitment, str) else "finalized"


def entries_to_keep(
    lookup: Lookup, finalized_slot: int | None, unfinalized_ttl_s: float, signatures: list[str] | None = None
) -> list[Entry]:
    """What to remember of a node answer (before any merge), given the newest finalized slot known."""
    item = lookup.item
    answer = item.response
    if answer is None or "error" in answer or "result" not in answer:
        return []
    result = answer["result"]
    if item.method == STATUSES:
        return _status_entries(lookup, result, unfinalized_ttl_s, signatures or [])
    if result is None:
        return []
    final = _final(item, finalized_slot)
    if not final and unfinalized_ttl_s <= 0:
        return []
    return _sized([Entry(lookup.keys[0], orjson.dumps(result), FINAL_TTL_S if final else unfinalized_ttl_s, final)])


def _final(item: RpcItem, finalized_slot: int | None) -> bool:
    if item.method in _ALWAYS_FINAL:
        return True
    if item.method in _AT_COMMITMENT:
        return commitment_of(item.params) == "finalized"
    slot = item.params[0] if item.params else None  # getBlockTime
    return isinstance(slot, int) and finalized_slot is not None and slot <= finalized_slot


def _status_entries(lookup: Lookup, result: Any, unfinalized_ttl_s: float, signatures: list[str]) -> list[Entry]:
    """Each status the node sent: finalized ones for good, others for the short TTL, nulls never."""
    value = result.get("value") if isinstance(result, dict) else None
    asked = [s for s, v in zip(signatures, lookup.found, strict=True) if v is None] if lookup.found else signatures
    if not isinstance(value, list) or len(value) != len(asked):
        return []
    entries: list[Entry] = []
    for signature, status in zip(asked, value, strict=True):
        if not isinstance(status, dict):
            continue
        final = status.get("confirmationStatus") == "finalized"
        if final or unfinalized_ttl_s > 0:
            ttl = FINAL_TTL_S if final else unfinalized_ttl_s
            entries.append(Entry(status_key(signature), orjson.dumps(status), ttl, final))
    return _sized(entries)


def _sized(entries: list[Entry]) -> list[Entry]:
    return [e for e in entries if len(e.value) <= MAX_ENTRY_BYTES and len(e.key) <= MAX_KEY_BYTES]


class ResponseLru:
    """The replica's layer: least recently used goes first, bounded in entries and in bytes (keys and
    values), TTL per entry. Single-threaded asyncio use only."""

    def __init__(
        self, max_entries: int, max_bytes: int = LRU_MAX_BYTES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, bytes]] = OrderedDict()

    def get(self, key: bytes) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires <= self._clock():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: bytes, value: bytes, ttl_s: float) -> None:
        if key in self._entries:
            self._drop(key)
        self._entries[key] = (self._clock() + ttl_s, value)
        self.bytes += len(key) + len(value)
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            old_key, (_, old) = self._entries.popitem(last=False)
            self.bytes -= len(old_key) + len(old)

    def _drop(self, key: bytes) -> None:
        _, value = self._entries.pop(key)
        self.bytes -= len(key) + len(value)

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)
