"""The account-shard actor: owns the rate buckets and concurrency budgets of the accounts that hash to
it, and hands replicas slices of them (:mod:`gateway.limits.shards` has the rules and the bound).

A plain class, testable without Ray; :mod:`actors` starts ``account_shards`` of them
as named, restarting actors (``account-shard-0`` …), and :class:`actors.shard_client.RayShards`
is how a replica reaches them. Its state is soft: a restarted shard has a new epoch and no holders,
and is young for a slice's TTL (``restarted``): no tokens, no new slots, so that slices of the
previous incarnation still in use cannot add to a fresh burst.

Its methods are plain functions: Ray runs them one at a time, in order, which is what the book needs.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from gateway.limits.shards import SLICE_TTL_S, ShardBook, SliceGrant, SliceRequest


class AccountShard:
    def __init__(self, index: int, *, ttl_s: float = SLICE_TTL_S, restarted: bool = False) -> None:
        self.index = index
        self.book = ShardBook(
            f"{index}-{uuid.uuid4().hex[:12]}", ttl_s=ttl_s, restarted_at=time.monotonic() if restarted else None
        )
        self.exchanges = 0

    def exchange(self, request: SliceRequest) -> SliceGrant:
        self.exchanges += 1
        return self.book.exchange(request, time.monotonic())

    def status(self) -> dict[str, Any]:
        return {"index": self.index, "exchanges": self.exchanges, **self.book.status(time.monotonic())}

    def shutdown(self) -> None:
        """Nothing to flush: the state is soft."""
