"""The gRPC stream actor: a thin shell around :class:`gateway.grpc.server.GrpcStreamServer`.

A plain class, testable without Ray; :mod:`actors` starts ``grpc_servers`` of them
(``grpc-stream-N``), named and restarted by Ray after a crash. Each is one process serving
``grpc_port`` (several share it through ``SO_REUSEPORT``, the kernel spreading connections over them)
with its one upstream geyser subscription and its own credit leases. The server runs on a
:class:`gateway.base.loop_thread.LoopThread` started in ``__init__``, so a restart serves again at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from gateway.base.loop_thread import LoopThread
from gateway.grpc.server import GrpcStreamServer, StreamServerSettings, tune_gc
from gateway.limits.slices import ShardClient

log = logging.getLogger(__name__)


class GrpcStreamActor:
    """Builds the server from settings, serves until shut down; ``wait_ready`` says once it listens."""

    def __init__(self, settings: dict[str, Any], name: str = "grpc-stream", shards: ShardClient | None = None) -> None:
        self.settings = StreamServerSettings.model_validate(settings)
        if not self.settings.database_url or self.settings.geyser_node() is None:
            raise ValueError("the gRPC stream needs resolved database_url and a node serving geyser (upstreams)")
        self.name = name
        self.shards = shards  # the account shards' client: each account's limits as the replicas share them
        tune_gc(self.settings)  # the process is this actor's alone
        self.server: GrpcStreamServer | None = None
        self.error: str | None = None
        self._started = threading.Event()  # set once the server listens, or failed to
        self._thread = LoopThread(name, self._serve)
        self._thread.start()

    async def _serve(self, stop: asyncio.Event) -> None:
        # Nothing here may touch self._thread: this can run before __init__ has assigned it.
        server = GrpcStreamServer(self.settings, reuse_port=self.settings.grpc_servers > 1, shards=self.shards)
        try:
            await server.start()
            self.server = server
        except Exception as exc:
            log.exception("%s: the gRPC stream could not start", self.name)
            self.error = f"{type(exc).__name__}: {exc}"
            await server.stop()
            return
        finally:
            self._started.set()
        try:
            await stop.wait()
        finally:
            await server.stop()

    def wait_ready(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """Wait until the server listens (or failed); its status."""
        if not self._started.wait(timeout_s):
            raise TimeoutError(f"{self.name} did not start within {timeout_s:g} s")
        if self.server is None:
            raise RuntimeError(f"{self.name} failed to start: {self.error or 'stopped'}")
        return self.status()

    def status(self) -> dict[str, Any]:
        server = self.server
        return {"running": self._thread.alive, **(server.status() if server is not None else {"error": self.error})}

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop serving (open streams end UNAVAILABLE) and settle credit usage; ``ray.kill`` ends the actor."""
        self._thread.stop(timeout_s)
