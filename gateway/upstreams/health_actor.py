"""The ``upstream-health`` actor: the cluster's one owner of the nodes' health
(:class:`gateway.node.health.PoolHealth`).

A plain class, testable without Ray; :mod:`actors.upstream_health` makes it one named, detached,
restarting Ray actor. It probes every node on a :class:`gateway.base.loop_thread.LoopThread` from ``__init__``
(a restart re-runs only ``__init__``; what it knew is re-learned in a few probes), follows the operator's
changes in PostgreSQL once the database answers, and hands every process the pool's view when it
reports (:meth:`exchange`, called by Ray on its own thread: it only queues the report and returns the
last view, never waits on the loop).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.base.config import ServiceSettings
from gateway.base.loop_thread import LoopThread
from gateway.core.node_health import PoolView
from gateway.node.health import Changes, HealthSettings, PoolHealth, Report
from gateway.storage.connections import Connections, connect_when_up
from gateway.upstreams.store import read_changes

log = logging.getLogger(__name__)

#: The actor's name: every replica and actor reads the pool's view from it (actors/pool_health.py), the
#: CLI reports it.
UPSTREAM_HEALTH = "upstream-health"


class UpstreamHealthActor:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = ServiceSettings.model_validate(settings)
        self.owner = PoolHealth(
            self.settings.pool_nodes(), HealthSettings.from_settings(self.settings), changes=self._changes
        )
        self._conn: Connections | None = None
        self._thread = LoopThread("upstream-health", self._serve)
        self._thread.start()

    async def _serve(self, stop: asyncio.Event) -> None:
        owner = asyncio.create_task(self.owner.run(stop), name="pool-health")
        self._thread.ready.set()
        try:
            if self.settings.database_url:
                self._conn = await connect_when_up(self.settings, stop, "upstream health", redis=False, pool_size=1)
            await owner
        finally:
            if self._conn is not None:
                await self._conn.close()

    async def _changes(self) -> Changes:
        """The operator's changes, once the database answers (until then, the pool as configured)."""
        db = self._conn.db if self._conn is not None else None
        return Changes() if db is None else await read_changes(db)

    def exchange(self, report: Report, known_version: int) -> PoolView | None:
        return self.owner.exchange(report, known_version)

    def status(self) -> dict[str, Any]:
        return {"running": self._thread.alive, **self.owner.status()}

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._thread.stop(timeout_s)
