"""What the long-running singleton actors share: a loop of their own on a thread (the database they wait
for: :func:`gateway.storage.connections.connect_when_up`; their client of the node:
:func:`gateway.node.pool.node_client`).

A Ray restart re-runs only ``__init__``, so such an actor starts its work there, on a thread with its
own event loop, rather than waiting for a method call that would never come after a restart. Its
methods (status, a pass now, shutdown) reach that loop from Ray's threads through :meth:`LoopThread.call`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Runs ``main(stop)`` on a thread of its own, from :meth:`start` until ``stop`` is set.

    Starting is a separate step so the owner can keep a reference first: ``main`` may use it at once.
    """

    def __init__(self, name: str, main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
        self._main = main
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self.ready = threading.Event()  # set by the work once it can take calls (or has ended)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        try:
            await self._main(self._stop)
        finally:
            self.ready.set()

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run ``coro`` on the thread's loop and wait for its result (from any other thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def stop(self, timeout_s: float) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout_s)
