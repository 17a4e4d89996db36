"""The finality-aware response cache: a replica's LRU in front of Redis, asked by the forwarder.

The forwarder asks it twice per call (:class:`gateway.rpc.forward.Forwarder`): before the node, to answer
the items whose answers are cached (they are then answered and not sent, exactly as an item a
handler answered), and after the node, to keep what the node sent that may be kept. A call none of
whose methods is ever cached (``may_answer``: a ``getSlot``) is not looked up at all: it is a miss. What may be
kept, under which key and for how long is :mod:`gateway.rpc.cache_rules`'s rule; Redis is
:mod:`gateway.rpc.store`, best effort.

It is a step of the forwarder rather than a stage in front of it: the cache stands in for the node,
and a partly cached ``getSignatureStatuses`` is merged with the node's answer before the reply is
rendered once (a stage after the forwarder would render it twice). It runs after metering like the
node does, so a cached answer is admitted and charged exactly as the node's answer would be: the
saving is the node's, not the caller's.

Layers: the replica's LRU answers without leaving the process; final answers (and only those) are
also written to Redis, off the call's path, so the other replicas find them there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.core.jsonrpc import RpcItem
from gateway.rpc.cache_rules import (
    CACHED_METHODS,
    FINAL_TTL_S,
    STATUSES,
    Lookup,
    ResponseLru,
    ask_node_for_missing,
    entries_to_keep,
    hit_response,
    lookup_of,
    merge_statuses,
    statuses_response,
)
from gateway.rpc.store import SharedResponses

log = logging.getLogger(__name__)

HEADER = "X-Cache"
#: The header's value when the cache answered none of a call's items.
MISS = "miss"


@dataclass(slots=True)
class CacheRound:
    """One call's lookups: what the cache answered, and what to keep once the node has answered."""

    lookups: list[Lookup] = field(default_factory=list)
    asked: dict[int, list[str]] = field(default_factory=dict)  # partly cached statuses: all their signatures

    def header(self, answered: int) -> str:
        """``hit`` when the cache answered every item of the call, ``partial`` when it answered some
        items or some signatures of a ``getSignatureStatuses``, ``miss`` otherwise."""
        complete = sum(1 for lookup in self.lookups if lookup.complete)
        if answered and complete == answered:
            return "hit"
        return "partial" if any(lookup.partial for lookup in self.lookups) else MISS


class ResponseCache:
    """Args:
    entries: the replica's LRU bound (it is also bounded in bytes: ``LRU_MAX_BYTES``).
    unfinalized_ttl_s: how long an answer that may still change is kept here (0: never).
    finalized_slot: the newest finalized slot this replica knows (the health probe's), or None.
    """

    def __init__(self, entries: int, unfinalized_ttl_s: float, finalized_slot: Callable[[], int | None]) -> None:
        self.lru = ResponseLru(entries)
        self.unfinalized_ttl_s = unfinalized_ttl_s
        self.finalized_slot = finalized_slot
        self.shared: SharedResponses | None = None  # set once Redis is open
        self._context: dict[str, Any] = {}  # the newest getSignatureStatuses context the node sent
        self._writes: set[asyncio.Task[bool]] = set()

    @staticmethod
    def may_answer(items: list[RpcItem]) -> bool:
        """Whether any of ``items`` is of a method whose answers are ever cached (else: a miss, unlooked)."""
        return any(item.method in CACHED_METHODS for item in items)

    async def answer(self, items: list[RpcItem]) -> CacheRound:
        """Answer from the cache what it holds; the rest stays pending (a partly cached
        ``getSignatureStatuses`` asks the node for the missing signatures only)."""
        round_ = CacheRound([lookup for lookup in map(lookup_of, items) if lookup is not None])
        wanted: list[tuple[Lookup, int]] = []
        for lookup in round_.lookups:
            lookup.found = [self.lru.get(key) for key in lookup.keys]
            wanted += [(lookup, n) for n, value in enumerate(lookup.found) if value is None]
        if wanted and self.shared is not None:
            values = await self.shared.get_many([lookup.keys[n] for lookup, n in wanted])
            for (lookup, n), value in zip(wanted, values, strict=True):
                if value is not None:  # only final answers are shared
                    lookup.found[n] = value
                    self.lru.put(lookup.keys[n], value, FINAL_TTL_S)
        for lookup in round_.lookups:
            if lookup.complete:
                self._respond(lookup)
            elif lookup.partial:  # only getSignatureStatuses has more than one key
                round_.asked[lookup.item.index] = list(lookup.item.params[0])
                ask_node_for_missing(lookup)
        return round_

    def _respond(self, lookup: Lookup) -> None:
        item = lookup.item
        found = [value for value in lookup.found if value is not None]
        if item.method == STATUSES:
            context = {**self._context, "slot": max(self._context.get("slot", 0), self.finalized_slot() or 0)}
            item.response = statuses_response(item, found, context)
        else:
            item.response = hit_response(item, found[0])

    def keep(self, round_: CacheRound) -> None:
        """After the node: remember what may be remembered, and merge partly cached statuses."""
        finalized_slot = self.finalized_slot()
        shared: list[tuple[bytes, bytes, float]] = []
        for lookup in round_.lookups:
            if lookup.complete:
                continue
            item = lookup.item
            signatures = round_.asked.get(item.index, item.params[0] if item.method == STATUSES else None)
            for entry in entries_to_keep(lookup, finalized_slot, self.unfinalized_ttl_s, signatures):
                self.lru.put(entry.key, entry.value, entry.ttl_s)
                if entry.final:
                    shared.append((entry.key, entry.value, entry.ttl_s))
            if item.method == STATUSES:
                self._learn_context(item)
            if item.index in round_.asked:
                merge_statuses(lookup, round_.asked[item.index])
        if shared and self.shared is not None:
            task = asyncio.get_running_loop().create_task(self.shared.set_many(shared))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    def _learn_context(self, item: RpcItem) -> None:
        result = item.response.get("result") if item.response is not None else None
        context = result.get("context") if isinstance(result, dict) else None
        slot = context.get("slot") if isinstance(context, dict) else None
        if isinstance(context, dict) and isinstance(slot, int) and slot >= self._context.get("slot", 0):
            self._context = context

    async def close(self) -> None:
        """Let the writes under way finish (briefly)."""
        if self._writes:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*self._writes, return_exceptions=True), 2.0)
