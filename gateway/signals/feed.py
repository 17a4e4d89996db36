"""One replica's follower of the signal log: new events, in order, to the listeners registered here.

A replica runs one :class:`SignalFeed` (started and stopped by :class:`gateway.app.replica.GatewayApp`) and
every consumer in it (WebSocket sessions, later webhooks) registers a listener, so a replica reads each
event from Redis once whatever the number of subscribers. The feed starts after the newest event at
its start and follows with ``XREAD BLOCK`` from the last id it delivered. After a Redis failure it
waits (backoff up to :data:`MAX_BACKOFF_S`) and reads again from that id, so no event is skipped or
delivered twice; only events trimmed from the log (more than its retention) while Redis could not be
read are lost.

Listeners are called synchronously, in order, on the feed's task, with ``(event_id, event)``: they
must not block (queue the delivery and return) and must not modify ``event`` (every listener gets the
same dict). One that raises is logged and the others still get the event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from gateway.base.stopping import cancel_and_wait
from gateway.signals.store import SignalLog
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)

Listener = Callable[[str, dict[str, Any]], None]
#: How long one XREAD waits for a new event: below the Redis client's 5 s socket timeout.
BLOCK_MS: Final = 1_000
FIRST_BACKOFF_S: Final = 0.1
MAX_BACKOFF_S: Final = 5.0


class SignalFeed:
    def __init__(self, log_: SignalLog, *, block_ms: int = BLOCK_MS, batch: int = 256) -> None:
        self._log = log_
        self._block_ms = block_ms
        self._batch = batch
        self._listeners: dict[int, Listener] = {}
        self._next_token = 0
        self._task: asyncio.Task[None] | None = None
        self.position: str | None = None  # the id of the last event delivered (or the start's newest)
        self.ready = asyncio.Event()  # set once the start position is known
        self.delivered = 0
        self.failures = 0

    def start(self) -> None:
        """Start following, from the newest event now (on the running loop)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._follow(), name="signal-feed")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def add(self, listener: Listener) -> int:
        """Register ``listener`` for every event from now on; the token that :meth:`remove` takes."""
        self._next_token += 1
        self._listeners[self._next_token] = listener
        return self._next_token

    def remove(self, token: int) -> None:
        self._listeners.pop(token, None)

    async def _follow(self) -> None:
        backoff = FIRST_BACKOFF_S
        while True:
            try:
                if self.position is None:
                    self.position = await self._log.last_id()
                    self.ready.set()
                entries = await self._log.read_after(self.position, self._block_ms, self._batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # StoreUnavailable, or a client closed under it: never end the feed
                self.failures += 1
                if backoff == FIRST_BACKOFF_S:
                    level = logging.WARNING if isinstance(exc, StoreUnavailable) else logging.ERROR
                    log.log(level, "signal feed: %r; reading again from %s with backoff", exc, self.position)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            if backoff != FIRST_BACKOFF_S:
                log.info("signal feed: reading again")
                backoff = FIRST_BACKOFF_S
            for entry in entries:
                self.position = entry.id
                self._deliver(entry.id, entry.event)

    def _deliver(self, event_id: str, event: dict[str, Any]) -> None:
        self.delivered += 1
        for listener in list(self._listeners.values()):  # a listener may remove itself
            try:
                listener(event_id, event)
            except Exception:
                log.exception("signal feed: a listener failed on %s", event_id)
