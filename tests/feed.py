"""A devnode with its launch feed on (the session devnode runs without it), and the pump.fun trades it
made: for tests that read real pump.fun-shaped transactions off a chain."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from devnode.config import DevnodeConfig
from devnode.node import Devnode
from pumpfun.ids import PUMP_PROGRAM_ID

TX_CONFIG = {"encoding": "jsonParsed", "maxSupportedTransactionVersion": 0, "commitment": "confirmed"}


@asynccontextmanager
async def feed_devnode(data_dir: Path) -> AsyncIterator[Devnode]:
    """A devnode of its own, fast slots, the feed trading every 100 ms."""
    node = Devnode(
        DevnodeConfig(data_dir=data_dir, rpc_port=0, ws_port=0, slot_ms=100, feed=True, feed_interval_ms=100)
    )
    await node.start()
    try:
        yield node
    finally:
        await node.stop()


async def node_rpc(url: str, method: str, params: list[Any]) -> Any:
    async with aiohttp.ClientSession() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        async with http.post(url, json=body) as resp:
            doc = await resp.json()
    assert "result" in doc, doc
    return doc["result"]


@dataclass
class Trade:
    kind: str  # "Buy" or "Sell", as the pump program logs it
    signature: str
    trader: str  # the fee payer, who trades
    transaction: dict[str, Any]  # the node's getTransaction answer (jsonParsed)


async def pump_trades(url: str, timeout_s: float = 60.0) -> dict[str, Trade]:
    """The first successful buy and sell the feed made (by the pump program's own log lines)."""
    found: dict[str, Trade] = {}
    deadline = asyncio.get_running_loop().time() + timeout_s
    seen: set[str] = set()
    while len(found) < 2:
        assert asyncio.get_running_loop().time() < deadline, f"the feed made no buy and sell: {sorted(found)}"
        listed = await node_rpc(url, "getSignaturesForAddress", [str(PUMP_PROGRAM_ID), {"commitment": "confirmed"}])
        for entry in listed:
            sig = entry["signature"]
            if sig in seen or entry["err"] is not None:
                continue
            seen.add(sig)
            tx = await node_rpc(url, "getTransaction", [sig, TX_CONFIG])
            logs = tx["meta"]["logMessages"]
            for kind in ("Buy", "Sell"):
                if kind not in found and f"Program log: Instruction: {kind}" in logs and not _creates(logs):
                    trader = tx["transaction"]["message"]["accountKeys"][0]["pubkey"]
                    found[kind] = Trade(kind, sig, trader, tx)
        await asyncio.sleep(0.3)
    return found


def _creates(logs: list[str]) -> bool:
    """A create that also buys (the creator's first buy) is a create, not a plain buy."""
    return any(line.startswith("Program log: Instruction: Create") for line in logs)
