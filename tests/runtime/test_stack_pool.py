"""``gateway up`` with a configured pool reads every node's genesis hash before it starts anything of Ray:
a node of another cluster is refused, named (gateway/runtime/stack.py). The pool is the session's devnode
and a devnode of its own (another genesis); the stores are the session's, so nothing embedded starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.core.upstreams import UpstreamNode
from gateway.runtime.stack import Stack
from tests.devnode.helpers import start_node
from tests.support import service_key_settings


async def test_a_node_of_another_cluster_stops_the_start_naming_it(
    tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode
) -> None:
    other = await start_node(tmp_path / "other-chain")
    try:
        settings = Settings(
            **service_key_settings(tmp_path),
            home=tmp_path / "home",
            database_url=database_url,
            redis_url=redis_url,
            upstreams=[
                UpstreamNode(name="ours", rpc_url=devnode.rpc_url),
                UpstreamNode(name="elsewhere", rpc_url=other.rpc_url),
            ],
        )
        reported: list[tuple[str, str]] = []
        stack = Stack(settings, report=lambda part, detail: reported.append((part, detail)))
        with pytest.raises(
            RuntimeError, match=r"refused: node elsewhere serves another cluster: genesis \w+, the pool's is"
        ):
            await asyncio.to_thread(stack.start)
        assert reported == []  # refused before anything started: keys, stores, Ray
        assert not (tmp_path / "home" / "keys").exists()
        assert other.rpc_url not in str(reported)
    finally:
        await other.stop()
