"""The pool's nodes: three devnode followers of the session's devnode (tests/node/followers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from devnode.node import Devnode
from tests.node.followers import Followers, followers


@pytest.fixture(scope="session")
async def trio(devnode: Devnode, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Followers]:
    """Three followers a, b, c of the session's devnode, each a process of its own."""
    async with followers(devnode.rpc_url, tmp_path_factory.mktemp("followers")) as nodes:
        await nodes.start_all(["a", "b", "c"])
        yield nodes


@pytest.fixture
async def all_running(trio: Followers) -> AsyncIterator[Followers]:
    """``trio``, every one of the three running (restarted after a kill, resumed after a hang) after the test."""
    yield trio
    for name in ("a", "b", "c"):
        trio.resume(name)
        if trio.nodes[name].pid is None:
            await trio.start(name)
