"""The signal classifier actor: a thin shell around :class:`gateway.signals.classifier.SignalClassifier`.

A plain class, testable without Ray; :mod:`actors` makes it one named, detached,
restarting Ray actor per cluster (``signal-classifier``), so one poller reads the node's blocks and
every replica follows its log. Two at once would still be safe: the log's cursor lets only one of them
append a slot (:class:`gateway.signals.store.CursorConflict` for the other). Its poll loop runs on a
:class:`gateway.base.loop_thread.LoopThread` from ``__init__`` (a restart re-runs only ``__init__``, and the
classifier resumes from the stored cursor).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.base.loop_thread import LoopThread
from gateway.node.pool import node_client
from gateway.signals.classifier import SignalClassifier
from gateway.signals.rules import SignalRules
from gateway.signals.settings import SignalSettings
from gateway.signals.store import SignalLog
from gateway.storage.connections import Connections

log = logging.getLogger(__name__)


def rules_of(settings: SignalSettings) -> SignalRules:
    return SignalRules(
        programs=frozenset(settings.signal_programs),
        large_swap_lamports=settings.signal_large_swap_lamports,
        wallets=frozenset(settings.signal_wallets),
    )


class SignalClassifierActor:
    """Builds the Redis client and upstream from settings and runs ``SignalClassifier.run`` until stopped."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = SignalSettings.model_validate(settings)
        if not self.settings.redis_url or self.settings.embedded_chain:
            raise ValueError(
                "the signal classifier needs resolved redis_url and node settings (upstreams or upstream_rpc_url)"
            )
        self.classifier: SignalClassifier | None = None
        self._thread = LoopThread("signal-classifier", self._serve)
        self._thread.start()

    async def _serve(self, stop: asyncio.Event) -> None:
        s = self.settings
        upstream = node_client(s)
        conn = await Connections.open(None, s.redis_url)  # Redis only: connects at the first command
        try:
            assert conn.redis is not None
            signal_log = SignalLog(conn.redis, retention=s.signal_retention_events)
            self.classifier = SignalClassifier(signal_log, upstream, rules_of(s))
            log.info("signal classifier watching %s every %g s", ", ".join(s.signal_programs), s.signal_poll_s)
            await self.classifier.run(s.signal_poll_s, stop)
        finally:
            await upstream.close()
            await conn.close()

    def status(self) -> dict[str, Any]:
        """Where the classifier is and what it has done (for health views and tests)."""
        stats = self.classifier.stats.as_dict() if self.classifier else {}
        return {"running": self._thread.alive, **stats}

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop the loop and close the connections; the actor itself is ended by ``ray.kill``."""
        self._thread.stop(timeout_s)
