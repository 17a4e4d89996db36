"""Helpers of the devnode tests: a node (or a follower of one) on free ports, waiting for conditions and
landings, raw JSON-RPC calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.signature import Signature

from devnode.config import DevnodeConfig
from devnode.node import Devnode

SLOT_MS = 100


async def start_node(data_dir: Path, **overrides: int) -> Devnode:
    node = Devnode(DevnodeConfig(data_dir=data_dir, rpc_port=0, ws_port=0, slot_ms=SLOT_MS, **overrides))  # type: ignore[arg-type]
    await node.start()
    return node


async def start_follower(data_dir: Path, leader: Devnode, **overrides: Any) -> Devnode:
    """A follower of `leader` (devnode/replication/) on free ports, synced when this returns."""
    config = DevnodeConfig(
        data_dir=data_dir, rpc_port=0, ws_port=0, slot_ms=SLOT_MS, follow=leader.rpc_url, **overrides
    )
    node = Devnode(config)
    await node.start()
    return node


async def rpc(url: str, method: str, *params: Any) -> Any:
    """One JSON-RPC call; the whole answer (result or error)."""
    return await rpc_payload(url, {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)})


async def rpc_payload(url: str, payload: Any) -> Any:
    async with aiohttp.ClientSession() as session, session.post(url, json=payload) as resp:
        assert resp.status == 200
        return await resp.json()


async def wait_for(predicate: Callable[[], Awaitable[bool]], within_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def wait_landed(client: AsyncClient, sig: Signature, status: str = "processed") -> None:
    rank = ["processed", "confirmed", "finalized"].index(status)

    async def landed() -> bool:
        value = (await client.get_signature_statuses([sig])).value[0]
        return value is not None and value.confirmation_status is not None and int(value.confirmation_status) >= rank

    await wait_for(landed)


def read_keypair(path: Path) -> Keypair:
    return Keypair.from_bytes(bytes(json.loads(path.read_text())))
