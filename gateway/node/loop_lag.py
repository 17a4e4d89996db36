"""The time this process's event loop was held up while the pool waited on a node: what the pool takes out of
a probe's or a call's time, so that the gateway's own slowness (busy serving, or the process starved of CPU on a
saturated machine) is never counted as the node's (issue 83). One per loop: the pool's owner's probes
(:mod:`gateway.node.health`) and each process's calls (:mod:`gateway.node.pool`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class LoopLag:
    """How long this process's event loop has been held up while a probe or a call was in flight, summed: the
    time by which a timer ticking every ``tick_s`` ran late (past ``slack_s`` of ordinary jitter), the current
    delay included. A wait on a node minus what this grew by meanwhile is the time the node had: the gateway's own
    slowness taken out, but for ``tick_s + slack_s`` of each turn of a loop held up at every turn (a probe
    takes a few turns).

    The timer ticks only while something is :meth:`watching`: ticking always, the pool's owner of three
    nodes at rest took 4.27% of a core, and 0.94% with this (bench.pool_owner, bench/README.md)."""

    def __init__(self, tick_s: float = 0.01, slack_s: float = 0.001) -> None:
        self.tick_s = tick_s
        self.slack_s = slack_s
        self._held = 0.0
        self._watchers = 0
        self._due: float | None = None  # when the next tick is due (loop time), while ticking
        self._task: asyncio.Task[None] | None = None

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Tick while the block runs (on the loop it measures); nested and concurrent uses share the timer."""
        self._watchers += 1
        if self._task is None:
            loop = asyncio.get_running_loop()
            self._due = loop.time() + self.tick_s
            self._task = loop.create_task(self._ticking(loop), name="loop-lag")
        try:
            yield
        finally:
            self._watchers -= 1
            if self._watchers == 0 and self._task is not None:
                self._held = self.held()  # the current delay counts: the timer stops before it would fire
                self._due = None
                self._task.cancel()  # parked in its sleep: nothing of it runs after this
                self._task = None

    def held(self) -> float:
        """Seconds the loop was held up so far while watched."""
        if self._due is None or self._task is None:
            return self._held
        return self._held + max(0.0, self._task.get_loop().time() - self._due - self.slack_s)

    async def _ticking(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            assert self._due is not None
            await asyncio.sleep(max(0.0, self._due - loop.time()))
            now = loop.time()
            self._held += max(0.0, now - self._due - self.slack_s)
            self._due = now + self.tick_s
