"""The deposit watcher actor: a thin shell around :class:`gateway.credits.watcher.DepositWatcher`.

A plain class, testable without Ray; :mod:`actors` makes it one named, detached,
restarting Ray actor per cluster, so replicas never poll the node in parallel (two would still be
safe: crediting is idempotent per signature, just wasteful). Its poll loop runs on a
:class:`gateway.base.loop_thread.LoopThread` from ``__init__`` (a restart re-runs only ``__init__``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.base.loop_thread import LoopThread
from gateway.credits.chain_reads import credit_policy, deposit_ata_for
from gateway.credits.fee_payer import fee_payer_gauge
from gateway.credits.notices import CreditNotices
from gateway.credits.settings import CreditSettings
from gateway.credits.watcher import DepositWatcher
from gateway.node.pool import node_client
from gateway.storage.channels import CREDITED, Channel
from gateway.storage.connections import connect_when_up

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 2.0


class DepositWatcherActor:
    """Builds the pool and upstream from settings and runs ``DepositWatcher.run`` until stopped."""

    def __init__(self, settings: dict[str, Any], interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.settings = CreditSettings.model_validate(settings)
        if not self.settings.database_url or self.settings.embedded_chain:
            raise ValueError(
                "the deposit watcher needs resolved database_url and node settings (upstreams or upstream_rpc_url)"
            )
        self.interval_s = interval_s
        self.deposit_ata = str(deposit_ata_for(self.settings))
        self.watcher: DepositWatcher | None = None
        self._thread = LoopThread("deposit-watcher", self._serve)
        self._thread.start()

    async def _serve(self, stop: asyncio.Event) -> None:
        upstream = node_client(self.settings)
        conn = await connect_when_up(self.settings, stop, "deposit watcher", redis=True)
        try:
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
            self._thread.ready.set()
            log.info("deposit watcher following %s every %g s", self.deposit_ata, self.interval_s)
            fee_payer = self.settings.fee_payer_address
            gauge = [fee_payer_gauge(upstream, fee_payer, stop)] if fee_payer and self.settings.x402_settle else []
            await asyncio.gather(self.watcher.run(self.interval_s, stop), *gauge)
        finally:
            await upstream.close()
            if conn is not None:
                await conn.close()

    def status(self) -> dict[str, Any]:
        """Where the watcher is and what it has done (for health views and tests)."""
        stats = self.watcher.stats.as_dict() if self.watcher else {}
        return {"deposit_ata": self.deposit_ata, "running": self._thread.alive, **stats}

    def poll_now(self, timeout_s: float = 60.0) -> int:
        """Run one poll at once (besides the loop's own); the number of signatures processed."""
        if not self._thread.ready.wait(timeout_s) or self.watcher is None:
            raise RuntimeError("the deposit watcher is not running")
        return self._thread.call(self.watcher.run_once(), timeout_s)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop the loop and close the pool; the actor itself is ended by ``ray.kill``."""
        self._thread.stop(timeout_s)
