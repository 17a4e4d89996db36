"""CPU per call of the gateway's pipelines in one process: what auth and metering add, without HTTP or Ray.

    python -m bench.pipeline_cpu [--calls 20000] [--rounds 5] [--ray-metrics] [--sliced] [--replica-gc] [--cold]
                                 [--profile NAME [--sort cumulative]] [--ladder] [--node]

At 64 connections a replica is CPU-bound, so its throughput is set by CPU per call; this measures that
part of it alone. Each pipeline ends in the real forwarder as served (the app's own methods and its
response cache), whose node answers at once without a network, and uses the gateway's own stores
(leases, API-key cache, nonces) on a real embedded PostgreSQL and Redis. The ``asgi-`` rows add the HTTP
transport (ASGI messages → Call → response, as ``gateway.transports.http`` serves JSON-RPC) without a
socket. Rounds alternate the pipelines; each figure is the median of its rounds. ``--profile NAME`` prints a
cProfile of one instead. ``--sliced``: the limits are slices of in-process account shards
(gateway/limits/slices.py) instead of the replica's own.
``--replica-gc``: the garbage collector as in an ingress replica (the start-up heap frozen, as Serve
freezes it, and the young generation's threshold ``gc_young_threshold``); without it, Python's defaults
walk this process's whole start-up heap every few hundred batches, and a round's figure depends on
whether one such pass fell in it.

``--cold``: the CPU caches are overwritten before each call (``COLD_BYTES`` written, one byte a cache
line), and each call is timed alone. Calls back to back find their code and objects in the caches; in a
replica each call's run through the pipeline is interleaved with uvicorn's, Serve's, Ray's and the
kernel's, and finds them cold. Cold, the same code costs 3.5-5 times as much (bench/README.md, "Where
the replica's and the machine's time goes"): what a pipeline costs in a replica follows how much code
and data it touches, not only how many instructions it runs warm.

``--node``: the pipelines end in the replica's own forwarder and node client (the pool of nodes, with one
node: gateway/node/pool.py) instead of the constant stand-in, sending each call over loopback to a
constant-answer upstream in a process of its own (``bench.const_upstream``, whose CPU is not counted):
what a call costs the replica with its real node client, one call in flight. The rows are
``node-unmetered`` and ``node-metered-apikey``.

``--ladder``: the API-key call through the JSON-RPC stages added one at a time (the error boundary and
parsing; auth; the credit headers and the readiness gate; metering as served), each row's cost over the
one before it, and beside metering a floor that is not a gateway stage (:class:`FloorMeter`): the least a
metered call could do. What metering costs above that floor is all a leaner metering stage could save.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from statistics import median

from starlette.applications import Starlette
from starlette.types import Message

from bench._proc import LOOPBACK, wait_for_port
from bench.metered import fund_account
from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.base.keys import service_key_addresses
from gateway.base.process_gc import tune_gc
from gateway.credits.meter import Meter
from gateway.limits.slices import LocalShards
from gateway.node.health import EveryNodeServes
from gateway.node.pool import health_source
from gateway.pipeline.http import RPC_MAX_BODY_BYTES, RpcFirst, http_call, mount
from gateway.pipeline.stages import Call, Handler, Reply, ReplyStyle, Stage, compose, error_boundary
from gateway.rpc.forward import Forwarder, ParseStage
from gateway.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
from gateway.runtime.ports import free_port
from gateway.storage.migrate import migrate_url
from gateway.transports.deadline import BodyDeadline
from gateway_client import WalletSigner

BODY = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
BATCH = 100
BATCH_BODY = b"[" + b",".join(b'{"jsonrpc":"2.0","id":%d,"method":"getSlot"}' % i for i in range(BATCH)) + b"]"
ANSWER = b'{"jsonrpc":"2.0","id":0,"result":123456789}'  # the forwarder sends item positions as ids
BASE_HEADERS = {"content-type": "application/json", "host": "127.0.0.1:8000", "user-agent": "bench"}


class ConstantNode:
    """The upstream without the network: the real forwarder, a node that answers at once (a batch with
    as many answers as it has items)."""

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        if body[:1] == b"[":
            return (
                b"["
                + b",".join(b'{"jsonrpc":"2.0","id":%d,"result":123456789}' % i for i in range(body.count(b'"method"')))
                + b"]"
            )
        return ANSWER


def constant_forwarder(gw: GatewayApp) -> Forwarder:
    """The app's forwarder as served (its own methods, its response cache) ending in :class:`ConstantNode`."""
    return Forwarder(ConstantNode(), gw.methods.handlers, gw.cache)


def over_asgi(handler: Handler) -> Handler:
    """The same handler behind the gateway's HTTP transport (ASGI messages → Call, Reply → response), called
    as an ASGI app without a socket: adds what the HTTP transport costs per call."""
    routes = [mount("/", "POST", [], handler, RPC_MAX_BODY_BYTES, ReplyStyle.JSONRPC)]
    app = BodyDeadline(RpcFirst(Starlette(routes=routes), ["/"], handler), 10.0)  # as build_http_app serves it

    async def handle(call: Call) -> Reply:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": call.verb,
            "scheme": "http",
            "path": call.path,
            "raw_path": call.path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in call.headers.items()],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
        }
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": call.body, "more_body": False}

        async def send(message: Message) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return Reply(sent[0]["status"], sent[1]["body"])

    return handle


def keyed_call(key: str, body: bytes) -> Call:
    """A JSON-RPC call to ``POST /`` carrying the API key ``key``, as the HTTP transport builds it."""
    return http_call("POST", "/", {**BASE_HEADERS, "x-api-key": key}, body, style=ReplyStyle.JSONRPC)


class FloorMeter:
    """The ladder's lower bound, not a gateway stage: spend a call's price from the replica's lease (the store
    when it runs short), record its usage and set the credit and rate headers, with nothing else: no account
    checks, no rate or concurrency limit, no refund rule, no metrics."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        payload = call.payload
        assert payload is not None and not payload.is_batch, "the floor meters one call"
        pubkey, item = call.authenticated().pubkey, payload.items[0]
        admission = self.meter.spend_local(pubkey, item.price) or await self.meter.admit(pubkey, item.price)
        try:
            return await next_handler(call)
        finally:
            self.meter.complete(admission, item.method, call.request_id)
            headers = call.response_headers
            headers["X-Credits-Remaining"] = str(self.meter.remaining(pubkey))
            headers["X-Ratelimit-Limit"] = headers["X-Ratelimit-Remaining"] = "1000000"
            headers["X-Ratelimit-Reset"] = str(int(time.time()))


def ladder(gw: GatewayApp) -> dict[str, Handler]:
    """The JSON-RPC stages as served (:meth:`GatewayApp.rpc_stages`), added one step at a time, and the
    floor beside metering; each ends in the forwarder."""
    auth, headers, ready, parse, access, metering = gw.rpc_stages()
    assert isinstance(parse, ParseStage) and metering is gw.metering, "the ladder must follow rpc_stages()"
    assert access is gw.access_methods, "the ladder must follow rpc_stages()"
    steps: dict[str, list[Stage]] = {
        "boundary+parse": [error_boundary, parse],
        "+auth": [error_boundary, auth, parse],
        "+headers,readiness": [error_boundary, auth, headers, ready, parse],
        "+access rules": [error_boundary, auth, headers, ready, parse, access],
        "+floor meter": [error_boundary, auth, headers, ready, parse, access, FloorMeter(gw.meter)],
        "+metering": [error_boundary, auth, headers, ready, parse, access, metering],
    }
    return {name: compose(stages, constant_forwarder(gw)) for name, stages in steps.items()}


#: Bytes written between calls with ``--cold``: more than this machine's L2 and its share of L3.
COLD_BYTES = 32 * 1024 * 1024
_LINE = 64


class Evictor:
    """Overwrites the CPU caches: one byte written in every cache line of a buffer larger than they are."""

    def __init__(self, size: int = COLD_BYTES) -> None:
        self._buffer = bytearray(size)
        self._line = bytes(len(range(0, size, _LINE)))

    def __call__(self) -> None:
        self._buffer[::_LINE] = self._line


async def per_call_us(
    handler: Handler,
    make_call: Callable[[], Call],
    calls: int,
    flush: Callable[[], Awaitable[None]],
    evict: Callable[[], None] | None = None,
) -> float:
    """CPU µs per call, the flush of their usage records included; the calls are built before the clock
    starts (signing is the client's cost). With ``evict``, it runs before each call, outside the clock."""
    for _ in range(200):  # warm: leases taken, caches filled
        await handler(make_call())
    await flush()
    prepared = [make_call() for _ in range(calls)]
    spent = 0
    start = time.process_time_ns()
    for call in prepared:
        if evict is not None:
            spent += time.process_time_ns() - start
            evict()
            start = time.process_time_ns()
        reply = await handler(call)
    await flush()  # writing the calls' usage to PostgreSQL is part of their cost
    spent += time.process_time_ns() - start
    assert reply.status == 200, reply.body
    return spent / calls / 1e3


async def build(
    home: Path, database_url: str, redis_url: str, sliced: bool = False, node_url: str | None = None
) -> tuple[GatewayApp, str, WalletSigner]:
    """The app; with ``node_url``, its pool's one node is there and probed as in a replica."""
    await migrate_url(database_url)
    settings = Settings(
        **service_key_addresses(home),  # standing in for gateway up
        home=home,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=node_url,
        rate_limit_rps=1_000_000,  # measure metering, not the limiter refusing calls
        concurrency_limit=100_000,
    )
    gw = GatewayApp(settings, shards=LocalShards(2) if sliced else None)
    if node_url is None:  # the constant stand-in answers: nothing to probe
        with health_source(lambda nodes, _: EveryNodeServes(nodes)):
            await gw.startup()
    else:
        await gw.startup()  # the pool's first view: the node probed
    assert gw.ready, "the node did not answer its first probe"
    signer = WalletSigner(os.urandom(32))
    assert gw.auth.api_keys is not None
    key = await gw.auth.api_keys.rotate(signer.pubkey, None)
    await asyncio.to_thread(fund_account, database_url, signer.pubkey, 1_000_000_000)
    return gw, key, signer


def with_ray_metrics() -> None:
    """Start a local Ray and install its metrics backend in this process, as each replica does: the
    rows then include what recording the metrics costs (docs/operations.md)."""
    import logging

    import ray

    from actors.metrics import install_ray_metrics

    ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING, _node_ip_address="127.0.0.1")
    install_ray_metrics()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", default=None, help="print a cProfile of this pipeline instead")
    parser.add_argument("--sort", default="tottime", help="cProfile order for --profile (default tottime)")
    parser.add_argument("--sliced", action="store_true", help="limits from in-process account shards")
    parser.add_argument("--ray-metrics", action="store_true", help="record metrics to a local Ray, as replicas do")
    parser.add_argument("--replica-gc", action="store_true", help="the garbage collector tuned as in a replica")
    parser.add_argument("--cold", action="store_true", help="the CPU caches overwritten before each call")
    parser.add_argument("--ladder", action="store_true", help="the API-key call's stages added one at a time")
    parser.add_argument("--node", action="store_true", help="the replica's own node client, to a loopback upstream")
    args = parser.parse_args(argv)
    if args.ray_metrics:
        with_ray_metrics()

    home = Path(tempfile.mkdtemp(prefix="gw-cpu-"))
    pg, redis = EmbeddedPostgres(home), EmbeddedRedis(home)
    upstream = const_upstream() if args.node else None
    try:
        database_url, redis_url = pg.start(), redis.start()
        figures = asyncio.run(
            measure(
                home,
                database_url,
                redis_url,
                args.calls,
                args.rounds,
                args.profile,
                args.sort,
                args.sliced,
                args.replica_gc,
                args.cold,
                args.ladder,
                None if upstream is None else upstream[1],
            )
        )
        if figures:
            print(format_ladder(figures) if args.ladder else format_figures(figures))
    finally:
        if upstream is not None:
            upstream[0].terminate()
            upstream[0].wait()
        redis.stop()
        pg.stop()
        shutil.rmtree(home, ignore_errors=True)


def const_upstream() -> tuple[subprocess.Popen[bytes], str]:
    """``bench.const_upstream`` in a process of its own on a free port; the process and its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.const_upstream", "--port", str(port)], stdout=subprocess.DEVNULL
    )
    asyncio.run(wait_for_port(LOOPBACK, port, 30.0))
    return proc, f"http://{LOOPBACK}:{port}/"


async def measure(
    home: Path,
    database_url: str,
    redis_url: str,
    calls: int,
    rounds: int,
    profile: str | None,
    sort: str,
    sliced: bool = False,
    replica_gc: bool = False,
    cold: bool = False,
    with_ladder: bool = False,
    node_url: str | None = None,
) -> dict[str, float]:
    """Each pipeline's median round, in CPU µs per call (per request of 100 items for the batch); nothing
    with ``profile``, which prints its cProfile instead. ``with_ladder``: the ladder's rows instead;
    ``node_url``: the ``--node`` rows instead."""
    gw, key, signer = await build(home, database_url, redis_url, sliced, node_url)
    thresholds = gc.get_threshold()
    if replica_gc:  # as gateway/runtime/ingress.py and Serve leave a replica's process
        gc.collect()
        gc.freeze()
        tune_gc(gw.settings.gc_young_threshold)
    evict = Evictor() if cold else None
    try:
        if with_ladder:
            return await climb(gw, key, calls, rounds, evict)
        if node_url is not None:
            return await through_the_node(gw, key, calls, rounds, evict)
        return await compare(gw, key, signer, calls, rounds, profile, sort, evict)
    finally:
        if replica_gc:
            gc.unfreeze()
            gc.set_threshold(*thresholds)
        await gw.shutdown()


async def compare(
    gw: GatewayApp,
    key: str,
    signer: WalletSigner,
    calls: int,
    rounds: int,
    profile: str | None,
    sort: str,
    evict: Callable[[], None] | None = None,
) -> dict[str, float]:
    unmetered = compose([error_boundary, ParseStage(gw.methods, gw.prices)], constant_forwarder(gw))
    metered = compose([error_boundary, *gw.rpc_stages()], constant_forwarder(gw))

    def plain() -> Call:
        return http_call("POST", "/", BASE_HEADERS, BODY, style=ReplyStyle.JSONRPC)

    def signed() -> Call:
        wallet = {name.lower(): value for name, value in signer.headers("POST", "/", BODY).items()}
        return http_call("POST", "/", {**BASE_HEADERS, **wallet}, BODY, style=ReplyStyle.JSONRPC)

    keyed, batch = partial(keyed_call, key, BODY), partial(keyed_call, key, BATCH_BODY)
    targets: dict[str, tuple[Handler, Callable[[], Call]]] = {
        "unmetered": (unmetered, plain),
        "metered-apikey": (metered, keyed),
        "metered-signed": (metered, signed),
        "asgi-unmetered": (over_asgi(unmetered), plain),
        "asgi-metered-apikey": (over_asgi(metered), keyed),
        "metered-batch100": (metered, batch),  # per request of 100 items; per item below
    }
    if profile:
        handler, make_call = targets[profile]
        profiler = cProfile.Profile()
        profiler.enable()
        await per_call_us(
            handler, make_call, max(calls // 50, 20) if profile == "metered-batch100" else calls, gw.meter.flush
        )
        profiler.disable()
        pstats.Stats(profiler).sort_stats(sort).print_stats(40)
        return {}
    by_round: dict[str, list[float]] = {name: [] for name in targets}
    for _ in range(rounds):
        for name, (handler, make_call) in targets.items():
            n = max(calls // 50, 20) if name == "metered-batch100" else calls  # a batch is ~50 calls' CPU
            by_round[name].append(await per_call_us(handler, make_call, n, gw.meter.flush, evict))
    return {name: median(figures) for name, figures in by_round.items()}


async def through_the_node(
    gw: GatewayApp, key: str, calls: int, rounds: int, evict: Callable[[], None] | None
) -> dict[str, float]:
    """The ``--node`` rows: the pipelines with the app's own forwarder, rounds alternating them."""
    targets: dict[str, tuple[Handler, Callable[[], Call]]] = {
        "node-unmetered": (
            compose([error_boundary, ParseStage(gw.methods, gw.prices)], gw.forwarder),
            lambda: http_call("POST", "/", BASE_HEADERS, BODY, style=ReplyStyle.JSONRPC),
        ),
        "node-metered-apikey": (
            compose([error_boundary, *gw.rpc_stages()], gw.forwarder),
            partial(keyed_call, key, BODY),
        ),
    }
    by_round: dict[str, list[float]] = {name: [] for name in targets}
    for _ in range(rounds):
        for name, (handler, make_call) in targets.items():
            by_round[name].append(await per_call_us(handler, make_call, calls, gw.meter.flush, evict))
    return {name: median(figures) for name, figures in by_round.items()}


async def climb(
    gw: GatewayApp, key: str, calls: int, rounds: int, evict: Callable[[], None] | None
) -> dict[str, float]:
    """The ladder's rows, rounds alternating them; each figure the median of its rounds."""
    keyed = partial(keyed_call, key, BODY)
    handlers = ladder(gw)
    by_round: dict[str, list[float]] = {name: [] for name in handlers}
    for _ in range(rounds):
        for name, handler in handlers.items():
            by_round[name].append(await per_call_us(handler, keyed, calls, gw.meter.flush, evict))
    return {name: median(figures) for name, figures in by_round.items()}


def format_ladder(figures: dict[str, float]) -> str:
    """Each row's µs a call and what it adds to the row it builds on (metering's and the floor's: the
    access rules' row's)."""
    lines, before = [], 0.0
    for name, us in figures.items():
        base = figures["+access rules"] if name == "+metering" else before
        lines.append(
            f"{name:<20} {us:8.1f} µs/call   adds {us - base:+7.1f} µs" if base else f"{name:<20} {us:8.1f} µs/call"
        )
        if name != "+floor meter":
            before = us
    return "\n".join(lines)


def format_figures(figures: dict[str, float]) -> str:
    lines = []
    for name, us in figures.items():
        if name == "metered-batch100":
            per_item = f"{us / BATCH:6.2f} µs/item  ({BATCH * 1e6 / us:,.0f} items/s of CPU)"
            lines.append(f"{name:<20} {us:8.1f} µs/request  {per_item}")
            continue
        base = figures[
            "asgi-unmetered"
            if name.startswith("asgi-")
            else "node-unmetered"
            if name.startswith("node-")
            else "unmetered"
        ]
        lines.append(f"{name:<20} {us:8.1f} µs/call   added {us - base:+7.1f} µs")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
