"""Serve autoscaling of the ingress replicas under paid load, through the whole stack (``gateway up``
with ``ingress_autoscaling``, HAProxy or the replicas on the port themselves (``ingress_mode``
``reuseport``), the account shards, PostgreSQL): replicas are added under load and removed after it,
and the money and the limits come out exact.

One customer with a known balance and a known rate (20/s, burst 20) calls ``getSlot`` over HTTP from
24 connections at once, far past its rate, until Serve has started more replicas and at least two of
them have admitted its calls (two replicas' credit leases in the ledger's tables). The load stops;
three WebSockets are opened (spread over the replicas by HAProxy) and each makes one paid call; Serve
then scales in to one replica, each removed one draining. Then:

- every HTTP answer is 200 (with a result), 429 (its rate) or 503 (a shard too slow to answer on a
  busy machine, refused uncharged); nothing failed in the drain, and ``/health``, probed all along,
  always answered 200;
- the ledger's consumption of the account equals the price times the calls answered with a result, the
  conservation audit is clean (``gateway audit``), and no credit lease is left unreleased: the drained
  replicas settled their usage and released their leases (the expiry sweep is off here, so only a
  release could have ended them);
- the client saw at most ``burst + rps × W`` calls admitted within any window of W seconds (a call
  counts in a window when both its send and its answer fall inside it, so this never over-counts);
- every WebSocket that closed, closed 1012 (the replica under it stopped), and at least one did;
- no removed replica waited for Serve to kill it (``drain_s`` + ``STOP_GRACE_S`` after its stop): the
  scale-in ended sooner than that after the sockets opened, and by then at most one replica (the one
  left) held a lease of the account.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import asyncpg
import orjson
import pytest
from solders.keypair import Keypair
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from gateway.runtime.cluster import STOP_GRACE_S
from gateway.runtime.serve_runtime import processes_naming
from gateway.storage.ledger.audit import check_conservation
from tests.integration.service import (
    INGRESS_REPLICA,
    RunningService,
    confirm_deposit,
    create_api_key,
    deposit_usdc,
    fetch,
    service_env,
    start_service,
    stop_service,
)

pytestmark = pytest.mark.integration

GATEWAY = Path(sys.executable).with_name("gateway")
RPS = 20  # the account's rate; its burst is the same (docs/architecture.md, Where state lives)
WORKERS = 24
AUTOSCALING = {
    "min_replicas": 1,
    "max_replicas": 3,
    "target_ongoing_requests": 4,  # 24 calls in flight ask for 6 replicas; the 3 sockets alone for 1
    "upscale_delay_s": 1,
    "downscale_delay_s": 4,
    "look_back_period_s": 2,
    "metrics_interval_s": 0.5,
}
BODY = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
SOCKETS = 3
DRAIN_S = 1.0
LEASE_HOLDERS = "SELECT count(DISTINCT replica_id) FROM credit_leases WHERE pubkey = $1"
UNRELEASED = "SELECT count(*) FROM credit_leases WHERE pubkey = $1 AND NOT released"
UNRELEASED_HOLDERS = "SELECT count(DISTINCT replica_id) FROM credit_leases WHERE pubkey = $1 AND NOT released"
CONSUMED = (
    "SELECT COALESCE(-sum(amount), 0)::bigint FROM ledger_entries WHERE pubkey = $1 AND type IN ('debit', 'refund')"
)


@dataclass
class Calls:
    """What the client saw: per call its send and answer times and status; whether 200s held a result."""

    sent: list[float] = field(default_factory=list)
    answered: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    results: int = 0

    def admitted(self) -> list[tuple[float, float]]:
        return sorted((s, a) for s, a, code in zip(self.sent, self.answered, self.statuses, strict=True) if code == 200)


@pytest.fixture(scope="module", params=["haproxy", "reuseport"])
def scaled(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[RunningService]:
    home = tmp_path_factory.mktemp("autoscaled")
    env = service_env(
        home,
        GATEWAY_INGRESS_MODE=request.param,
        GATEWAY_INGRESS_AUTOSCALING=json.dumps(AUTOSCALING),
        GATEWAY_RATE_LIMIT_RPS=str(RPS),
        GATEWAY_DRAIN_S=str(DRAIN_S),
        GATEWAY_CREDIT_EXPIRY_CHECK_S="0",  # no sweep: a lease ends released only if its replica released it
        GATEWAY_GRPC_SERVERS="0",
        GATEWAY_SEND_RACERS="0",
        GATEWAY_WEBHOOK_DISPATCHERS="0",
    )
    running = start_service(home, env)
    yield running
    if running.process.poll() is None:
        stop_service(running)


def replicas(service: RunningService) -> int:
    return len(processes_naming(INGRESS_REPLICA, among=service.descendants()))


def most_in_window(admitted: list[tuple[float, float]], window: float) -> int:
    """The most calls (sorted by send time) whose send and answer both fall inside one window of
    ``window`` seconds; the windows starting at a send are the ones that matter."""
    most = 0
    for i, (start, _) in enumerate(admitted):
        inside = 0
        for sent, answered in admitted[i:]:
            if sent > start + window:
                break
            inside += answered <= start + window
        most = max(most, inside)
    return most


async def hammer(url: str, key: str, calls: Calls, stop: asyncio.Event) -> None:
    """WORKERS connections, each calling as fast as it is answered, until ``stop``."""
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=WORKERS)) as http:

        async def worker() -> None:
            while not stop.is_set():
                sent = loop.time()
                try:
                    async with http.post(url, data=BODY, headers={"X-Api-Key": key}) as resp:
                        body = await resp.read()
                        status = resp.status
                except aiohttp.ClientError:
                    status, body = 0, b""
                calls.sent.append(sent)
                calls.answered.append(loop.time())
                calls.statuses.append(status)
                if status == 200 and "result" in orjson.loads(body):
                    calls.results += 1

        await asyncio.gather(*(worker() for _ in range(WORKERS)))


async def probe_health(url: str, seen: list[int], stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as http:
        while not stop.is_set():
            try:
                async with http.get(f"{url}/health") as resp:
                    seen.append(resp.status)
                    if resp.status != 200:  # whose answer it was (the replica's document or the edge's error)
                        print(f"/health {resp.status} at {time.monotonic():.2f}: {(await resp.read())[:300]!r}")
            except aiohttp.ClientError:
                seen.append(0)
            await asyncio.sleep(0.25)


async def open_socket(url: str, key: str) -> ClientConnection:
    """A WebSocket with one paid call answered on it (so its session is up on some replica)."""
    ws = await connect(url, subprotocols=[f"auth.{key}", "solana-rpc"])  # type: ignore[list-item]
    for _ in range(10):  # the load just spent the account's burst: refused (free) until it refills
        await ws.send(BODY)
        answer = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
        if "result" in answer:
            return ws
        assert answer["error"]["code"] == -32005, answer
        await asyncio.sleep(0.2)
    raise AssertionError(f"no call answered on the socket: {answer}")


async def closed_code(ws: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed):
        while True:
            await ws.recv()
    return ws.close_code


async def test_replicas_scale_out_and_in_under_paid_load_and_nothing_is_lost(scaled: RunningService) -> None:
    wallet = Keypair()
    key = await asyncio.to_thread(create_api_key, scaled.url, wallet)
    signature = await asyncio.to_thread(deposit_usdc, scaled, wallet, 1_000_000)
    await asyncio.to_thread(confirm_deposit, scaled, signature, {"X-Api-Key": key})
    _, pricing, _ = await asyncio.to_thread(fetch, f"{scaled.url}/pricing", None, {})
    price = next(c["credits"] for c in pricing["classes"].values() if "getSlot" in c["methods"])
    pubkey = str(wallet.pubkey())
    db = await asyncpg.connect(f"postgresql://postgres:@/gateway?host={scaled.home / 'postgres'}")
    try:
        assert replicas(scaled) == 1
        calls, health, stop_load, stop_probe = Calls(), [], asyncio.Event(), asyncio.Event()
        prober = asyncio.create_task(probe_health(scaled.url, health, stop_probe))
        load = asyncio.create_task(hammer(f"{scaled.url}/", key, calls, stop_load))
        started, peak = time.monotonic(), 1
        while await db.fetchval(LEASE_HOLDERS, pubkey) < 2 or peak < AUTOSCALING["max_replicas"]:
            assert time.monotonic() - started < 90, f"Serve did not scale out: {peak} replicas"
            await asyncio.sleep(0.5)
            peak = max(peak, replicas(scaled))
        await asyncio.sleep(2)  # the new replicas serve a while
        stop_load.set()
        await load
        loaded_s = time.monotonic() - started

        ws_url = scaled.url.replace("http://", "ws://") + "/ws"
        sockets = [await open_socket(ws_url, key) for _ in range(SOCKETS)]
        closes = [asyncio.create_task(closed_code(ws)) for ws in sockets]
        scaled_in = time.monotonic()
        while replicas(scaled) > AUTOSCALING["min_replicas"]:
            assert time.monotonic() - scaled_in < 60, f"Serve did not scale in: {replicas(scaled)} replicas"
            await asyncio.sleep(0.25)
        scaled_in_s = time.monotonic() - scaled_in
        holding = await db.fetchval(UNRELEASED_HOLDERS, pubkey)  # the drained replicas released theirs
        settled = time.monotonic()
        while await db.fetchval(UNRELEASED, pubkey) > 0:  # the survivor lets its lease go once idle (5 s)
            assert time.monotonic() - settled < 20, "a credit lease was never released"
            await asyncio.sleep(0.25)
        stop_probe.set()
        await prober

        drained = [task.result() for task in closes if task.done()]
        for ws in sockets:
            await ws.close()
        for task in closes:
            if not task.done():
                task.cancel()
        await asyncio.gather(*closes, return_exceptions=True)

        holders = await db.fetchval(LEASE_HOLDERS, pubkey)
        consumed = await db.fetchval(CONSUMED, pubkey)
        report = await check_conservation(db, pubkey)
    finally:
        await db.close()

    counts = {code: calls.statuses.count(code) for code in sorted(set(calls.statuses))}
    admitted = calls.admitted()
    windows = {w: most_in_window(admitted, w) for w in (1.0, 2.0, 5.0)}
    print(
        f"\nautoscaling: peak {peak} replicas, {holders} held leases; load {loaded_s:.1f} s, {len(calls.statuses)} "
        f"calls {counts}; scaled in within {scaled_in_s:.1f} s ({holding} holding a lease then); "
        f"sockets closed {drained} of {SOCKETS}; consumed {consumed} = ({calls.results} + {SOCKETS} calls) x "
        f"{price}; admitted per window {windows}; /health {len(health)} probes"
    )
    # Serve kills a stopping replica drain_s + STOP_GRACE_S after telling it to stop: none needed it (the
    # stop came after the sockets opened), and at most the survivor held a lease then.
    assert scaled_in_s < DRAIN_S + STOP_GRACE_S and holding <= 1, (scaled_in_s, holding)
    assert set(counts) <= {200, 429, 503}, counts  # nothing lost in the drain (0: connection lost; 502: HAProxy's)
    assert calls.results == counts.get(200, 0) and counts.get(429, 0) > 0  # past the rate: the limit was tested
    assert set(health) == {200}, health
    assert consumed == (calls.results + SOCKETS) * price, (consumed, calls.results, price)
    assert report.ok, report
    for window, most in windows.items():
        assert most <= RPS + RPS * window, (window, most)
    assert set(drained) <= {1012}, drained
    if scaled.env["GATEWAY_INGRESS_MODE"] == "haproxy":  # HAProxy spread them: one was on a removed replica
        assert drained, drained
    # reuseport: the kernel chose each socket's replica, all three may be on the one left; a socket closed
    # 1012 by its draining replica is tests/runtime/test_shared_port.py's

    audit = await asyncio.to_thread(
        subprocess.run,
        [str(GATEWAY), "audit", "--json"],
        env=scaled.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
