"""Notifications per second through ``/ws`` to many subscribers of one account, against a plain
``websockets`` fan-out server fed by the same node; and, with ``--signals``, the latency of
``subscribeSignal`` from the node's slot to a subscriber.

    python -m bench.ws_fanout [--subscribers 1000] [--rate 50[,...]] [--duration 8] [--warmup 3] [--rounds 1]
                              [--deflate] [--profile FILE] [--signals N [--feed-interval-ms 100]] [--no-fanout]

The source is the devnode (its own process, ``python -m devnode``): a funded keypair sends SOL
transfers to one watched account at a fixed rate (``--rate`` per second, paced by this process), and
each one that lands is one ``accountNotification`` (base64, ``confirmed``) from the node's PubSub.
Transfers rather than slots: the notification is the one the figure is about (an account's, ~270
bytes), its rate is set here and not by the slot clock, and the devnode lands a transfer when it is
sent, so the rate is steady. The default rate offers 50,000 notifications a second to 1,000
subscribers, more than either server delivers on the 2-core machine, so a run measures the most each
delivers; a comma-separated ``--rate`` runs each rate in turn (the curve up to and past saturation),
and a target that delivered what it was offered at every rate is told to raise it.

Targets, each in a process of its own and each holding ONE upstream subscription to the node:

- ``gateway``: one :class:`gateway.app.replica.GatewayApp` on uvicorn (uvloop, httptools, the gateway's
  ``UVICORN_WS_OPTIONS`` as every replica's uvicorn gets them: uvicorn's default WebSocket protocol
  with a session's queued frames written together, docs/api.md's 25 s pings; the replica's GC
  setting), no Ray: the app one Serve replica runs. Clients authenticate with the API key of a
  funded account (``auth.<key>`` subprotocol); the replica shares one upstream subscription among
  the sessions, each re-addresses the notification to its own subscription id and charges it 1
  credit through the replica's meter (tallied per connection, written to PostgreSQL at the meter's
  flush);
- ``baseline``: a plain ``websockets`` server (uvloop, the same GC setting) that subscribes once
  upstream and writes each notification's ``result``, serialized once, re-addressed to every
  subscriber (the same bytes as the gateway's frames) through a queue and a writer task per
  connection; no auth, no billing.

The subscribers are one client process (uvloop): raw asyncio protocols that do the WebSocket
handshake, send ``accountSubscribe`` and then only find frame boundaries and count notification
frames, answering pings; no JSON parsing, so that the load generator stays far cheaper per message
than either server. It is a separate process so that it does not share an event loop with the
server it measures: on one loop, 1,000 clients' reads would run between the server's writes and be
counted as the server's time, and the two would take turns instead of running on the machine's two
cores. The client's CPU is printed: a client near a whole core would make the figure the client's.

Counted at the clients: notifications delivered over ``--duration`` seconds after ``--warmup``
seconds of the feed, summed over the subscribers (the spread per subscriber is printed too: a fair
server gives every subscriber about the same). The server columns are the target process's CPU per
delivered notification over the same window, and of it the kernel's (system time: mostly the socket
write of each frame). ``--deflate`` makes the clients offer permessage-deflate, as browsers and the
``websockets`` and ``ws`` client libraries do by default: both servers then compress every frame for
every connection. ``--profile FILE`` samples the gateway process with py-spy during its first window
(at the first rate) and prints where its time went, per notification.

``--signals N`` then starts a second devnode with its launch-platform feed (a step every
``--feed-interval-ms``), a gateway and the signal classifier (the actor's class, in a process of its
own, polling the node's confirmed blocks), and times N ``subscribeSignal`` events at one client in
this process, which also follows the node's ``slotSubscribe``: from the slot's confirmation (the
node's notification of the next slot, when the slot's block is closed and confirmed) and from the
slot's start.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import linecache
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson

from bench._proc import LOOPBACK, REPO_ROOT, emit, read_event, repo_env, wait_for_port
from gateway.base.keys import service_key_addresses
from gateway.runtime.ports import free_port

if TYPE_CHECKING:
    from websockets.asyncio.server import ServerConnection

TARGETS = ("gateway", "baseline")
#: ``{"jsonrpc":"2.0","method":"`` is 27 bytes: a notification's byte 27 is its method's first letter.
_METHOD_AT = 27
_ACCOUNT_NOTIFICATION = ord("a")
#: A run delivering more than this share of the offered rate did not saturate the server.
SATURATED_BELOW = 0.9
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_AMOUNTS = itertools.count(1)
#: Transfers a second: 50,000 notifications a second offered to 1,000 subscribers, more than either
#: server delivers on the 2-core machine (each saturates below 35,000; ``--rate 10,20,30,40,60,100``).
DEFAULT_RATES = (50.0,)
#: The measured gateway's socket caps: above any --subscribers this bench is run with.
MAX_SUBSCRIBERS = 20_000


# -- the subscribers (the ``clients`` subcommand) ---------------------------------------------------


class Subscriber(asyncio.Protocol):
    """One WebSocket client: handshake, one ``accountSubscribe``, then it counts notifications.

    Server frames are unmasked; only their headers are parsed (opcode and length), and a text frame
    is a notification when its method starts with ``a`` (``accountNotification``). With deflate the
    payloads are compressed, so every text frame after the subscription's answer counts.
    """

    def __init__(self, handshake: bytes, subscribe: bytes, deflate: bool) -> None:
        self.handshake = handshake
        self.subscribe = subscribe
        self.deflate = deflate
        self.transport: asyncio.Transport | None = None
        self.upgraded = False
        self.buffer = b""
        self.count = 0
        self.texts = 0
        self.subscribed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.close_code: int | None = None
        self.lost = False
        self.refused = False  # the subscription was answered with an error
        self.deflated = False  # the server accepted permessage-deflate

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport subclass
        self.transport.write(self.handshake)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if not self.subscribed.done():
            self.subscribed.set_exception(ConnectionError(f"closed before subscribing ({self.close_code})"))

    def data_received(self, data: bytes) -> None:
        if self.buffer:
            data = self.buffer + data
        if not self.upgraded:
            end = data.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = data
                return
            if not data.startswith(b"HTTP/1.1 101"):
                self.subscribed.set_exception(ConnectionError(data[:end].decode(errors="replace")))
                self.buffer = b""
                return
            self.upgraded = True
            self.deflated = b"permessage-deflate" in data[:end].lower()
            assert self.transport is not None
            self.transport.write(self.subscribe)
            data = data[end + 4 :]
        self.buffer = data[self._frames(data) :]

    def _frames(self, data: bytes) -> int:
        """Count the whole frames in ``data``; the offset of the first incomplete one."""
        i, n = 0, len(data)
        while n - i >= 2:
            length = data[i + 1] & 0x7F
            start = i + 2
            if length == 126:
                if n - i < 4:
                    break
                length, start = int.from_bytes(data[i + 2 : i + 4], "big"), i + 4
            elif length == 127:
                if n - i < 10:
                    break
                length, start = int.from_bytes(data[i + 2 : i + 10], "big"), i + 10
            end = start + length
            if end > n:
                break
            opcode = data[i] & 0x0F
            if opcode == 1:
                self._text(data, start, length)
            elif opcode == 9:
                self._send(0xA, data[start:end])  # pong
            elif opcode == 8:
                self.close_code = int.from_bytes(data[start : start + 2], "big") if length >= 2 else 1005
            i = end
        return i

    def _text(self, data: bytes, start: int, length: int) -> None:
        self.texts += 1
        if self.deflate:
            if self.texts > 1:
                self.count += 1
            elif not self.subscribed.done():
                self.subscribed.set_result(None)
        elif length > _METHOD_AT and data[start + _METHOD_AT] == _ACCOUNT_NOTIFICATION:
            self.count += 1
        elif not self.subscribed.done():
            self.refused = b'"error"' in data[start : start + length]  # its count stays at 0
            self.subscribed.set_result(None)

    def _send(self, opcode: int, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(client_frame(opcode, payload))

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._send(0x8, (1000).to_bytes(2, "big"))
            self.transport.close()


def client_frame(opcode: int, payload: bytes) -> bytes:
    """A masked, unfragmented client frame."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = bytes((0x80 | opcode, 0x80 | n))
    elif n < 1 << 16:
        head = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
    key = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
    masked = (int.from_bytes(payload, "big") ^ key).to_bytes(n, "big")
    return head + mask + masked


def handshake_request(host: str, port: int, api_key: str | None, deflate: bool) -> bytes:
    lines = [
        "GET /ws HTTP/1.1",
        f"Host: {host}:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
        "Sec-WebSocket-Version: 13",
    ]
    if api_key is not None:
        lines.append(f"Sec-WebSocket-Protocol: auth.{api_key}, solana-rpc")
    if deflate:
        lines.append("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def subscribe_request(account: str) -> bytes:
    params = [account, {"encoding": "base64", "commitment": "confirmed"}]
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "accountSubscribe", "params": params})
    return client_frame(0x1, body)


async def _stdin_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def clients(args: argparse.Namespace) -> None:
    """Connect and subscribe ``--subscribers`` clients; on ``go``, warm up, count, report (JSON lines)."""
    loop = asyncio.get_running_loop()
    key = args.api_key or None
    subscribe = subscribe_request(args.account)
    subs: list[Subscriber] = []
    gate = asyncio.Semaphore(32)  # handshakes in flight

    async def one() -> None:
        async with gate:
            handshake = handshake_request(LOOPBACK, args.port, key, args.deflate)
            _, sub = await loop.create_connection(
                lambda: Subscriber(handshake, subscribe, args.deflate), LOOPBACK, args.port
            )
            subs.append(sub)
            await asyncio.wait_for(sub.subscribed, 60)

    await asyncio.gather(*(one() for _ in range(args.subscribers)))
    emit({"event": "ready", "subscribers": len(subs), "deflated": sum(sub.deflated for sub in subs)})
    await _stdin_line()  # "go": the feed has started
    await asyncio.sleep(args.warmup)
    before = [sub.count for sub in subs]
    started = time.perf_counter()
    emit({"event": "start"})
    await asyncio.sleep(args.duration)
    counts = [sub.count - b for sub, b in zip(subs, before, strict=True)]
    elapsed = time.perf_counter() - started
    closes = Counter(str(sub.close_code) for sub in subs if sub.close_code is not None or sub.lost)
    if refused := sum(sub.refused for sub in subs):
        closes["subscription refused"] = refused
    emit({"event": "done", "seconds": elapsed, "counts": counts, "closes": dict(closes)})
    for sub in subs:
        sub.close()
    await asyncio.sleep(0.2)


# -- the baseline server (the ``baseline`` subcommand) ----------------------------------------------


class Fanout:
    """A plain fan-out: one upstream subscription, a queue and a writer task per client subscription."""

    def __init__(self, upstream_url: str) -> None:
        self.upstream_url = upstream_url
        self.subscribers: dict[int, tuple[asyncio.Queue[bytes], bytes, bytes]] = {}
        self.next_id = 0
        self.upstream: asyncio.Task[None] | None = None

    async def handler(self, ws: ServerConnection) -> None:
        from websockets.exceptions import ConnectionClosed

        queue: asyncio.Queue[bytes] = asyncio.Queue()
        writer = asyncio.create_task(self._write(ws, queue))
        mine: list[int] = []
        try:
            async for raw in ws:
                request = orjson.loads(raw)
                self.next_id += 1
                sub_id = self.next_id
                await ws.send(orjson.dumps({"jsonrpc": "2.0", "result": sub_id, "id": request.get("id")}), text=True)
                head = b'{"jsonrpc":"2.0","method":"accountNotification","params":{"result":'
                tail = b',"subscription":' + str(sub_id).encode() + b"}}"
                self.subscribers[sub_id] = (queue, head, tail)
                mine.append(sub_id)
                if self.upstream is None:
                    self.upstream = asyncio.create_task(self._follow(request["params"]))
        except ConnectionClosed:
            pass
        finally:
            for sub_id in mine:
                self.subscribers.pop(sub_id, None)
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer

    @staticmethod
    async def _write(ws: ServerConnection, queue: asyncio.Queue[bytes]) -> None:
        from websockets.exceptions import ConnectionClosed

        with contextlib.suppress(ConnectionClosed):
            while True:
                await ws.send(await queue.get(), text=True)

    async def _follow(self, params: list[Any]) -> None:
        from websockets.asyncio.client import connect

        async with connect(self.upstream_url, max_size=2**26) as node:
            request = {"jsonrpc": "2.0", "id": 1, "method": "accountSubscribe", "params": params}
            await node.send(orjson.dumps(request), text=True)
            async for raw in node:
                message = orjson.loads(raw)
                note = message.get("params")
                if not isinstance(note, dict):
                    continue  # the subscription's answer
                result = orjson.dumps(note["result"])
                for queue, head, tail in list(self.subscribers.values()):
                    queue.put_nowait(head + result + tail)


async def baseline(args: argparse.Namespace) -> None:
    from websockets.asyncio.server import serve

    from gateway.app.settings import Settings
    from gateway.base.process_gc import tune_gc

    tune_gc(Settings.model_fields["gc_young_threshold"].default)  # the gateway's GC setting: compare the code
    fanout = Fanout(args.upstream_ws)
    async with serve(fanout.handler, LOOPBACK, args.port, ping_interval=25, ping_timeout=20, max_queue=None):
        await asyncio.Event().wait()


# -- the gateway server (the ``serve`` subcommand) --------------------------------------------------


def serve_gateway(args: argparse.Namespace) -> None:
    """One GatewayApp on uvicorn, until SIGTERM: the app one Serve replica runs, without Ray."""
    import uvicorn

    from gateway.app.replica import GatewayApp
    from gateway.app.settings import Settings
    from gateway.base.process_gc import tune_gc
    from gateway.pubsub.ws import UVICORN_WS_OPTIONS
    from gateway.transports.http import build_http_app

    settings = Settings(
        **service_key_addresses(Path(args.home)),  # standing in for gateway up
        home=Path(args.home),
        database_url=args.database_url,
        redis_url=args.redis_url,
        upstream_rpc_url=args.upstream_rpc,
        upstream_ws_url=args.upstream_ws,
        rate_limit_rps=1_000_000,  # measure the fan-out, not the limiter
        concurrency_limit=100_000,
        # every subscriber is one account at one address: the socket caps would refuse all but a few
        ws_max_connections=MAX_SUBSCRIBERS,
        max_ongoing_requests=MAX_SUBSCRIBERS + 256,  # Serve's cap (no Serve here), kept valid
        ws_max_connections_per_account=MAX_SUBSCRIBERS,
        ws_max_connections_per_address=MAX_SUBSCRIBERS,
        api_key_secret=args.api_key_secret,
    )
    tune_gc(settings.gc_young_threshold)  # as an ingress replica does
    config = uvicorn.Config(
        build_http_app(GatewayApp(settings)),
        host=LOOPBACK,
        port=args.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        server_header=False,
        date_header=False,
        backlog=4096,
        **UVICORN_WS_OPTIONS,  # type: ignore[arg-type]
    )
    uvicorn.Server(config).run()


def classify(args: argparse.Namespace) -> None:
    """The signal classifier (the actor's plain class, no Ray) until SIGTERM."""
    import threading

    from gateway.signals.classifier_actor import SignalClassifierActor

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    actor = SignalClassifierActor({"redis_url": args.redis_url, "upstream_rpc_url": args.upstream_rpc})
    stop.wait()
    actor.shutdown()


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds used so far by a live process (Linux /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0, 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) / _CLK_TCK, int(fields[12]) / _CLK_TCK  # utime, stime (fields 14 and 15)


# -- the harness --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    subscribers: int = 1_000
    duration_s: float = 8.0
    warmup_s: float = 3.0
    rates: tuple[float, ...] = DEFAULT_RATES  # transfers (upstream notifications) per second, one run each
    rounds: int = 1
    deflate: bool = False
    profile: Path | None = None
    signals: int = 0  # subscribeSignal events to time (0: none)
    feed_interval_ms: int = 100  # the devnode's feed step, for the signals


@dataclass(frozen=True)
class Measurement:
    target: str
    round: int
    feed_rate: float  # transfers per second asked of the feed
    delivered: int  # notifications counted at the clients in the window
    seconds: float
    offered_per_s: float  # upstream notifications landed per second x subscribers
    server_user_s: float
    server_sys_s: float
    client_cpu_s: float
    per_subscriber: list[int]
    closes: dict[str, int]

    @property
    def rate(self) -> float:
        return self.delivered / self.seconds if self.seconds > 0 else 0.0

    @property
    def server_us(self) -> float:
        """Server CPU (user + system) per delivered notification, µs."""
        return 1e6 * (self.server_user_s + self.server_sys_s) / self.delivered if self.delivered else float("nan")

    @property
    def server_sys_us(self) -> float:
        """Of which in the kernel (mostly the socket write of each frame), µs."""
        return 1e6 * self.server_sys_s / self.delivered if self.delivered else float("nan")

    @property
    def client_share(self) -> float:
        """The client process's CPU, in cores."""
        return self.client_cpu_s / self.seconds if self.seconds > 0 else 0.0

    @property
    def saturated(self) -> bool:
        return self.rate < SATURATED_BELOW * self.offered_per_s


@dataclass
class Feed:
    """Transfers to the watched account at a fixed rate; counts those the node accepted."""

    rpc_url: str
    rate: float
    landed: int = 0

    async def run(self, payer: Any, watched: Any, stop: asyncio.Event) -> None:
        import aiohttp
        from solders.hash import Hash
        from solders.message import Message
        from solders.system_program import TransferParams, transfer
        from solders.transaction import Transaction

        async with aiohttp.ClientSession() as http:
            blockhash, fetched = Hash.default(), 0.0
            interval, due = 1.0 / self.rate, time.monotonic()
            while not stop.is_set():
                if time.monotonic() - fetched > 5.0:
                    answer = await _rpc(http, self.rpc_url, "getLatestBlockhash", [])
                    blockhash, fetched = Hash.from_string(answer["result"]["value"]["blockhash"]), time.monotonic()
                lamports = 1_000_000 + next(_AMOUNTS)  # a new amount each time: no two transfers share a signature
                ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=watched, lamports=lamports))
                tx = Transaction([payer], Message.new_with_blockhash([ix], payer.pubkey(), blockhash), blockhash)
                wire = base64.b64encode(bytes(tx)).decode()
                answer = await _rpc(
                    http, self.rpc_url, "sendTransaction", [wire, {"encoding": "base64", "skipPreflight": True}]
                )
                self.landed += "result" in answer
                due += interval
                delay = due - time.monotonic()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), delay)
                else:
                    due = time.monotonic()  # behind: do not burst to catch up


async def _rpc(http: Any, url: str, method: str, params: list[Any]) -> dict[str, Any]:
    async with http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) as resp:
        answer: dict[str, Any] = await resp.json()
        return answer


@dataclass(frozen=True)
class Stack:
    node_rpc: str
    node_ws: str
    ports: dict[str, int]
    pids: dict[str, int]
    api_key: str
    payer: Any
    watched: Any


def _python(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.ws_fanout", *args]


@contextlib.contextmanager
def stack(home: Path, database_url: str, redis_url: str, feed_interval_ms: int | None = None) -> Iterator[Stack]:
    """The devnode, the gateway and the baseline, each a process; a funded API key; a funded payer.

    With ``feed_interval_ms`` the devnode also runs its launch-platform feed (a step that often) and
    the signal classifier runs in a process of its own: what ``subscribeSignal`` needs."""
    from solders.keypair import Keypair

    from bench.metered import create_api_key, fund_account
    from gateway.runtime.devnode_proc import DevnodeProcess
    from gateway_client import WalletSigner

    feed = feed_interval_ms is not None
    node = DevnodeProcess(home / f"devnode-{os.urandom(4).hex()}", free_port(), free_port(), 400, 54_000, feed=feed)
    if feed_interval_ms is not None:
        node.extra_args += ["--feed-interval-ms", str(feed_interval_ms)]
    procs: list[subprocess.Popen[bytes]] = []
    node.start()
    try:
        ports = {"gateway": free_port(), "baseline": free_port()}
        secret = os.urandom(32).hex()
        gateway = ["serve", "--port", str(ports["gateway"]), "--home", str(home / "gateway")]
        gateway += ["--database-url", database_url, "--redis-url", redis_url, "--api-key-secret", secret]
        gateway += ["--upstream-rpc", node.rpc_url, "--upstream-ws", node.ws_url]
        procs.append(subprocess.Popen(_python(*gateway), cwd=REPO_ROOT, env=repo_env(), stdout=subprocess.DEVNULL))
        base = ["baseline", "--port", str(ports["baseline"]), "--upstream-ws", node.ws_url]
        procs.append(subprocess.Popen(_python(*base), cwd=REPO_ROOT, env=repo_env(), stdout=subprocess.DEVNULL))
        if feed:
            classify = ["classify", "--redis-url", redis_url, "--upstream-rpc", node.rpc_url]
            procs.append(subprocess.Popen(_python(*classify), cwd=REPO_ROOT, env=repo_env(), stdout=subprocess.DEVNULL))
        url = f"http://{LOOPBACK}:{ports['gateway']}"
        _wait_health(url, procs[0])
        asyncio.run(wait_for_port(LOOPBACK, ports["baseline"], 30))
        owner = os.urandom(32)
        key = create_api_key(url, owner)
        fund_account(database_url, WalletSigner(owner).pubkey, 1_000 * 10**6)  # 10^8 credits
        payer, watched = Keypair(), Keypair().pubkey()
        airdrop = {"jsonrpc": "2.0", "id": 1, "method": "requestAirdrop", "params": [str(payer.pubkey()), 10**15]}
        request = urllib.request.Request(node.rpc_url, orjson.dumps(airdrop), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert "result" in orjson.loads(resp.read()), "the devnode refused the airdrop"
        pids = {"gateway": procs[0].pid, "baseline": procs[1].pid}
        yield Stack(node.rpc_url, node.ws_url, ports, pids, key, payer, watched)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        node.stop()


@dataclass(frozen=True)
class SignalLatency:
    """Seconds from the node's slot to one ``subscribeSignal`` client, per event."""

    kinds: Counter[str]
    from_confirmed: list[float]  # from the slot's block closing (the node's next slot: it is confirmed)
    from_slot: list[float]  # from the slot's start (the node's notification of it)


async def signal_latency(st: Stack, count: int, warmup_s: float, timeout_s: float) -> SignalLatency:
    """Follow the node's slots and one gateway ``subscribeSignal`` (every kind) in this process; time
    each event against the node's slot notifications (one clock, one event loop, both sockets)."""
    from websockets.asyncio.client import connect

    opened: dict[int, float] = {}
    closed: dict[int, float] = {}
    kinds: Counter[str] = Counter()
    from_confirmed: list[float] = []
    from_slot: list[float] = []
    url = f"ws://{LOOPBACK}:{st.ports['gateway']}/ws"
    async with (
        connect(st.node_ws) as node,
        connect(url, subprotocols=[f"auth.{st.api_key}", "solana-rpc"]) as gateway,  # type: ignore[list-item]
    ):

        async def slots() -> None:
            async for raw in node:
                now = time.monotonic()
                note = orjson.loads(raw).get("params")
                if isinstance(note, dict):
                    opened[note["result"]["slot"]] = now
                    closed[note["result"]["parent"]] = now

        await node.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "slotSubscribe"}))
        following = asyncio.create_task(slots())
        await gateway.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "subscribeSignal", "params": []}))
        started = time.monotonic()
        deadline = started + timeout_s
        try:
            while len(from_confirmed) < count:
                raw = await asyncio.wait_for(gateway.recv(), max(0.0, deadline - time.monotonic()))
                now = time.monotonic()
                message = orjson.loads(raw)
                if message.get("method") != "signalNotification" or now - started < warmup_s:
                    continue
                event = message["params"]["result"]
                slot = event["slot"]
                if slot in closed and slot in opened:
                    kinds[event["kind"]] += 1
                    from_confirmed.append(now - closed[slot])
                    from_slot.append(now - opened[slot])
        except TimeoutError:
            pass  # report what came
        finally:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following
    return SignalLatency(kinds, from_confirmed, from_slot)


def format_latency(latency: SignalLatency) -> str:
    if not latency.from_confirmed:
        return "signal latency: no signal arrived"

    def quantiles(values: list[float]) -> str:
        ms = sorted(v * 1000 for v in values)
        q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else [ms[0]] * 99
        return f"p50 {q[49]:6.0f} ms   p90 {q[89]:6.0f} ms   p99 {q[98]:6.0f} ms"

    kinds = ", ".join(f"{n} {kind}" for kind, n in latency.kinds.most_common())
    return "\n".join(
        [
            f"subscribeSignal, {len(latency.from_confirmed)} events ({kinds}), 400 ms slots:",
            f"  from the slot's confirmation (its block closed) {quantiles(latency.from_confirmed)}",
            f"  from the slot's start                           {quantiles(latency.from_slot)}",
        ]
    )


def _wait_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:  # /health is 200 once the node has answered the gateway's probe
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1).read()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextlib.asynccontextmanager
async def client_process(target: str, st: Stack, options: Options) -> AsyncIterator[asyncio.subprocess.Process]:
    args = ["clients", "--port", str(st.ports[target]), "--account", str(st.watched)]
    args += ["--subscribers", str(options.subscribers), "--warmup", str(options.warmup_s)]
    args += ["--duration", str(options.duration_s), "--api-key", st.api_key if target == "gateway" else ""]
    args += ["--deflate"] if options.deflate else []
    proc = await asyncio.create_subprocess_exec(
        *_python(*args), cwd=REPO_ROOT, env=repo_env(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            await proc.wait()


async def measure(target: str, round_no: int, rate: float, st: Stack, options: Options) -> Measurement:
    """One window: subscribe the clients, start the feed, count after the warm-up."""
    async with client_process(target, st, options) as clients_proc:
        assert clients_proc.stdout is not None and clients_proc.stdin is not None
        ready = await read_event(clients_proc.stdout, "ready", 120 + options.subscribers / 20)
        if ready["deflated"] != (options.subscribers if options.deflate else 0):
            print(f"{target}: permessage-deflate on {ready['deflated']} of {options.subscribers}", file=sys.stderr)
        feed, stop = Feed(st.node_rpc, rate), asyncio.Event()
        feeding = asyncio.create_task(feed.run(st.payer, st.watched, stop))
        clients_proc.stdin.write(b"go\n")
        await clients_proc.stdin.drain()
        await read_event(clients_proc.stdout, "start", options.warmup_s + 30)
        server, client = st.pids[target], clients_proc.pid
        (user0, sys0), client0, landed0 = cpu_times(server), sum(cpu_times(client)), feed.landed
        profiling = target == "gateway" and round_no == 0 and rate == options.rates[0]
        sampler = _profile(server, options) if profiling else None
        done = await read_event(clients_proc.stdout, "done", options.duration_s + 30)
        (user1, sys1), client1, landed1 = cpu_times(server), sum(cpu_times(client)), feed.landed
        stop.set()
        await feeding
        await _finish_profile(sampler, options)
        await clients_proc.wait()
    await asyncio.sleep(1.0)  # the server drops the sessions before the next run
    counts: list[int] = done["counts"]
    seconds: float = done["seconds"]
    return Measurement(
        target,
        round_no,
        rate,
        sum(counts),
        seconds,
        (landed1 - landed0) / seconds * options.subscribers,
        user1 - user0,
        sys1 - sys0,
        client1 - client0,
        counts,
        done["closes"],
    )


def _profile(pid: int, options: Options) -> asyncio.Task[int] | None:
    if options.profile is None:
        return None
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        print("py-spy not found (pip install py-spy): no profile", file=sys.stderr)
        return None
    command = [py_spy, "record", "--pid", str(pid), "--duration", str(max(1, int(options.duration_s)))]
    command += [
        "--rate",
        "250",
        "--nonblocking",
        "--full-filenames",
        "--format",
        "raw",
        "--output",
        str(options.profile),
    ]

    async def sample() -> int:
        proc = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        return await proc.wait()

    return asyncio.create_task(sample())


async def _finish_profile(sampler: asyncio.Task[int] | None, options: Options) -> None:
    if sampler is None or options.profile is None:
        return
    code = await sampler
    if code != 0 or not options.profile.exists():
        print(f"py-spy exited with {code}: no profile", file=sys.stderr)


@dataclass(frozen=True)
class Results:
    measurements: list[Measurement]
    latency: SignalLatency | None


def run(options: Options) -> Results:
    """Start everything; measure each target at each rate, ``options.rounds`` times (every other round
    in reverse order); then, with ``options.signals``, the signal latency on a devnode with its feed."""
    from bench.inprocess import embedded_stores
    from gateway.storage.migrate import migrate_url

    results: list[Measurement] = []
    latency = None
    with embedded_stores("gw-bench-ws-") as stores:
        asyncio.run(migrate_url(stores.database_url))
        if options.rates:
            with stack(stores.home, stores.database_url, stores.redis_url) as st:
                for round_no in range(options.rounds):
                    order = TARGETS if round_no % 2 == 0 else TARGETS[::-1]
                    for rate in options.rates:
                        for target in order:
                            result = asyncio.run(measure(target, round_no, rate, st, options))
                            counts = result.per_subscriber or [0]
                            print(
                                f"round {round_no + 1}, {rate:g} transfers/s, {target}: "
                                f"{result.rate:,.0f} notifications/s of {result.offered_per_s:,.0f} offered, "
                                f"{result.server_us:.1f} µs/note, per subscriber {min(counts):,} / "
                                f"{statistics.median(counts):,.0f} / {max(counts):,}",
                                flush=True,
                            )
                            results.append(result)
        if options.signals > 0:
            feeding = stack(stores.home, stores.database_url, stores.redis_url, options.feed_interval_ms)
            with feeding as st:
                timeout_s = 30 + options.signals * 2.0
                latency = asyncio.run(signal_latency(st, options.signals, options.warmup_s, timeout_s))
    return Results(results, latency)


# -- the report ---------------------------------------------------------------------------------------


def best(results: list[Measurement], target: str, rate: float | None = None) -> Measurement | None:
    """The target's best round (at ``rate``, or at any rate)."""
    mine = [r for r in results if r.target == target and (rate is None or r.feed_rate == rate)]
    return max(mine, key=lambda r: r.rate) if mine else None


def format_results(results: list[Measurement], options: Options) -> str:
    head = f"{options.subscribers:,} subscribers of one account"
    head += ", permessage-deflate" if options.deflate else ""
    head += f"; best of {options.rounds} round(s), {options.duration_s:g} s each after {options.warmup_s:g} s"
    lines = [
        head,
        "",
        f"{'transfers/s':>11}  {'target':<9} {'notifications/s':>15} {'offered/s':>10} {'server µs/note':>14} "
        f"{'(kernel)':>8} {'client cores':>12} {'per subscriber min/median/max':>30}  closes",
    ]
    for rate in options.rates:
        for target in TARGETS:
            r = best(results, target, rate)
            if r is None:
                continue
            counts = r.per_subscriber
            spread = f"{min(counts):,} / {statistics.median(counts):,.0f} / {max(counts):,}" if counts else "-"
            lines.append(
                f"{rate:>11g}  {target:<9} {r.rate:>15,.0f} {r.offered_per_s:>10,.0f} {r.server_us:>14.1f} "
                f"{r.server_sys_us:>8.1f} {r.client_share:>12.2f} {spread:>30}  {r.closes or '-'}"
            )
        lines.append(f"{'':>11}  gateway / baseline: {_ratio(results, rate)}")
    gateway, base = best(results, "gateway"), best(results, "baseline")
    lines.append("")
    for target in TARGETS:
        mine = [r for r in results if r.target == target]
        if mine and not any(r.saturated for r in mine):
            lines.append(f"({target} delivered what it was offered at every rate: raise --rate to find its most)")
    if gateway is not None and base is not None and base.rate > 0:
        lines.append(
            f"most delivered: gateway {gateway.rate:,.0f}/s ({gateway.feed_rate:g} transfers/s), baseline "
            f"{base.rate:,.0f}/s ({base.feed_rate:g} transfers/s); gateway / baseline {gateway.rate / base.rate:.3f} "
            "(target ≥ 0.6)"
        )
    return "\n".join(lines)


def _ratio(results: list[Measurement], rate: float) -> str:
    gateway, base = best(results, "gateway", rate), best(results, "baseline", rate)
    if gateway is None or base is None or base.rate <= 0:
        return "-"
    text = f"{gateway.rate / base.rate:.3f} delivered"
    if base.server_us > 0 and math.isfinite(gateway.server_us):
        text += f", {gateway.server_us / base.server_us:.2f}x the CPU per notification"
    within = []
    for n in range(_rounds(results)):
        g = next((r for r in results if (r.round, r.target, r.feed_rate) == (n, "gateway", rate)), None)
        b = next((r for r in results if (r.round, r.target, r.feed_rate) == (n, "baseline", rate)), None)
        if g is not None and b is not None and b.rate > 0:
            within.append(g.rate / b.rate)
    if len(within) > 1:
        text += f"; within rounds, median {statistics.median(within):.3f} ({', '.join(f'{w:.3f}' for w in within)})"
    return text


def _rounds(results: list[Measurement]) -> int:
    return max((r.round for r in results), default=-1) + 1


SOCKET_WRITES = "socket writes (transport.write of each frame: the kernel's send)"
#: Where a sample's time is put: the first rule matching its innermost Python frame with a source
#: file (file path substring, function name substrings or None for any), after SOCKET_WRITES.
BUCKETS: tuple[tuple[str, tuple[str, ...] | None, str], ...] = (
    ("gateway/node/pubsub.py", None, "fan-in: the share hands the notification to each session"),
    (
        "gateway/pubsub/session.py",
        ("deliver", "_notify", "_put"),
        "fan-in: the share hands the notification to each session",
    ),
    ("gateway/pubsub/session.py", None, "session writer (next_batch, balance check)"),
    ("gateway/pubsub/ws.py", None, "session writer (next_batch, balance check)"),
    ("gateway/credits", None, "meter (spend, complete: a usage record each)"),
    ("gateway/storage", None, "usage flush (ledger, asyncpg)"),
    ("asyncpg", None, "usage flush (ledger, asyncpg)"),
    ("starlette", None, "ASGI send (starlette WebSocket, uvicorn's protocol)"),
    ("uvicorn", None, "ASGI send (starlette WebSocket, uvicorn's protocol)"),
    ("websockets", None, "frame encoding (websockets)"),
    ("bench/ws_fanout.py", None, "fan-out (the baseline's own code)"),
    ("asyncio/queues", None, "asyncio queues, locks, events"),
    ("asyncio/locks", None, "asyncio queues, locks, events"),
    ("asyncio", None, "event loop"),
    ("uvloop", None, "event loop"),
)
OTHER = "other"
_SHORT = re.compile(r"^.*/(site-packages|lib/python3\.\d+)/|^" + re.escape(str(REPO_ROOT)) + "/")
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


def summarize_profile(path: Path, us_per_note: float | None = None, top: int = 15) -> str:
    """Where the sampled process's time went, by bucket and by line, from py-spy's collapsed stacks
    (``--format raw --full-filenames``). With ``us_per_note``, each share is also given in µs per
    notification. py-spy samples the wall clock while the thread is not idle, so a thread preempted
    in a system call counts as running there: the kernel's share is better read from the run's
    system CPU, which the benchmark prints."""
    buckets: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = stack_text.split(";")
        buckets[_classify(frames)] += count
        lines[_innermost(frames)] += count
    if not total:
        return "no samples"

    def share(n: int) -> str:
        text = f"{100 * n / total:5.1f}%"
        return text + (f" {us_per_note * n / total:5.1f} µs" if us_per_note is not None else "")

    out = [f"{total} samples, by where the time went:"]
    out += [f"  {share(n)}  {name}" for name, n in buckets.most_common()]
    out.append("hottest lines (own time):")
    out += [f"  {share(n)}  {name}" for name, n in lines.most_common(top)]
    return "\n".join(out)


def _innermost(frames: list[str]) -> str:
    """The innermost frame with a source file, its path shortened after site-packages or the repo."""
    for frame in reversed(frames):
        match = _FRAME.match(frame)
        if match is not None and not match["file"].startswith("<"):
            name = _SHORT.sub("", match["file"])
            return f"{match['func']} ({name}:{match['line']})"
    return frames[-1] if frames else "?"


def _classify(frames: list[str]) -> str:
    for frame in reversed(frames):
        match = _FRAME.match(frame)
        if match is None or match["file"].startswith("<"):
            continue  # native frames and generated code (dataclass __init__): their caller's bucket
        func, file = match["func"], match["file"]
        if "transport.write(" in linecache.getline(file, int(match["line"])):
            return SOCKET_WRITES
        for needle, functions, name in BUCKETS:
            if needle in file and (functions is None or any(f in func for f in functions)):
                return name
        return OTHER
    return OTHER


def _rates(text: str) -> tuple[float, ...]:
    values = tuple(float(part) for part in text.split(",") if part.strip())
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError("expected a comma-separated list of positive numbers")
    return values


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ws_fanout", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serving = sub.add_parser("serve", help="(internal) the gateway process")
    serving.add_argument("--port", type=int, required=True)
    serving.add_argument("--home", required=True)
    serving.add_argument("--database-url", required=True)
    serving.add_argument("--redis-url", required=True)
    serving.add_argument("--api-key-secret", required=True)
    serving.add_argument("--upstream-rpc", required=True)
    serving.add_argument("--upstream-ws", required=True)
    base = sub.add_parser("baseline", help="(internal) the plain websockets fan-out process")
    base.add_argument("--port", type=int, required=True)
    base.add_argument("--upstream-ws", required=True)
    load = sub.add_parser("clients", help="(internal) the subscribers' process")
    load.add_argument("--port", type=int, required=True)
    load.add_argument("--account", required=True)
    load.add_argument("--api-key", default="")
    load.add_argument("--subscribers", type=int, required=True)
    load.add_argument("--warmup", type=float, required=True)
    load.add_argument("--duration", type=float, required=True)
    load.add_argument("--deflate", action="store_true")
    classifier = sub.add_parser("classify", help="(internal) the signal classifier process")
    classifier.add_argument("--redis-url", required=True)
    classifier.add_argument("--upstream-rpc", required=True)
    parser.add_argument("--subscribers", type=int, default=1_000, help="clients, one subscription each (1000)")
    parser.add_argument("--duration", type=float, default=8.0, help="counted seconds per run (default 8)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of feed before counting (default 3)")
    parser.add_argument(
        "--rate", type=_rates, default=DEFAULT_RATES, help="transfers to the account per second, comma-separated (50)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds of both targets, alternating order (1)")
    parser.add_argument("--deflate", action="store_true", help="clients offer permessage-deflate")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the gateway's first window into FILE")
    parser.add_argument("--signals", type=int, default=0, help="time this many subscribeSignal events (0: none)")
    parser.add_argument("--feed-interval-ms", type=int, default=100, help="the devnode feed's step, for --signals")
    parser.add_argument("--no-fanout", action="store_true", help="only the signal latency (with --signals)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve_gateway(args)
        return
    if args.command == "classify":
        classify(args)
        return
    if args.command in ("baseline", "clients"):
        import uvloop

        uvloop.run(baseline(args) if args.command == "baseline" else clients(args))
        return
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwind through run()'s finally
    options = Options(
        args.subscribers,
        args.duration,
        args.warmup,
        () if args.no_fanout else args.rate,
        args.rounds,
        args.deflate,
        args.profile,
        args.signals,
        args.feed_interval_ms,
    )
    results = run(options)
    if results.measurements:
        print()
        print(format_results(results.measurements, options))
    if options.profile is not None and options.profile.exists():
        profiled = next((r for r in results.measurements if r.target == "gateway" and r.round == 0), None)
        print()
        print(f"gateway profile at {options.rates[0]:g} transfers/s ({options.profile}):")
        print(summarize_profile(options.profile, profiled.server_us if profiled is not None else None))
    if results.latency is not None:
        print()
        print(format_latency(results.latency))


if __name__ == "__main__":
    main()
