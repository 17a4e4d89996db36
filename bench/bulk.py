"""What ``/bulk/getBalances`` of 100 addresses does: requests and credits per second, and how many
node requests each one costs.

    python -m bench.bulk [--duration 8] [--connections 8] [--addresses 100]

A gateway on the devnode in this process (``bench/inprocess.py``, no Ray). The addresses are half
funded accounts, half addresses that do not exist (both are answered, and charged, 1 credit each).
Node requests are counted at the gateway's own upstream client, by method.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter

import aiohttp
import orjson
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from bench.inprocess import Stores, gateway_on_devnode, run_with_stores


def count_node_requests(upstream: object, counts: Counter[str]) -> None:
    """Wrap the gateway's ``post`` to the node so each request is counted by its first method."""
    post = upstream.post  # type: ignore[attr-defined]

    async def counted(body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        doc = orjson.loads(body)
        first = doc[0] if isinstance(doc, list) and doc else doc
        counts[first.get("method", "?") if isinstance(first, dict) else "?"] += 1
        return await post(body, timeout_s, replayable=replayable)  # type: ignore[no-any-return]

    upstream.post = counted  # type: ignore[attr-defined]


async def run(duration_s: float, connections: int, size: int, stores: Stores) -> None:
    async with gateway_on_devnode(stores, 400) as running:
        funded = [Keypair().pubkey() for _ in range(size // 2)]
        async with AsyncClient(running.node.rpc_url) as node:
            for pubkey in funded:
                await node.request_airdrop(pubkey, 10**9)
        await asyncio.sleep(1.2)
        addresses = [str(p) for p in funded] + [str(Keypair().pubkey()) for _ in range(size - len(funded))]
        body = orjson.dumps({"addresses": addresses})
        headers = {"X-Api-Key": running.api_key, "Content-Type": "application/json"}
        counts: Counter[str] = Counter()
        count_node_requests(running.app.upstream, counts)
        done = errors = 0
        deadline = time.monotonic() + duration_s

        async def client(http: aiohttp.ClientSession) -> None:
            nonlocal done, errors
            while time.monotonic() < deadline:
                async with http.post(f"{running.url}/bulk/getBalances", data=body, headers=headers) as resp:
                    answer = await resp.json()
                ok = resp.status == 200 and len(answer.get("results", [])) == size
                done, errors = done + ok, errors + (not ok)

        started = time.monotonic()
        async with aiohttp.ClientSession() as http:
            await asyncio.gather(*(client(http) for _ in range(connections)))
        elapsed = time.monotonic() - started
    per_request = counts["getMultipleAccounts"] / max(1, done + errors)
    print(f"/bulk/getBalances of {size} addresses, {connections} connections, {elapsed:.1f} s")
    print(f"  {done / elapsed:,.1f} requests/s, {done * size / elapsed:,.0f} credits/s ({errors} failed)")
    print(f"  node requests per bulk request: {per_request:.2f} getMultipleAccounts; all node requests: {dict(counts)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bulk", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--addresses", type=int, default=100)
    args = parser.parse_args(argv)
    run_with_stores("gw-bulk-", lambda stores: run(args.duration, args.connections, args.addresses, stores))


if __name__ == "__main__":
    main()
