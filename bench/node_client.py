"""CPU per call of the node client (``HttpUpstream.post``) against the constant upstream, in one process.

    python -m bench.node_client [--calls 20000] [--rounds 5] [--inflight 64] [--batch 0]
                                [--client wire|pool|aiohttp|httpcore|pyreqwest]

Every call a replica forwards is one ``post``; this measures that part alone, on uvloop as in a
replica, against ``bench.const_upstream`` in a child process. ``--batch N`` posts an N-item batch of
``getSlot`` instead of one call. Prints each round's µs of this process's CPU per call and calls per
second, then the medians. To compare two commits, run it from each checkout in turn (alternated).

``--client pool`` measures the pool of one node over ``wire``, as a replica's reads go (what the pool adds).
``--client`` measures a maintained client in ``wire``'s place, each used as a replica would use it
(one pool of up to 512 kept-alive connections, the size bound read as the answer comes, a timeout a
call): ``aiohttp`` tuned as the gateway ran it before ``wire`` (f617218), ``httpcore`` (httpx's
transport), ``pyreqwest`` (Rust's reqwest). They are not dependencies of the gateway: install the one
to measure into the venv first.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any, Protocol

import orjson
import uvloop

from bench._proc import spawn_server
from gateway.node.http import DEFAULT_MAX_ANSWER_BYTES, HttpUpstream
from gateway.runtime.ports import free_port

CONNECTIONS = 512


class Client(Protocol):
    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes: ...

    async def close(self) -> None: ...


class AiohttpClient:
    """aiohttp as ``HttpUpstream`` used it at f617218: one session, answers read by ``readany``."""

    def __init__(self, url: str) -> None:
        import aiohttp

        self.url, self.aiohttp = url, aiohttp
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONNECTIONS, ttl_dns_cache=300),
            headers={"Content-Type": "application/json"},
            skip_auto_headers=("User-Agent",),
        )
        self.timeouts: dict[float, Any] = {}

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        timeout = self.timeouts.get(timeout_s) or self.timeouts.setdefault(
            timeout_s, self.aiohttp.ClientTimeout(total=timeout_s)
        )
        async with self.session.post(self.url, data=body, timeout=timeout) as resp:
            chunks, size, read = [], 0, resp.content.readany
            while chunk := await read():
                size += len(chunk)
                if size > DEFAULT_MAX_ANSWER_BYTES:
                    raise ValueError("too large")
                chunks.append(chunk)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def close(self) -> None:
        await self.session.close()


class HttpcoreClient:
    """httpcore's asyncio pool, the answer streamed to check its size."""

    def __init__(self, url: str) -> None:
        httpcore = importlib.import_module("httpcore")  # not a dependency: Any to the type checker
        self.url = url.encode()
        self.pool = httpcore.AsyncConnectionPool(max_connections=CONNECTIONS, keepalive_expiry=15.0)
        self.headers = [(b"Content-Type", b"application/json")]

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        timeout = {"timeout": {"connect": timeout_s, "read": timeout_s, "write": timeout_s, "pool": timeout_s}}
        async with asyncio.timeout(timeout_s):
            async with self.pool.stream("POST", self.url, headers=self.headers, content=body, extensions=timeout) as r:
                chunks, size = [], 0
                async for chunk in r.aiter_stream():
                    size += len(chunk)
                    if size > DEFAULT_MAX_ANSWER_BYTES:
                        raise ValueError("too large")
                    chunks.append(chunk)
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def close(self) -> None:
        await self.pool.aclose()


class PyreqwestClient:
    """pyreqwest (reqwest and hyper in Rust, its own Tokio runtime), HTTP/1.1 only, the whole answer read."""

    def __init__(self, url: str) -> None:
        builder = importlib.import_module("pyreqwest.client").ClientBuilder  # not a dependency
        self.url = url
        self.client = builder().http1_only().max_connections(CONNECTIONS).build()

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        request = (
            self.client.post(self.url)
            .header("Content-Type", "application/json")
            .body_bytes(body)
            .timeout(datetime.timedelta(seconds=timeout_s))
            .build()
        )
        resp = await request.send()
        return bytes(await resp.bytes())

    async def close(self) -> None:
        await self.client.close()


class PoolClient:
    """The pool of one node as a replica reads through it (:meth:`gateway.node.pool.NodePool.read`: the
    node's tally, its metrics, the loop-lag timer while calls are in flight), over ``wire``."""

    def __init__(self, url: str) -> None:
        from gateway.core.upstreams import UpstreamNode
        from gateway.node.pool import NodePool

        self.pool = NodePool([UpstreamNode(name="bench", rpc_url=url)])

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        return (await self.pool.read(body, timeout_s, key="getSlot", caller="bench")).raw

    async def close(self) -> None:
        await self.pool.close()


CLIENTS: dict[str, Callable[[str], Client]] = {
    "wire": HttpUpstream,
    "pool": PoolClient,
    "aiohttp": AiohttpClient,
    "httpcore": HttpcoreClient,
    "pyreqwest": PyreqwestClient,
}


async def one_round(node: Client, body: bytes, calls: int, inflight: int) -> tuple[float, float]:
    """(µs of CPU a call, calls a second) of ``calls`` posts, ``inflight`` at a time."""
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await node.post(body, 15.0)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / calls * 1e6, calls / wall


async def run(calls: int, rounds: int, inflight: int, batch: int, client: str) -> None:
    port = free_port()
    async with spawn_server("upstream", "bench.const_upstream", ["--port", str(port)], port) as upstream:
        node = CLIENTS[client](upstream.url)
        one = {"jsonrpc": "2.0", "id": 1, "method": "getSlot"}
        body = orjson.dumps([{**one, "id": i} for i in range(batch)] if batch else one)
        assert b"123456" in await node.post(body, 15.0)
        await one_round(node, body, min(calls, 2_000), inflight)  # connections opened, code warm
        cpus, rates = [], []
        for n in range(rounds):
            cpu, rate = await one_round(node, body, calls, inflight)
            cpus.append(cpu)
            rates.append(rate)
            print(f"round {n + 1}: {cpu:7.1f} µs CPU a call  {rate:9,.0f} calls/s")
        await node.close()
    what = f"{batch}-item batch" if batch else "getSlot"
    print(
        f"{client}: median of {rounds} rounds, {what}, {inflight} in flight: {statistics.median(cpus):.1f} µs CPU "
        f"a call, {statistics.median(rates):,.0f} calls/s"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--batch", type=int, default=0, help="items of a batch body (0: one call)")
    parser.add_argument("--client", choices=sorted(CLIENTS), default="wire", help="the client measured")
    args = parser.parse_args(argv)
    uvloop.run(run(args.calls, args.rounds, args.inflight, args.batch, args.client))


if __name__ == "__main__":
    main()
