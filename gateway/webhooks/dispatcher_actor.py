"""The webhook dispatcher actor: a thin shell around :class:`gateway.webhooks.dispatcher.Dispatcher`.

A plain class, testable without Ray; :mod:`actors` starts a small pool of them
(``webhook_dispatchers``, named ``webhook-dispatcher-N``) as named, detached, restarting Ray actors.
Any number may run at once: PostgreSQL hands each due job to one of them (``FOR UPDATE SKIP
LOCKED``, under a lease), so they share the queue without talking to each other. Its loop runs on a
:class:`gateway.base.loop_thread.LoopThread` from ``__init__`` (a restart re-runs only ``__init__``; jobs
the previous incarnation held are claimed again when their lease passes).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from typing import Any

from gateway.base.loop_thread import LoopThread
from gateway.base.process_gc import freeze_startup, tune_gc
from gateway.storage.connections import connect_when_up
from gateway.webhooks.dispatcher import DispatchConfig, Dispatcher, RetryPolicy, fixed_delays
from gateway.webhooks.rules import retry_delay_s
from gateway.webhooks.settings import WebhookSettings

log = logging.getLogger(__name__)

#: Database connections of one dispatcher: claims, outcome writes, and charges of signal deliveries.
POOL_SIZE = 4


def dispatch_config(settings: WebhookSettings) -> DispatchConfig:
    return DispatchConfig(
        concurrency=settings.webhook_concurrency,
        per_webhook=settings.webhook_per_subscription,
        per_account=settings.webhook_per_account,
        total_slots=max(1, settings.webhook_dispatchers) * settings.webhook_concurrency,  # each account's share
        pause_after_dead=settings.webhook_pause_after_dead,
        timeout_s=settings.webhook_delivery_timeout_s,
        lease_s=settings.webhook_lease_s,
        allow_private=settings.webhook_allow_private,
    )


class WebhookDispatcherActor:
    """Builds the pool from settings and runs ``Dispatcher.run`` until stopped.

    ``retry_delays`` replaces the service's retry schedule (tests); ``name`` names the thread and,
    with the process id and a random suffix, the dispatcher's claims (``locked_by``): each
    incarnation has its own, so a restarted actor never takes its predecessor's claims for its own.
    """

    def __init__(
        self, settings: dict[str, Any], name: str = "webhook-dispatcher-0", retry_delays: list[float] | None = None
    ) -> None:
        self.settings = WebhookSettings.model_validate(settings)
        if not self.settings.database_url:
            raise ValueError("the webhook dispatcher needs a resolved database_url setting")
        self.name = name
        self.dispatcher_id = f"{name}:{os.getpid()}:{secrets.token_hex(4)}"
        self.config = dispatch_config(self.settings)
        self.retry: RetryPolicy = retry_delay_s if retry_delays is None else fixed_delays(retry_delays)
        self.dispatcher: Dispatcher | None = None
        tune_gc(self.settings.gc_young_threshold)  # the process is this actor's alone
        self._thread = LoopThread(name, self._serve)
        self._thread.start()

    async def _serve(self, stop: asyncio.Event) -> None:
        conn = await connect_when_up(self.settings, stop, self.name, redis=False, pool_size=POOL_SIZE)
        if conn is None or conn.db is None:
            return
        try:
            self.dispatcher = Dispatcher(conn.db, self.dispatcher_id, self.config, retry=self.retry)
            # Set up: what lives as long as the process (Ray's modules, the pool) is left out of later
            # collections, each of which walked it all (bench/README.md, Webhooks, 2026-11-26).
            freeze_startup()
            log.info(
                "webhook dispatcher %s: %d deliveries at once, %d per subscription, %s per account",
                self.dispatcher_id,
                self.config.concurrency,
                self.config.per_webhook,
                self.config.per_account,
            )
            await self.dispatcher.run(stop)
        finally:
            await conn.close()

    def status(self) -> dict[str, Any]:
        """What the dispatcher has done (for health views and tests)."""
        stats = self.dispatcher.stats.as_dict() if self.dispatcher is not None else {}
        in_flight = self.dispatcher.in_flight if self.dispatcher is not None else 0
        return {"id": self.dispatcher_id, "running": self._thread.alive, "in_flight": in_flight, **stats}

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop claiming, let deliveries out finish (``drain_s``), write their outcomes and close the
        pool; the actor itself is ended by ``ray.kill``."""
        self._thread.stop(timeout_s)
