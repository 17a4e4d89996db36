"""How a replica or an actor reads the pool's health from the ``upstream-health`` actor
(:mod:`gateway.upstreams.health_actor`): the :class:`gateway.node.pool.HealthSource` of every
:class:`gateway.node.pool.NodePool` in a process ``gateway up`` started (:func:`read_pool_from_cluster`).

The actor by name, its handle kept while it answers. Anything Ray raises (the actor restarting) reaches the
pool as a failed exchange: it keeps its last view and asks again. A cluster with no such actor (an actor
started on its own, as tests do) has the process own the pool's health itself, as a process without Ray
does, and look for the actor again every ``LOOK_AGAIN_S``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from actors.cluster import NAMESPACE
from gateway.core.node_health import PoolView
from gateway.core.upstreams import UpstreamNode
from gateway.node.health import HealthSettings, LocalHealth, PoolHealth, Report
from gateway.node.pool import HealthSource, use_health_source
from gateway.upstreams.health_actor import UPSTREAM_HEALTH

log = logging.getLogger(__name__)


#: How often a process owning the pool's health itself looks for the cluster's owner again.
LOOK_AGAIN_S = 5.0


class ClusterHealth:
    def __init__(self, nodes: Sequence[UpstreamNode], settings: HealthSettings) -> None:
        self.nodes, self.settings = list(nodes), settings
        self._handle: Any = None
        self._own: LocalHealth | None = None
        self._looked = -LOOK_AGAIN_S

    async def exchange(self, report: Report, known_version: int) -> PoolView | None:
        import ray
        from ray.exceptions import RayError

        if self._handle is None and time.monotonic() - self._looked >= LOOK_AGAIN_S:
            self._looked = time.monotonic()
            try:  # a blocking call to Ray's GCS: off the event loop
                self._handle = await asyncio.to_thread(ray.get_actor, UPSTREAM_HEALTH, namespace=NAMESPACE)
            except ValueError:  # no such actor in this cluster
                if self._own is None:
                    log.warning("no %s actor in this cluster: this process probes the nodes itself", UPSTREAM_HEALTH)
        if self._handle is None:
            if self._own is None:
                self._own = LocalHealth(PoolHealth(self.nodes, self.settings))
            return await self._own.exchange(report, known_version)
        try:
            view: PoolView | None = await self._handle.exchange.remote(dict(report), known_version)
        except RayError:
            self._handle = None  # looked up again: a restarted actor answers by its name
            self._looked = -LOOK_AGAIN_S
            raise
        if self._own is not None:  # the cluster's owner found: this process's own stops
            await self._own.close()
            self._own = None
        return view

    async def close(self) -> None:
        self._handle = None
        if self._own is not None:
            await self._own.close()
            self._own = None


def _cluster_health(nodes: Sequence[UpstreamNode], settings: HealthSettings) -> HealthSource:
    return ClusterHealth(nodes, settings)


def read_pool_from_cluster() -> None:
    """Every node pool this process builds reads the pool's health from the cluster's owner."""
    use_health_source(_cluster_health)
