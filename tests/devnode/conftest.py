"""Fixtures: a devnode on free ports with a temporary data dir and a fast (100 ms) slot clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from devnode.node import Devnode
from tests.devnode.helpers import start_node, wait_landed


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Devnode]:
    n = await start_node(tmp_path / "devnode")
    try:
        yield n
    finally:
        await n.stop()


@pytest.fixture
async def client(node: Devnode) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(node.rpc_url, http2=False) as c:
        yield c


@pytest.fixture
async def funded(client: AsyncClient) -> Keypair:
    kp = Keypair()
    sig = (await client.request_airdrop(kp.pubkey(), 10 * 10**9)).value
    await wait_landed(client, sig, "confirmed")  # later transactions land in a later slot
    return kp
