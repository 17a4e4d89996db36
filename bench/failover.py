"""What a failing node costs paying clients: paid reads through ``gateway up --nodes 3`` while the pool's
nodes fail one way after another, each fault done to a real follower process.

    python -m bench.failover [--rate 100] [--connections 8] [--phase-s 8]

The stack is started as ``gateway up --nodes 3`` starts it (embedded PostgreSQL and Redis, the devnode and
three followers of it as the pool, a local Ray, one replica behind HAProxy), under a temporary data dir
and on free ports; a key is funded with ``gateway fund``. Clients send ``getSlot`` and ``getBalance``
(1 credit each) at ``--rate`` calls a second in all over ``--connections`` kept-alive connections, each
connection waiting for its answer before its next call. The phases, in order:

1. ``steady``: every node up;
2. ``killed``: node-1 (the one serving) killed with SIGKILL, then ``after``;
3. ``hung``: node-2 (serving now) stopped with SIGSTOP, then resumed, then ``after``;
4. ``lagging``: a fourth follower 200 slots behind added with ``gateway upstreams add``;
5. ``none``: every node killed (no node in service), then ``after``: node-3 restarted on its ports.

Each row: calls, failed (any status but 200, or an error in the answer, or no answer), the statuses, read
p50/p99 (ms), the credits charged (the key's ``X-Credits-Remaining`` read before the phase's load and
after its last answer, no call in flight between) against the prices of the calls answered 200, and the
nodes that answered (``X-Upstream``). The fault is done half a second into its phase's load, so the calls
in flight at it are the phase's.

Two stream clients run through every phase beside the load: a ``/ws`` socket with one ``slotSubscribe`` and
a gRPC ``Subscribe`` stream of slots (its ``SLOT_PROCESSED`` statuses counted), on a key of their own (a
second wallet's, funded with ``gateway fund --wallet``: the load's key pays for the calls alone). Each
row also gives, for each, the longest time within the phase's load with no slot notification received
(ms; a slot is ``devnode_slot_ms``, 400 ms) and how the client's socket closed or its stream ended during
it, if it did; a client whose socket closed or stream ended opens a new one a second later, as a client
reconnecting with a backoff would.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc
import orjson
from solders.keypair import Keypair
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from bench._proc import repo_env
from gateway.runtime.devnode_proc import FOLLOWERS, PIDFILE, DevnodeProcess, recorded_followers
from gateway.runtime.ports import free_port
from geyser_proto import geyser_pb2 as pb
from geyser_proto import geyser_pb2_grpc
from geyser_proto.filters import PROCESSED

GATEWAY = Path(sys.executable).with_name("gateway")


@dataclass
class Phase:
    name: str
    statuses: Counter[int] = field(default_factory=Counter)
    failed: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    nodes: Counter[str] = field(default_factory=Counter)
    answered_credits: int = 0
    charged: int | None = None  # the key's balance before the phase less after it (the phase's calls alone)
    window: tuple[float, float] = (0.0, 0.0)  # the phase's load, from its start to its last answer (monotonic)
    ws_gap_ms: float = float("nan")  # the longest time in the window with no /ws slot notification
    grpc_gap_ms: float = float("nan")  # the same, the gRPC stream's SLOT_PROCESSED statuses
    ws_ends: str = ""  # how the /ws socket closed during the window ("1013 x1"), if it did
    grpc_ends: str = ""

    def row(self) -> str:
        calls = sum(self.statuses.values())
        ms = sorted(self.latencies_ms)
        p50 = statistics.median(ms) if ms else float("nan")
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))] if ms else float("nan")
        charged = "-" if self.charged is None else str(self.charged)
        statuses = ",".join(f"{s}:{n}" for s, n in sorted(self.statuses.items()))
        nodes = ",".join(f"{n}:{c}" for n, c in sorted(self.nodes.items()))
        ws = f"{self.ws_gap_ms:.0f}" + (f" ({self.ws_ends})" if self.ws_ends else "")
        grpc_gap = f"{self.grpc_gap_ms:.0f}" + (f" ({self.grpc_ends})" if self.grpc_ends else "")
        return (
            f"{self.name:<14} {calls:>6} {self.failed:>6}  {statuses:<22} {p50:7.1f} {p99:8.1f}  "
            f"{charged:>7} / {self.answered_credits:<7} {ws:<24} {grpc_gap:<28} {nodes}"
        )


class SlotClient:
    """One client of slot notifications that opens its socket or stream again a second after it closed or
    ended: when each notification came, and each close or end (when, how)."""

    def __init__(self) -> None:
        self.times: list[float] = []  # monotonic, in order
        self.ends: list[tuple[float, str]] = []
        self.served = asyncio.Event()  # a first notification came
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            how = await self._once()
            self.ends.append((time.monotonic(), how))
            await asyncio.sleep(1.0)

    async def _once(self) -> str:
        """One socket or stream, until it closes or ends; how it did."""
        raise NotImplementedError

    def seen(self) -> None:
        self.times.append(time.monotonic())
        self.served.set()

    def longest_gap_ms(self, window: tuple[float, float]) -> float:
        """The longest time within ``window`` with no notification received."""
        start, end = window
        inside = self.times[bisect.bisect_right(self.times, start) : bisect.bisect_left(self.times, end)]
        marks = [start, *inside, end]
        return max(b - a for a, b in itertools.pairwise(marks)) * 1000

    def ended(self, window: tuple[float, float]) -> str:
        """How it closed or ended within ``window``: each way with its count."""
        ways = Counter(how for at, how in self.ends if window[0] <= at < window[1])
        return ", ".join(f"{how} x{n}" for how, n in ways.items())

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class WsSlots(SlotClient):
    """A ``/ws`` socket (the key as the ``auth.<key>`` subprotocol) with one ``slotSubscribe``."""

    def __init__(self, url: str, key: str) -> None:
        self.url, self.key = url, key
        super().__init__()

    async def _once(self) -> str:
        subscribe = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "slotSubscribe", "params": []})
        try:
            async with connect(self.url, subprotocols=[f"auth.{self.key}", "solana-rpc"]) as ws:  # type: ignore[list-item]
                await ws.send(subscribe)
                async for raw in ws:
                    message = orjson.loads(raw)
                    if message.get("method") == "slotNotification":
                        self.seen()
                    elif message.get("id") == 1 and "error" in message:
                        return f"refused {message['error']['code']}"
        except ConnectionClosed as exc:
            return f"closed {exc.rcvd.code if exc.rcvd is not None else 'without a code'}"
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            return f"not opened ({type(exc).__name__})"
        return "closed 1000"


class GrpcSlots(SlotClient):
    """A gRPC ``Subscribe`` stream of slots (``x-token``: the key); its ``SLOT_PROCESSED`` statuses counted."""

    def __init__(self, target: str, key: str) -> None:
        self.channel = grpc.aio.insecure_channel(target)
        self.key = key
        super().__init__()

    async def _once(self) -> str:
        call = geyser_pb2_grpc.GeyserStub(self.channel).Subscribe(metadata=(("x-token", self.key),))
        try:
            await call.write(pb.SubscribeRequest(slots={"slots": pb.SubscribeRequestFilterSlots()}))
            async for update in call:
                if update.HasField("slot") and update.slot.status == PROCESSED:
                    self.seen()
        except grpc.aio.AioRpcError as exc:
            return f"ended {exc.code().name}"
        finally:
            call.cancel()
        return "ended OK"

    async def stop(self) -> None:
        await super().stop()
        await self.channel.close()


class Load:
    """Paid calls at a steady rate for one phase, recorded into it."""

    def __init__(self, phase: Phase, url: str, key: str, wallet: str, rate: float, connections: int) -> None:
        self.phase, self.url, self.key, self.wallet = phase, url, key, wallet
        self.interval = connections / rate
        self._stop = asyncio.Event()
        self._tasks = [asyncio.create_task(self._connection(i, connections)) for i in range(connections)]

    async def _connection(self, i: int, connections: int) -> None:
        headers = {"X-Api-Key": self.key, "Content-Type": "application/json"}
        timeout = aiohttp.ClientTimeout(total=60)
        phase = self.phase
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), timeout=timeout) as http:
            n = 0
            next_at = time.monotonic() + i * self.interval / connections
            while not self._stop.is_set():
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                next_at += self.interval
                n += 1
                method, params = ("getBalance", [self.wallet]) if n % 2 else ("getSlot", [])
                body = orjson.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
                started = time.perf_counter()
                try:
                    async with http.post(self.url, data=body, headers=headers) as resp:
                        doc = orjson.loads(await resp.read())
                        status, node = resp.status, resp.headers.get("X-Upstream")
                except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
                    phase.statuses[0] += 1
                    phase.failed += 1
                    continue
                phase.statuses[status] += 1
                if status != 200 or "error" in doc:
                    phase.failed += 1
                    continue
                phase.latencies_ms.append((time.perf_counter() - started) * 1000)
                phase.answered_credits += 1
                phase.nodes[node or "?"] += 1

    async def stop(self) -> None:
        """Stop sending, and wait for every call in flight to be answered."""
        self._stop.set()
        await asyncio.gather(*self._tasks)


@contextlib.contextmanager
def stack(home: Path) -> Iterator[dict[str, str]]:
    """``gateway up --nodes 3`` in a process of its own; its environment (ports included)."""
    env = {k: v for k, v in repo_env().items() if not k.startswith(("GATEWAY_", "RAY_"))}
    env.update(
        GATEWAY_HOME=str(home),
        GATEWAY_PORT=str(free_port()),
        GATEWAY_DEVNODE_RPC_PORT=str(free_port()),
        GATEWAY_DEVNODE_WS_PORT=str(free_port()),
        GATEWAY_DEVNODE_GRPC_PORT=str(free_port()),
        GATEWAY_GRPC_PORT=str(free_port()),
        GATEWAY_METRICS_EXPORT_PORT=str(free_port()),
        GATEWAY_DEVNODE_FEED="false",
        GATEWAY_RATE_LIMIT_RPS="100000",
        GATEWAY_UPSTREAM_PROBE_TIMEOUT_S="0.5",
    )
    log = home / "gateway-up.log"
    home.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        up = subprocess.Popen([str(GATEWAY), "up", "--nodes", "3"], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while b"Ready." not in log.read_bytes():
            if up.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gateway up did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
        yield env
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=120)


def gateway(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([str(GATEWAY), *args], env=env, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def follower_pid(home: Path, name: str) -> int:
    return int((home / FOLLOWERS / name / PIDFILE).read_text().split()[0])


async def credits_left(url: str, key: str) -> int:
    """The key's credits after one call of its own (``X-Credits-Remaining``), once a node serves it (a
    call refused 503 costs nothing)."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.post(url, data=body, headers={"X-Api-Key": key}) as resp:
                if resp.status == 200:
                    return int(resp.headers["X-Credits-Remaining"])
                assert resp.status == 503 and time.monotonic() < deadline, await resp.text()
            await asyncio.sleep(0.1)


async def run(rate: float, connections: int, phase_s: float) -> list[Phase]:
    """Each phase's figures."""
    home = Path(tempfile.mkdtemp(prefix="gw-failover-"))
    with stack(home) as env:
        key = gateway(env, "fund").strip().splitlines()[-1]
        wallet = json.loads((home / "wallets" / "dev-wallet.json").read_text())
        pubkey = str(Keypair.from_bytes(bytes(wallet)).pubkey())
        leader = f"http://127.0.0.1:{env['GATEWAY_DEVNODE_RPC_PORT']}"
        url = f"http://127.0.0.1:{env['GATEWAY_PORT']}/"
        phases: list[Phase] = []

        read: list[int] = []  # every balance read, in order

        async def left() -> int:
            read.append(await credits_left(url, key))
            return read[-1]

        async def phase(name: str, fault: Callable[[], Awaitable[None]] | None = None) -> None:
            """The load for ``phase_s``, ``fault`` done once it runs; the balance read before and after it."""
            before = await left()
            current = Phase(name)
            started = time.monotonic()
            load = Load(current, url, key, pubkey, rate, connections)
            await asyncio.sleep(0.5)
            if fault is not None:
                await fault()
            await asyncio.sleep(phase_s)
            await load.stop()
            current.window = (started, time.monotonic())
            current.charged = before - await left() - 1  # less the second read's own credit
            phases.append(current)

        async def kill(name: str) -> None:
            os.kill(follower_pid(home, name), signal.SIGKILL)

        hung = follower_pid(home, "node-2")
        late = DevnodeProcess(home / "late", 0, 0, 400, 54_000, False, grpc_port=None, follow=leader, lag_slots=200)

        async def add_late() -> None:
            await asyncio.to_thread(late.start)
            await asyncio.to_thread(
                gateway, env, "upstreams", "add", "late", "--rpc-url", late.rpc_url, "--reason", "bench"
            )

        async def kill_all() -> None:
            for name in ("node-2", "node-3"):
                await kill(name)
            late.signal(signal.SIGKILL)

        recorded = {n.name: n for n in recorded_followers(home) or []}
        node_3 = recorded["node-3"]
        rpc, ws, grpc = (int(str(u).rsplit(":", 1)[1]) for u in (node_3.rpc_url, node_3.ws_url, node_3.grpc_url))
        again = DevnodeProcess(home / FOLLOWERS / "node-3", rpc, ws, 400, 54_000, False, grpc_port=grpc, follow=leader)

        streams_key = gateway(env, "fund", "--wallet", str(home / "wallets" / "streams.json")).strip().splitlines()[-1]
        ws_slots = WsSlots(f"ws://127.0.0.1:{env['GATEWAY_PORT']}/ws", streams_key)
        grpc_slots = GrpcSlots(f"127.0.0.1:{env['GATEWAY_GRPC_PORT']}", streams_key)
        await asyncio.wait_for(asyncio.gather(ws_slots.served.wait(), grpc_slots.served.wait()), 60)

        await phase("steady")
        await phase("killed", lambda: kill("node-1"))
        await phase("killed, after")
        await phase("hung", lambda: asyncio.to_thread(os.kill, hung, signal.SIGSTOP))
        await phase("hung, after", lambda: asyncio.to_thread(os.kill, hung, signal.SIGCONT))
        await phase("lagging", add_late)
        none = Phase("none")  # no node in service: no balance to read during it, only before and after
        before_none = read[-1]
        started = time.monotonic()
        load = Load(none, url, key, pubkey, rate, connections)
        await kill_all()
        await asyncio.sleep(phase_s)
        await load.stop()
        none.window = (started, time.monotonic())
        phases.append(none)
        await asyncio.to_thread(again.start)
        await phase("none, after")  # its first read is the balance once node-3 serves again
        none.charged = before_none - read[-2] - 1  # less that read's own credit
        await ws_slots.stop()
        await grpc_slots.stop()
        for p in phases:
            p.ws_gap_ms, p.ws_ends = ws_slots.longest_gap_ms(p.window), ws_slots.ended(p.window)
            p.grpc_gap_ms, p.grpc_ends = grpc_slots.longest_gap_ms(p.window), grpc_slots.ended(p.window)
        again.stop()
    return phases


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="paid calls a second, all connections (100)")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--phase-s", type=float, default=8.0, help="seconds each phase lasts (8)")
    args = parser.parse_args(argv)
    phases = asyncio.run(run(args.rate, args.connections, args.phase_s))
    head = f"{'phase':<14} {'calls':>6} {'failed':>6}  {'statuses':<22} {'p50 ms':>7} {'p99 ms':>8}"
    gaps = f"{'/ws gap ms':<24} {'gRPC gap ms':<28}"
    print(f"{head}  charged / answered {gaps} nodes")
    for p in phases:
        print(p.row())


if __name__ == "__main__":
    main()
