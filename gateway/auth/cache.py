"""A small replica-local cache: bounded (least recently used goes first) with a TTL per entry.

Used for API-key lookups and account existence, which would otherwise cost a database round trip on
every request, and for the public keys found to have no account (:class:`NoAccounts`). Single-threaded
asyncio use only: no locks.
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


#: How long "no account" is remembered at most (docs/api.md, Authentication). The account's appearance
#: drops it at once everywhere (a deposit credited or a first API key created, on the ``CREDITED`` channel);
#: this bounds what a notice lost in flight could cost a new account.
NO_ACCOUNT_TTL_S = 5.0


class NoAccounts:
    """Public keys a store query found without an account: their proven calls are answered 402 from
    here, without another query, until the account appears or ``ttl_s`` passes. Bounded: past
    ``max_entries`` the least recently seen are forgotten (they cost a query again, nothing more).

    A "no" is only as good as the news of accounts appearing, so one is remembered only while the
    channel that brings that news is followed (:meth:`following`, told by
    :class:`gateway.credits.notices.CreditNotices`): a new account must never be refused for a notice
    this process missed. Losing the channel forgets everything and remembers nothing until it is back;
    getting it back forgets everything again (notices may have been published meanwhile).

    A query that was in flight when an account appeared (or the channel changed) must not store its
    stale "no": :meth:`remember` takes the :attr:`generation` read before the query, and stores nothing
    if anything happened since.
    """

    def __init__(
        self, ttl_s: float = NO_ACCOUNT_TTL_S, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.generation = 0
        #: Whether the news of accounts appearing reaches this process (nothing is remembered otherwise).
        self.live = False
        self._keys: TtlCache[str, None] = TtlCache(max_entries, clock)

    def known(self, pubkey: str) -> bool:
        """Whether ``pubkey`` was found without an account within ``ttl_s`` (and has not appeared since)."""
        return self._keys.get(pubkey)[0]

    def remember(self, pubkey: str, generation: int) -> None:
        """A query begun at ``generation`` found no account for ``pubkey``."""
        if self.live and generation == self.generation:
            self._keys.put(pubkey, None, self.ttl_s)

    def appeared(self, pubkey: str) -> None:
        """``pubkey`` has an account now (a deposit credited it, or a key was created for it)."""
        self.generation += 1
        self._keys.pop(pubkey)

    def following(self, live: bool) -> None:
        """The channel announcing accounts was (re)subscribed, or lost: either way a notice may have
        been missed, so every "no" goes."""
        self.live = live
        self.generation += 1
        self._keys.clear()

    def __len__(self) -> int:
        return len(self._keys)
