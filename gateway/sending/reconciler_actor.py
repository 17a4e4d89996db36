"""The send reconciler actor: settles every held send its race left pending, from the chain.

A send is left ``pending`` when its race ended ``unknown`` (not seen landing in 30 slots), its racer
died, its replica died, or the ledger could not be written at the outcome. Every ``interval_s`` this
actor settles the pending sends older than ``min_age_s`` (longer than a race lasts) with
:func:`gateway.sending.reconcile.reconcile`: landed → charged as the race would have, blockhash
expired and never landed → ``expired``, free. So a pending charge lasts at most about a blockhash
lifetime (150 blocks) plus ``min_age_s`` and one interval.

Beside it, once an hour, it deletes settled sends and usage rows past their retention
(:mod:`gateway.credits.retention`, which says why this actor owns both).

Like the deposit watcher, it runs its loop on its own thread from ``__init__`` (a Ray restart only
re-runs ``__init__``) and is one named, detached, restarting actor per cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from gateway.base.loop_thread import LoopThread
from gateway.credits.retention import SettledRetention
from gateway.credits.settings import CreditSettings
from gateway.node.http import Upstream
from gateway.node.pool import node_client
from gateway.sending.reconcile import UNPROVEN_RELEASE_S, reconcile
from gateway.sending.settings import SendingSettings
from gateway.storage import sends
from gateway.storage.connections import Pool, connect_when_up
from gateway.storage.errors import StoreUnavailable
from gateway.storage.sends import SendStatus

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 2.0
DEFAULT_MIN_AGE_S = 20.0  # a race gives up after 30 slots (12 s at 400 ms): leave it that and more


class ReconcilerSettings(SendingSettings, CreditSettings):
    """What the reconciler reads: sending's settings, and how long usage rows are kept (it deletes both)."""


class SendReconciler:
    """One pass at a time over the pending sends (no Ray, no thread: the actor below runs it)."""

    def __init__(
        self,
        pool: Pool,
        node: Upstream,
        min_age_s: float = DEFAULT_MIN_AGE_S,
        release_after_s: float = UNPROVEN_RELEASE_S,
    ) -> None:
        self.pool = pool
        self.node = node
        self.min_age_s = min_age_s
        self.release_after_s = release_after_s  # send_unproven_release_s
        self.settled = 0
        self.passes = 0

    async def run_once(self) -> int:
        """Settle what the chain can prove; the number of sends settled in this pass."""
        settled = 0
        for record in await sends.pending(self.pool, self.min_age_s):
            after = await reconcile(self.pool, self.node, record, "reconciler", self.release_after_s)
            settled += after.status is not SendStatus.PENDING
        self.passes += 1
        self.settled += settled
        return settled

    async def run(self, interval_s: float, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.run_once()
            except StoreUnavailable as exc:
                log.warning("send reconciler: %s; next pass in %g s", exc, interval_s)
            except Exception:
                log.exception("send reconciler pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)


class SendReconcilerActor:
    def __init__(
        self, settings: dict[str, Any], interval_s: float = DEFAULT_INTERVAL_S, min_age_s: float = DEFAULT_MIN_AGE_S
    ) -> None:
        self.settings = ReconcilerSettings.model_validate(settings)
        if not self.settings.database_url or self.settings.embedded_chain:
            raise ValueError(
                "the send reconciler needs resolved database_url and node settings (upstreams or upstream_rpc_url)"
            )
        self.interval_s = interval_s
        self.min_age_s = min_age_s
        self.reconciler: SendReconciler | None = None
        self.retention: SettledRetention | None = None
        self._thread = LoopThread("send-reconciler", self._serve)
        self._thread.start()

    async def _serve(self, stop: asyncio.Event) -> None:
        node = node_client(self.settings)
        conn = await connect_when_up(self.settings, stop, "send reconciler", redis=False)
        try:
            if conn is None or conn.db is None:
                return
            s = self.settings
            self.reconciler = SendReconciler(conn.db, node, self.min_age_s, s.send_unproven_release_s)
            self.retention = SettledRetention(conn.db, s.send_retention_days, s.usage_retention_days)
            self._thread.ready.set()
            await asyncio.gather(self.reconciler.run(self.interval_s, stop), self.retention.run(stop))
        finally:
            await node.close()
            if conn is not None:
                await conn.close()

    def status(self) -> dict[str, Any]:
        r, kept = self.reconciler, self.retention
        return {
            "running": self._thread.alive,
            "passes": r.passes if r else 0,
            "settled": r.settled if r else 0,
            "sends_purged": kept.sends_purged if kept else 0,
            "usage_purged": kept.usage_purged if kept else 0,
        }

    def reconcile_now(self, timeout_s: float = 60.0) -> int:
        """Run one pass at once (besides the loop's own); the number of sends settled."""
        if not self._thread.ready.wait(timeout_s) or self.reconciler is None:
            raise RuntimeError("the send reconciler is not running")
        return self._thread.call(self.reconciler.run_once(), timeout_s)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._thread.stop(timeout_s)
