"""A small replica-local cache: bounded (least recently used goes first) with a TTL per entry.

Used for API-key lookups and account existence, which would otherwise cost a database round trip on
every request. Single-threaded asyncio use only: no locks.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

_MISSING = object()


class TtlCache(Generic[K, V]):
    def __init__(self, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> tuple[bool, V | None]:
        """``(True, value)`` for a live entry, ``(False, None)`` otherwise (expired entries are dropped)."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        expires, value = entry
        if expires <= self._clock():
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, value

    def put(self, key: K, value: V, ttl_s: float) -> None:
        self._entries[key] = (self._clock() + ttl_s, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def pop(self, key: K) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
