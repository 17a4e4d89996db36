"""Which node a process's one upstream stream of a role (``pubsub``, ``geyser``) is on, and when it moves.

A stream stays on its node while the pool keeps that node in service for the role (a sticky choice: a
node coming back does not pull streams back to it). It moves when its connection drops or hangs (the
stream's own rule, :mod:`gateway.node.pubsub`, :mod:`gateway.node.geyser`) or when the pool's owner takes
the node out of service (:meth:`StreamNodes.should_leave`). The next node is the first in service for the
role, those the stream just left asked last for ``avoid_s``. No node in service for the role is the one
state in which a stream gives its clients up (:meth:`StreamNodes.none_serve`).

:class:`OneStreamNode` is one fixed node (a test's node, a process without a pool): it never moves, and
it is never "none": its stream reconnects to it until it answers, as a single-node stream always did.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from gateway.core.upstreams import Role, UpstreamNode
from gateway.node.http import HttpUpstream
from gateway.node.pool import NodePool

#: How long a node a stream just left (dropped, hung, failed to connect) is tried after the others.
AVOID_S = 5.0


class StreamNodes(Protocol):
    """The nodes one upstream stream may be on."""

    async def start(self) -> None:
        """Know the pool (its first view) before the first :meth:`pick`."""
        ...

    def pick(self) -> UpstreamNode | None:
        """The node to (re)connect to now; None when no node serves the role."""
        ...

    def left(self, name: str) -> None:
        """The stream's connection to ``name`` dropped, hung or could not be made."""
        ...

    def should_leave(self, name: str) -> bool:
        """Whether the pool took ``name`` out of service for the role while another node serves it."""
        ...

    def none_serve(self) -> bool:
        """Whether no node is in service for the role (the stream's clients are then told so)."""
        ...

    def movable(self) -> bool:
        """Whether more than one node may serve the role (only then can the stream move)."""
        ...

    def client_of(self, name: str) -> HttpUpstream | None:
        """The JSON-RPC client of ``name``, for a stream's catch-up reads after a move (None: none)."""
        ...

    async def changed(self) -> None:
        """Return when the pool's view may have changed."""
        ...


class PoolStreamNodes:
    """A stream of ``role`` over the process's :class:`NodePool` (started by its owner)."""

    def __init__(self, pool: NodePool, role: Role, avoid_s: float = AVOID_S) -> None:
        self.pool = pool
        self.role = role
        self.avoid_s = avoid_s
        self._avoid: dict[str, float] = {}

    async def start(self) -> None:
        await self.pool.start()

    def pick(self) -> UpstreamNode | None:
        nodes = self.pool.stream_nodes(self.role)
        if not nodes:
            return None
        now = time.monotonic()
        fresh = [n for n in nodes if self._avoid.get(n.name, 0.0) <= now]
        if fresh:
            return fresh[0]
        return min(nodes, key=lambda n: self._avoid.get(n.name, 0.0))  # the one left longest ago

    def left(self, name: str) -> None:
        self._avoid[name] = time.monotonic() + self.avoid_s

    def should_leave(self, name: str) -> bool:
        names = [n.name for n in self.pool.stream_nodes(self.role)]
        return bool(names) and name not in names

    def none_serve(self) -> bool:
        return not self.pool.stream_nodes(self.role)

    def movable(self) -> bool:
        return self.pool.several(self.role)

    def client_of(self, name: str) -> HttpUpstream | None:
        return self.pool.client_of(name)

    async def changed(self) -> None:
        await self.pool.changed()


class OneStreamNode:
    """One fixed node: never left, never none (its stream reconnects to it until it answers)."""

    def __init__(self, node: UpstreamNode) -> None:
        self.node = node

    async def start(self) -> None:
        return None

    def pick(self) -> UpstreamNode | None:
        return self.node

    def left(self, name: str) -> None:
        return None

    def should_leave(self, name: str) -> bool:
        return False

    def none_serve(self) -> bool:
        return False

    def movable(self) -> bool:
        return False

    def client_of(self, name: str) -> HttpUpstream | None:
        return None

    async def changed(self) -> None:
        await asyncio.Event().wait()  # a fixed node's choice never changes
