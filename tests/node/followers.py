"""Nodes of one chain for the pool's tests: devnode followers of a leader, each a real process
(``python -m devnode --follow``) that a test kills (SIGKILL), hangs (SIGSTOP) and restarts on the same
ports, as an operator's nodes die, hang and come back."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from gateway.core.upstreams import Tier, UpstreamNode
from gateway.runtime.devnode_proc import DevnodeProcess


class Followers:
    def __init__(self, leader_url: str, home: Path) -> None:
        self.leader_url = leader_url
        self.home = home
        self.nodes: dict[str, DevnodeProcess] = {}

    async def start(self, name: str, lag_slots: int = 0, leader: str | None = None) -> DevnodeProcess:
        """A follower named ``name`` (again on its ports, when it ran before)."""
        node = self.nodes.get(name)
        if node is None:
            node = DevnodeProcess(
                self.home / name, 0, 0, 100, 54_000, False, grpc_port=0, follow=leader or self.leader_url,
                lag_slots=lag_slots,
            )  # fmt: skip
            self.nodes[name] = node
        await asyncio.to_thread(node.start, 60.0)
        return node

    async def start_all(self, names: Iterable[str]) -> list[DevnodeProcess]:
        return list(await asyncio.gather(*(self.start(n) for n in names)))

    def kill(self, name: str) -> None:
        self.nodes[name].signal(signal.SIGKILL)

    def hang(self, name: str) -> None:
        self.nodes[name].signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        if self.nodes[name].pid is not None:
            self.nodes[name].signal(signal.SIGCONT)

    def entry(self, name: str, tier: Tier = Tier.PRIMARY) -> UpstreamNode:
        node = self.nodes[name]
        return UpstreamNode(name=name, rpc_url=node.rpc_url, ws_url=node.ws_url, grpc_url=node.grpc_url, tier=tier)

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()


@asynccontextmanager
async def followers(leader_url: str, home: Path) -> AsyncIterator[Followers]:
    nodes = Followers(leader_url, home)
    try:
        yield nodes
    finally:
        await asyncio.to_thread(nodes.stop)
