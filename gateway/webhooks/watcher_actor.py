"""The webhook watcher actor: the sources of transaction and signal webhook events, on one loop.

A plain class, testable without Ray; :mod:`actors` makes it one named, detached,
restarting Ray actor per cluster (``webhook-watcher``). It runs :class:`gateway.webhooks.sources.TransactionWatches`
(with the node's PubSub for wake-ups) and :class:`gateway.webhooks.sources.SignalWebhooks` side by
side on a :class:`gateway.base.loop_thread.LoopThread` from ``__init__``; both resume from their positions in
PostgreSQL after a restart. Two at once would still write each job once (dedupe keys), only wastefully.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.base.loop_thread import LoopThread
from gateway.core.upstreams import Role
from gateway.node.pool import node_client
from gateway.node.pubsub import UpstreamPubSub
from gateway.node.streams import PoolStreamNodes
from gateway.signals.settings import SignalSettings
from gateway.signals.store import SignalLog
from gateway.storage.connections import connect_when_up
from gateway.webhooks.backlog import backlog_gauges
from gateway.webhooks.retention import JobRetention
from gateway.webhooks.settings import WebhookSettings
from gateway.webhooks.sources import SignalWebhooks, TransactionWatches

log = logging.getLogger(__name__)


class WatcherSettings(WebhookSettings, SignalSettings):
    """What the watcher reads: webhooks' settings, and how far back the signal log it follows reaches."""


class WebhookWatcherActor:
    """Builds the pool, Redis, the node's RPC and PubSub from settings and runs both sources until stopped."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = WatcherSettings.model_validate(settings)
        if not self.settings.database_url or self.settings.embedded_chain:
            raise ValueError(
                "the webhook watcher needs resolved database_url and node settings (upstreams or upstream_rpc_url)"
            )
        self.watches: TransactionWatches | None = None
        self.signals: SignalWebhooks | None = None
        self.retention: JobRetention | None = None
        self._thread = LoopThread("webhook-watcher", self._serve)
        self._thread.start()

    async def _serve(self, stop: asyncio.Event) -> None:
        s = self.settings
        upstream = node_client(s)
        pubsub = (  # the watches' streams move with the pool's PubSub nodes; polls read through the pool
            UpstreamPubSub(
                PoolStreamNodes(upstream, Role.PUBSUB),
                ca_file=s.upstream_ca_file,
                silence_s=s.upstream_stream_silence_s,
            )
            if s.pubsub_node() is not None
            else None
        )
        conn = await connect_when_up(s, stop, "webhook watcher", redis=True)
        try:
            if conn is None or conn.db is None:
                return
            self.watches = TransactionWatches(conn.db, upstream, pubsub)
            self.retention = JobRetention(
                conn.db, s.webhook_retention_days, paused_days=s.webhook_paused_retention_days
            )
            work = [self.watches.run(stop), self.retention.run(stop), backlog_gauges(conn.db, stop)]
            if conn.redis is not None:
                self.signals = SignalWebhooks(conn.db, SignalLog(conn.redis, retention=s.signal_retention_events))
                work.append(self.signals.run(stop))
            log.info("webhook watcher: transaction watches%s", " and signals" if self.signals else "")
            await asyncio.gather(*work)
        finally:
            if pubsub is not None:
                await pubsub.close()
            await upstream.close()
            if conn is not None:
                await conn.close()

    def status(self) -> dict[str, Any]:
        """What the sources have done (for health views and tests)."""
        watches = self.watches.stats.as_dict() if self.watches else {}
        signals = self.signals.stats.as_dict() if self.signals else {}
        addresses = len(self.watches.addresses) if self.watches else 0
        purged = self.retention.purged if self.retention else 0
        return {"running": self._thread.alive, "addresses": addresses, "jobs_purged": purged, **watches, **signals}

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop the loop and close the connections; the actor itself is ended by ``ray.kill``."""
        self._thread.stop(timeout_s)
