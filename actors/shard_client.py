"""How a replica reaches the account-shard actors the app's ``Service`` deployment started
(:mod:`gateway.limits.shard_actor`): the :class:`gateway.limits.slices.ShardClient` of
:class:`gateway.limits.slices.SlicedLimiter`.

Each shard by name, its handle kept while it answers. Anything Ray raises (the actor dead, being
restarted, not started) is :class:`ShardUnavailable`: the limiter refuses the calls that need that
shard (503), never admits them unmetered; a restarted shard is found again by its name.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray
from ray.exceptions import RayError

from actors.cluster import NAMESPACE
from gateway.limits.shards import SliceGrant, SliceRequest, shard_name
from gateway.limits.slices import ShardUnavailable

log = logging.getLogger(__name__)


class RayShards:
    def __init__(self, shards: int) -> None:
        self.shards = shards
        self._handles: dict[int, Any] = {}

    async def _handle(self, shard: int) -> Any:
        handle = self._handles.get(shard)
        if handle is None:
            try:  # a blocking call to Ray's GCS: off the event loop, which serves every other call meanwhile
                handle = await asyncio.to_thread(ray.get_actor, shard_name(shard), namespace=NAMESPACE)
            except ValueError as exc:  # not started, or ended for good
                raise ShardUnavailable(f"{shard_name(shard)} is not running") from exc
            self._handles[shard] = handle
        return handle

    async def exchange(self, shard: int, request: SliceRequest) -> SliceGrant:
        handle = await self._handle(shard)
        try:
            grant: SliceGrant = await handle.exchange.remote(request)
        except RayError as exc:
            self._handles.pop(shard, None)  # looked up again: a restarted actor answers by its name
            raise ShardUnavailable(f"{shard_name(shard)}: {type(exc).__name__}") from exc
        return grant
