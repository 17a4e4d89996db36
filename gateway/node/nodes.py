"""What the forwarder asks of the nodes (:class:`Nodes`): the pool of nodes, or one plain ``Upstream`` (a
node client, a test's scripted node) as one (:class:`OneNode`), which has nothing to choose."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from gateway.core.slots import SIZE, Floors
from gateway.core.upstreams import Role
from gateway.node.http import Upstream
from gateway.node.members import Answer
from gateway.node.pool import NodePool


class Nodes(Protocol):
    """What the forwarder asks of the nodes: a :class:`NodePool`, or one plain ``Upstream`` (:class:`OneNode`)."""

    floors: Floors
    one_node: bool

    def several(self, role: Role) -> bool: ...

    def together(self, roles: Collection[Role]) -> bool: ...

    def best_position(self, role: Role) -> list[int]: ...

    def learned(self, node: str, index: int, value: int) -> None: ...

    async def read(
        self,
        body: bytes,
        timeout_s: float,
        role: Role = Role.READS,
        *,
        key: str | None = None,
        need: list[int] | None = None,
        parse: bool = False,
        retry: bool = True,
        caller: str | None = None,
        heavy: bool = False,
    ) -> Answer: ...

    async def send(self, body: bytes, timeout_s: float) -> Answer: ...


class OneNode:
    """One plain ``Upstream`` (a node client, a test's scripted node) as :class:`Nodes`: nothing to choose."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.floors = Floors(0)
        self.one_node = True

    def several(self, role: Role) -> bool:
        return False

    def together(self, roles: Collection[Role]) -> bool:
        return True

    def best_position(self, role: Role) -> list[int]:
        return [0] * SIZE

    def learned(self, node: str, index: int, value: int) -> None:
        return None

    async def read(
        self,
        body: bytes,
        timeout_s: float,
        role: Role = Role.READS,
        *,
        key: str | None = None,
        need: list[int] | None = None,
        parse: bool = False,
        retry: bool = True,
        caller: str | None = None,
        heavy: bool = False,
    ) -> Answer:
        return Answer(await self.upstream.post(body, timeout_s, replayable=retry), None)

    async def send(self, body: bytes, timeout_s: float) -> Answer:
        return Answer(await self.upstream.post(body, timeout_s), None)


def nodes_of(upstream: Upstream | NodePool) -> Nodes:
    return upstream if isinstance(upstream, NodePool) else OneNode(upstream)
