"""A feed devnode of this package's own and the blocks it made: real pump.fun-shaped traffic to classify.

The feed (seed 7) makes its first graduation about 20 steps in; :func:`recorded_chain` reads blocks
until the chain holds each kind of transaction the signal rules distinguish, judged from the node's
own logs and keys (not by the code under test).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from devnode.node import Devnode
from gateway.signals.classifier import BLOCK_CONFIG
from pumpfun.ids import USDC_MINT
from tests.feed import feed_devnode


@dataclass
class Node:
    """JSON-RPC to a node over one session."""

    url: str
    http: aiohttp.ClientSession

    async def call(self, method: str, params: list[Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        async with self.http.post(self.url, json=body) as resp:
            doc = await resp.json()
        assert "result" in doc, doc
        return doc["result"]

    async def blocks(self, start: int, end: int) -> dict[int, dict[str, Any]]:
        """Every block from ``start`` to ``end`` (as the classifier reads them)."""
        slots = await self.call("getBlocks", [start, end, {"commitment": "confirmed"}])
        return {slot: await self.call("getBlock", [slot, BLOCK_CONFIG]) for slot in slots}

    async def account(self, address: str) -> dict[str, Any]:
        answer = await self.call("getAccountInfo", [address, {"encoding": "base64", "commitment": "confirmed"}])
        assert answer["value"] is not None, f"{address} does not exist"
        return dict(answer["value"])


async def clear_default_log(redis: aioredis.Redis) -> None:
    """Empty the default signal log (``signals:*``), which the gateway and the actor use."""
    keys = [key async for key in redis.scan_iter(match="signals:*")]
    if keys:
        await redis.delete(*keys)


@pytest.fixture
async def prefix(redis_client: aioredis.Redis) -> AsyncIterator[str]:
    """Keys of a signal log of the test's own (the session's Redis is shared), removed after it."""
    name = f"test-signals-{uuid.uuid4().hex[:8]}"
    yield name
    keys = [key async for key in redis_client.scan_iter(match=f"{name}:*")]
    if keys:
        await redis_client.delete(*keys)


@dataclass
class Recorded:
    devnode: Devnode
    node: Node
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)

    def transactions(self) -> list[tuple[int, dict[str, Any]]]:
        return [(slot, tx) for slot, block in sorted(self.blocks.items()) for tx in block["transactions"]]


def _has(recorded: Recorded, instruction: str, usdc: bool | None = None) -> bool:
    """A transaction of the pump ``instruction`` (with or without USDC among its keys, if ``usdc`` says)."""
    for _, tx in recorded.transactions():
        keys = tx["transaction"]["message"]["accountKeys"]
        logged = f"Program log: Instruction: {instruction}" in tx["meta"]["logMessages"]
        if logged and (usdc is None or (str(USDC_MINT) in keys) == usdc):
            return True
    return False


def complete_enough(recorded: Recorded) -> bool:
    """A classic create, a v2 create quoted in SOL and one in USDC, trades, a graduation."""
    return (
        _has(recorded, "Create")
        and _has(recorded, "CreateV2", usdc=False)
        and _has(recorded, "CreateV2", usdc=True)
        and _has(recorded, "Buy")
        and _has(recorded, "Sell")
        and _has(recorded, "Migrate")
    )


@pytest.fixture(scope="package")
async def recorded_chain(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Recorded]:
    data_dir: Path = tmp_path_factory.mktemp("signals-feed")
    async with feed_devnode(data_dir) as devnode, aiohttp.ClientSession() as http:
        recorded = Recorded(devnode, Node(devnode.rpc_url, http))
        deadline = asyncio.get_running_loop().time() + 90
        last = -1
        while not complete_enough(recorded):
            assert asyncio.get_running_loop().time() < deadline, "the feed did not make every kind of transaction"
            await asyncio.sleep(0.5)
            tip = await recorded.node.call("getSlot", [{"commitment": "confirmed"}])
            recorded.blocks.update(await recorded.node.blocks(last + 1, tip))
            last = max(recorded.blocks, default=last)
        yield recorded
