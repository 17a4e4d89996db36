"""The deposit watcher actor: a thin shell around :class:`gateway.credits.watcher.DepositWatcher`.

A plain class, testable without Ray; :mod:`gateway.runtime.actors` makes it one named, detached,
restarting Ray actor per cluster, so replicas never poll the node in parallel (two would still be
safe: crediting is idempotent per signature, just wasteful). Since a restart only re-runs
``__init__``, the poll loop is started from ``__init__`` on a thread of its own with its own event
loop, instead of waiting for a method call that would never come after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

from gateway.config import Settings
from gateway.credits.chain_reads import credit_policy, deposit_ata_for
from gateway.credits.notices import CreditNotices
from gateway.credits.watcher import DepositWatcher
from gateway.storage.channels import CREDITED, Channel
from gateway.storage.connections import Connections
from gateway.storage.errors import StoreUnavailable
from gateway.upstream import HttpUpstream

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 2.0


class DepositWatcherActor:
    """Builds the pool and upstream from settings and runs ``DepositWatcher.run`` until stopped."""

    def __init__(self, settings: dict[str, Any], interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.settings = Settings.model_validate(settings)
        if not self.settings.database_url or not self.settings.upstream_rpc_url:
            raise ValueError("the deposit watcher needs resolved database_url and upstream_rpc_url settings")
        self.interval_s = interval_s
        self.deposit_ata = str(deposit_ata_for(self.settings))
        self.watcher: DepositWatcher | None = None
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="deposit-watcher", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        upstream = HttpUpstream(str(self.settings.upstream_rpc_url), self.settings.fallback_rpc_url, connections=4)
        conn: Connections | None = None
        try:
            while conn is None and not self._stop.is_set():
                try:
                    conn = await Connections.open(self.settings.database_url, self.settings.redis_url, pool_size=2)
                except StoreUnavailable as exc:  # database not up yet: keep trying
                    log.warning("deposit watcher: %s", exc)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), 2.0)
            if conn is None or conn.db is None:
                return
            notices = CreditNotices(Channel(conn.redis, CREDITED) if conn.redis is not None else None)
            self.watcher = DepositWatcher(
                conn.db,
                upstream,
                credit_policy(self.settings),
                self.deposit_ata,
                self.settings.usdc_mint,
                after_credit=notices.credited,
            )
            self._ready.set()
            log.info("deposit watcher following %s every %g s", self.deposit_ata, self.interval_s)
            await self.watcher.run(self.interval_s, self._stop)
        finally:
            self._ready.set()
            await upstream.close()
            if conn is not None:
                await conn.close()

    def status(self) -> dict[str, Any]:
        """Where the watcher is and what it has done (for health views and tests)."""
        stats = self.watcher.stats.as_dict() if self.watcher else {}
        return {"deposit_ata": self.deposit_ata, "running": self._thread.is_alive(), **stats}

    def poll_now(self, timeout_s: float = 60.0) -> int:
        """Run one poll at once (besides the loop's own); the number of signatures processed."""
        if not self._ready.wait(timeout_s) or self.watcher is None:
            raise RuntimeError("the deposit watcher is not running")
        future = asyncio.run_coroutine_threadsafe(self.watcher.run_once(), self._loop)
        return future.result(timeout_s)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop the loop and close the pool; the actor itself is ended by ``ray.kill``."""
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout_s)
