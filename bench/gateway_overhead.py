"""Gateway overhead: the const upstream alone, a plain forwarder, and the gateway, in one run.

Programmatic use (the gateway's own start-up is the caller's business)::

    async with reference_servers() as refs:            # const upstream + forwarder subprocesses
        ...start the gateway with refs.upstream_url as its upstream...
        rows = await measure({"upstream": refs.upstream_url,
                              "forwarder": refs.forwarder_url,
                              "gateway": "http://127.0.0.1:8000/"},
                             connections=(64, 1), duration_s=8.0,
                             cpu_pids={"upstream": [refs.upstream_pid],
                                       "forwarder": [refs.forwarder_pid]})
        print_report(rows, baseline="forwarder", pairs=OVERHEAD_PAIRS)

`python -m bench` wraps the same calls (see `bench/__main__.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import aiohttp

from bench._proc import LOOPBACK, process_cpu_s, require_loopback_url, spawn_server
from bench.forwarder import DEFAULT_CONNECTOR_LIMIT
from bench.loadgen import DEFAULT_BODY, DEFAULT_HEADERS, Headers, LoadResult, run_load
from bench.node_cpu import NodeCpu
from bench.report import Row, print_report
from gateway.runtime.ports import free_port

OVERHEAD_PAIRS: Final = (("gateway", "forwarder"), ("gateway", "upstream"), ("forwarder", "upstream"))


@dataclass(frozen=True)
class ReferenceServers:
    """The const upstream and the plain forwarder in front of it, each its own process."""

    upstream_url: str
    upstream_pid: int
    forwarder_url: str | None
    forwarder_pid: int | None


@contextlib.asynccontextmanager
async def reference_servers(
    *,
    upstream_port: int | None = None,
    forwarder_port: int | None = None,
    with_forwarder: bool = True,
    connector_limit: int = DEFAULT_CONNECTOR_LIMIT,
    host: str = LOOPBACK,
) -> AsyncIterator[ReferenceServers]:
    """Start `bench.const_upstream` (and `bench.forwarder` pointed at it) on loopback ports."""
    up_port = upstream_port or free_port()
    async with spawn_server(
        "const_upstream", "bench.const_upstream", ["--host", host, "--port", str(up_port)], up_port, host=host
    ) as upstream:
        if not with_forwarder:
            yield ReferenceServers(upstream.url, upstream.pid, None, None)
            return
        fw_port = forwarder_port or free_port()
        args = ["--host", host, "--port", str(fw_port), "--upstream", upstream.url]
        args += ["--connector-limit", str(connector_limit)]
        async with spawn_server("forwarder", "bench.forwarder", args, fw_port, host=host) as forwarder:
            yield ReferenceServers(upstream.url, upstream.pid, forwarder.url, forwarder.pid)


async def wait_until_ready(
    url: str,
    body: bytes = DEFAULT_BODY,
    headers: Headers = DEFAULT_HEADERS,
    timeout_s: float = 60.0,
) -> None:
    """POST `body` to `url` until it answers 2xx (one request at a time, at most ~20 a second)."""
    require_loopback_url(url)
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5.0)) as session:
        while time.monotonic() < deadline:
            request_headers = headers() if callable(headers) else headers
            try:
                async with session.post(url, data=body, headers=request_headers) as resp:
                    await resp.read()
                    if 200 <= resp.status < 300:
                        return
                    last = f"HTTP {resp.status}"
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                last = type(exc).__name__
            await asyncio.sleep(0.05)
    raise TimeoutError(f"{url} did not answer 2xx within {timeout_s:.0f} s (last: {last})")


async def measure(
    targets: Mapping[str, str],
    *,
    connections: Sequence[int] = (64, 1),
    duration_s: float = 8.0,
    warmup_s: float = 1.0,
    max_requests: int = 1_000_000,
    body: bytes = DEFAULT_BODY,
    headers: Headers = DEFAULT_HEADERS,
    backend: str = "auto",
    cpu_pids: Mapping[str, Sequence[int]] | None = None,
    pause_s: float = 0.5,
    log: Callable[[str], None] | None = print,
    node_cpu: bool = False,
    rate: float | None = None,
) -> list[Row]:
    """Load every target at every connection count, one after the other; rows in that order; with
    `rate`, each run paced to at most that many requests a second (`run_load`).

    Each measurement is a warm-up run (`warmup_s`, discarded) then the measured run. Where
    `cpu_pids[name]` is given, the CPU those processes used during the measured run, divided by
    the requests served, is stored in `LoadResult.server_cpu_ms_per_req`; with `node_cpu`, every
    process's on the machine, by role, in `LoadResult.node_cpu_us_per_req` (bench/node_cpu.py).
    """
    for url in targets.values():
        require_loopback_url(url)
    rows: list[Row] = []
    for conns in connections:
        for name, url in targets.items():
            if warmup_s > 0:
                await run_load(url, body, headers, conns, warmup_s, max_requests, 0.0, backend=backend, rate=rate)
            pids = list((cpu_pids or {}).get(name, ()))
            node = NodeCpu() if node_cpu else None
            if node is not None:
                node.start()
            cpu_before = process_cpu_s(pids)
            result: LoadResult = await run_load(
                url, body, headers, conns, duration_s, max_requests, 0.0, backend=backend, rate=rate
            )
            if pids and result.count:
                result.server_cpu_ms_per_req = (process_cpu_s(pids) - cpu_before) / result.count * 1e3
            if node is not None:
                result.node_cpu_us_per_req = node.per_request(result.count, exclude={os.getpid()})
            rows.append(Row(name, result))
            if log is not None:
                errors = f" errors={result.errors}" if result.errors else ""
                log(
                    f"  {name:<12} {conns:>3} conn: {result.rps:>9,.0f} req/s  p50 {result.p50_ms:.2f} ms"
                    f"  p99 {result.p99_ms:.2f} ms  n={result.count}{errors}"
                )
            await asyncio.sleep(pause_s)
    return rows


async def run_overhead(
    *,
    gateway_url: str | None = None,
    connections: Sequence[int] = (64, 1),
    duration_s: float = 8.0,
    warmup_s: float = 1.0,
    max_requests: int = 1_000_000,
    upstream_port: int | None = None,
    forwarder_port: int | None = None,
    body: bytes = DEFAULT_BODY,
    headers: Headers = DEFAULT_HEADERS,
    backend: str = "auto",
    wait_gateway_s: float = 120.0,
    json_path: str | None = None,
) -> list[Row]:
    """What `python -m bench` does: start the reference servers, measure, print the table."""
    if gateway_url is not None:
        require_loopback_url(gateway_url)
    async with reference_servers(upstream_port=upstream_port, forwarder_port=forwarder_port) as refs:
        assert refs.forwarder_url is not None and refs.forwarder_pid is not None
        print(f"const upstream: {refs.upstream_url} (pid {refs.upstream_pid})", flush=True)
        print(f"forwarder:      {refs.forwarder_url} (pid {refs.forwarder_pid})", flush=True)
        targets = {"upstream": refs.upstream_url, "forwarder": refs.forwarder_url}
        if gateway_url is not None:
            print(f"waiting up to {wait_gateway_s:.0f} s for the gateway at {gateway_url} ...", flush=True)
            await wait_until_ready(gateway_url, body, headers, wait_gateway_s)
            targets["gateway"] = gateway_url
        cpu_pids = {"upstream": [refs.upstream_pid], "forwarder": [refs.forwarder_pid]}
        print(f"measuring {list(targets)} at {list(connections)} connections, {duration_s:g} s each", flush=True)
        rows = await measure(
            targets,
            connections=connections,
            duration_s=duration_s,
            warmup_s=warmup_s,
            max_requests=max_requests,
            body=body,
            headers=headers,
            backend=backend,
            cpu_pids=cpu_pids,
        )
    print()
    print("server ms/req: CPU of that process only (the forwarder's excludes the upstream's).")
    print_report(rows, baseline="forwarder", pairs=OVERHEAD_PAIRS)
    if json_path is not None:
        write_json(rows, json_path)
    return rows


def write_json(rows: Sequence[Row], path: str) -> None:
    """The rows as a JSON list of objects (name plus every LoadResult field)."""
    with open(path, "w") as handle:
        json.dump([{"name": row.name, **row.result.to_dict()} for row in rows], handle, indent=2)
