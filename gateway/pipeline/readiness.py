"""The readiness stage: while no node is in service for reads (at start, or every node down), paid traffic
gets 503 -32003 at once, free, rather than a failed forward. After auth and the credit headers, before
parsing (:mod:`gateway.pipeline.stages`); it reads the node pool, never the composition root."""

from __future__ import annotations

from typing import Protocol

from gateway.core.errors import service_unavailable
from gateway.pipeline.stages import Call, Handler, Reply


class Nodes(Protocol):
    @property
    def ready(self) -> bool:
        """Whether a node is in service for reads."""


class Readiness:
    """Stage: 503 -32003 (``SERVICE_TEMPORARILY_UNAVAILABLE``, ``Retry-After: retry_after_s``) while
    ``nodes`` is not ready."""

    def __init__(self, nodes: Nodes, retry_after_s: int) -> None:
        self.nodes = nodes
        self.retry_after_s = retry_after_s

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        if not self.nodes.ready:
            raise service_unavailable("no upstream node is in service; retry later", self.retry_after_s)
        return await next_handler(call)
