"""One tenant's filter churn against another tenant's slot latency, on one gRPC stream process.

    python -m bench.grpc_churn [--holders 16] [--holder-streams 3] [--keys 10000] [--churn-streams 8]
                               [--greedy 2] [--churn-keys 10000] [--rounds 3] [--phase 15]
                               [--server-code DIR] [--no-probe]

One process of the gateway's gRPC stream server (:class:`gateway.grpc.server.GrpcStreamServer`, as
``bench/grpc_stream.py`` starts it, following the devnode's geyser server: 400 ms slots, the replay log
on, so the node's whole feed upstream) serves three kinds of tenant, each an account of its own and each
a client process of its own:

- holders: ``--holders`` accounts, each with ``--holder-streams`` streams that together hold ``--keys``
  account keys (random: no update matches them), set once and kept;
- the victim: one stream of another account subscribed to slots; the time from each slot update's
  ``created_at`` (the devnode's tick) to its receipt is its latency;
- the churn tenant: one more account whose streams replace their ``accounts`` filter with
  ``--churn-keys`` fresh keys each time (the most a request may carry by default), each change followed
  by a ping whose pong says it was applied. ``--churn-streams`` streams send as fast as the server's
  per-stream rate allows (its burst at once, then a little under its rate:
  ``gateway.grpc.rules.FILTER_CHANGES_*``); ``--greedy`` streams send at twice the rate, are refused,
  and open again (the account's opens are limited too).

Rounds alternate a phase without churn and one with it (``--phase`` seconds each, every other round in
reverse order, ``--settle`` seconds between): the victim's p50 / p90 / p99 in each, their ratio within
each round and the median of those ratios, the server's CPU, and the churn tenant's changes sent,
acknowledged, refused and lost. ``--server-code DIR`` runs the server process from another checkout
(``git worktree add DIR <commit>``: its ``bench/grpc_processes.py gateway``), everything else from this one.
First (unless ``--no-probe``), one change's stages are timed in a process of their own with the server's
code beside the holders' keys (:func:`probe`): what a change costs the server, without sockets.
Loopback only; the whole run is bounded (about 40 s of set-up plus the phases).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import orjson

from bench._proc import LOOPBACK, REPO_ROOT, emit, quit_process, read_event, wait_for_port
from bench.grpc_stream import Options as StreamOptions
from bench.grpc_stream import Stores, cpu_seconds, customer, node_rpc, stores
from gateway.base.keys import service_key_addresses
from gateway.runtime.ports import free_port
from geyser_proto import geyser_pb2

#: The paced streams send at this share of the server's rate, so that arrival jitter is not a refusal.
PACE = 0.95
#: Distinct requests each churn stream cycles through (consecutive ones share no key).
VARIANTS = 6
#: How long a phase's end waits for the churn tenant's last changes to be answered.
DRAIN_S = 10.0
#: The start of a churn phase, when its streams spend their bursts, is reported apart from the rest.
BURST_S = 3.0


@dataclass(frozen=True)
class Options:
    holders: int = 16
    holder_streams: int = 3
    keys: int = 10_000  # per holder account, over its streams
    churn_streams: int = 8  # paced at the per-stream rate
    greedy: int = 2  # sending at twice it
    churn_keys: int = 10_000  # per change
    rounds: int = 3
    phase_s: float = 15.0
    settle_s: float = 2.0
    warmup_s: float = 5.0  # after set-up, before the first phase (the old fan-out rebuilt its index meanwhile)
    slot_ms: int = 400
    server_code: Path | None = None  # run the server from this checkout (None: this one)
    probe: bool = True  # first time one change's stages in a process of their own (:func:`probe`)
    database_url: str | None = None  # stores to use (tests); none: embedded ones in a temporary home
    redis_url: str | None = None


@dataclass(frozen=True)
class Phase:
    round: int
    churn: bool
    latencies: list[float]  # the victim's slot -> client, seconds
    at: list[float]  # when each arrived, seconds from the phase's start
    seconds: float
    server_cpu_s: float
    changes: dict[str, dict[str, int]]  # the churn tenant's, by "paced" / "greedy" (empty without churn)
    victim_errors: list[str]

    def quantile(self, q: float) -> float | None:
        return quantile(self.latencies, q)

    def during(self, start: float, end: float) -> list[float]:
        return [s for s, t in zip(self.latencies, self.at, strict=True) if start <= t < end]


@dataclass(frozen=True)
class Results:
    phases: list[Phase]
    held: dict[str, Any]  # the holders' streams and keys once set, and whether they stayed open
    load: tuple[tuple[float, float, float], tuple[float, float, float]]  # load averages at start and end
    probe: dict[str, float] | None = None  # ms per change by stage (median), see :func:`probe`


def quantile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the harness ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def gateway_server(upstream: str, st: Stores, secret: str, code: Path | None) -> Iterator[tuple[int, int]]:
    """The gateway's gRPC stream server (``bench/grpc_processes.py gateway``, from ``code`` or this
    checkout) on a free port, following ``upstream``; (port, pid). Its limits are the defaults but one:
    every client is on 127.0.0.1, so the per-address stream cap is raised (the per-account ones hold)."""
    with node_rpc() as rpc_url, _gateway_server(upstream, rpc_url, st, secret, code) as found:
        yield found


@contextlib.contextmanager
def _gateway_server(
    upstream: str, rpc_url: str, st: Stores, secret: str, code: Path | None
) -> Iterator[tuple[int, int]]:
    port = free_port()
    settings = {
        "home": str(st.home / "gateway"),
        **service_key_addresses(st.home / "gateway"),
        "database_url": st.database_url,
        "redis_url": st.redis_url,
        "upstream_rpc_url": rpc_url,  # the pool judges the node by its JSON-RPC (bench.grpc_stream.node_rpc)
        "upstream_grpc_url": f"http://{upstream}",
        "api_key_secret": secret,
        "grpc_port": port,
        "grpc_max_streams_per_address": 10_000,
    }
    root = (code or REPO_ROOT).resolve()
    env = {**os.environ, "PYTHONPATH": str(root)}
    args = [sys.executable, "-m", "bench.grpc_processes", "gateway", "--settings", orjson.dumps(settings).decode()]
    proc = subprocess.Popen(args, cwd=root, env=env, stdout=subprocess.DEVNULL)
    try:
        asyncio.run(wait_for_port(LOOPBACK, port, 60))
        yield port, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def role_process(*args: str, ready_s: float = 120.0) -> AsyncIterator[tuple[asyncio.subprocess.Process, Any]]:
    """``python -m bench.grpc_churn role ...`` until its ``ready`` event (yielded with it)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.grpc_churn",
        "role",
        *args,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=2**24,
    )
    assert proc.stdout is not None
    try:
        ready = await read_event(proc.stdout, "ready", ready_s)
        yield proc, ready
    finally:
        await quit_process(proc, 15)


async def ask(proc: asyncio.subprocess.Process, command: str, answer: str, timeout_s: float = 30) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(command.encode() + b"\n")
    await proc.stdin.drain()
    return await read_event(proc.stdout, answer, timeout_s)


async def phases(port: int, pid: int, tokens: dict[str, Any], options: Options) -> tuple[list[Phase], dict[str, Any]]:
    holders_args = ["holders", "--port", str(port), "--tokens", ",".join(tokens["holders"])]
    holders_args += ["--streams", str(options.holder_streams), "--keys", str(options.keys)]
    churn_args = ["churn", "--port", str(port), "--token", tokens["churn"], "--keys", str(options.churn_keys)]
    churn_args += ["--paced", str(options.churn_streams), "--greedy", str(options.greedy)]
    out: list[Phase] = []
    async with (
        role_process(*holders_args) as (holders, held),
        role_process(*churn_args) as (churner, churning_streams),
        role_process("victim", "--port", str(port), "--token", tokens["victim"]) as (victim, _),
    ):
        print(f"holders hold {held['keys']:,} keys in {held['streams']} streams; measuring", flush=True)
        await asyncio.sleep(options.warmup_s)
        for round_no in range(options.rounds):
            for churning in (False, True) if round_no % 2 == 0 else (True, False):
                if churning:
                    await ask(churner, "start", "started")
                await ask(victim, "start", "started")
                cpu0, t0 = cpu_seconds(pid), time.perf_counter()
                await asyncio.sleep(options.phase_s)
                cpu1, seconds = cpu_seconds(pid), time.perf_counter() - t0
                done = await ask(victim, "stop", "done")
                changes = (await ask(churner, "stop", "done", DRAIN_S + 30))["changes"] if churning else {}
                latencies, at = done["latencies"], done["at"]
                phase = Phase(round_no, churning, latencies, at, seconds, cpu1 - cpu0, changes, done["errors"])
                out.append(phase)
                print(format_phase(phase), flush=True)
                await asyncio.sleep(options.settle_s)
        status = await ask(holders, "status", "status")
    return out, {**held, "open_at_end": status["open"], "ended": status["errors"], "churn": churning_streams["streams"]}


def run(options: Options) -> Results:
    """Start the stores, the devnode and the server; hold the keys; measure the alternating phases."""
    from gateway.runtime.devnode_proc import DevnodeProcess

    load0 = os.getloadavg()
    costs = probe_costs(options) if options.probe else None
    secret = os.urandom(32).hex()
    with stores(StreamOptions(database_url=options.database_url, redis_url=options.redis_url)) as st:
        tokens: dict[str, Any] = {
            "holders": [customer(st, secret) for _ in range(options.holders)],
            "churn": customer(st, secret),
            "victim": customer(st, secret),
        }
        grpc_port = free_port()
        node = DevnodeProcess(
            st.home / "devnode", free_port(), free_port(), options.slot_ms, 54_000, False, grpc_port=grpc_port
        )
        node.start()
        try:
            with gateway_server(f"{LOOPBACK}:{grpc_port}", st, secret, options.server_code) as (port, pid):
                measured, held = asyncio.run(phases(port, pid, tokens, options))
        finally:
            node.stop()
    return Results(measured, held, (load0, os.getloadavg()), costs)


# -- the report ----------------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1000 * value:.1f}"


def spread(samples: list[float]) -> str:
    return " / ".join(_ms(quantile(samples, q)) for q in (0.5, 0.9, 0.99))


def total(changes: dict[str, dict[str, int]], what: str) -> int:
    return sum(kind.get(what, 0) for kind in changes.values())


def format_phase(p: Phase) -> str:
    line = f"round {p.round + 1}, {'with' if p.churn else 'without'} churn: victim p50 / p90 / p99 "
    line += f"{spread(p.latencies)} ms ({len(p.latencies)} slot updates), "
    line += f"server CPU {100 * p.server_cpu_s / p.seconds:.0f}%"
    if p.churn:
        line += f"; changes sent {total(p.changes, 'sent')}, acknowledged {total(p.changes, 'accepted')}"
        line += f", refused {total(p.changes, 'refused')}"
    return line


def median_of(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def ratios(results: list[Phase], q: float) -> list[float]:
    """Per round, the victim's quantile with churn over without."""
    out = []
    for round_no in sorted({p.round for p in results}):
        mine = {p.churn: p.quantile(q) for p in results if p.round == round_no}
        with_churn, without = mine.get(True), mine.get(False)
        if with_churn is not None and without:
            out.append(with_churn / without)
    return out


def format_results(results: Results, options: Options) -> str:
    held = results.held
    code = str(options.server_code) if options.server_code else "this checkout"
    lines = [
        f"one gRPC stream process ({code}); holders: {options.holders} accounts, {held['streams']} streams, "
        f"{held['keys']:,} account keys (still open at the end: {held['open_at_end']}); victim: 1 slots stream; "
        f"churn tenant: {options.churn_streams} paced + {options.greedy} greedy streams, "
        f"{options.churn_keys:,} fresh keys a change",
        "load average (1, 5, 15 min) at start {:.2f} {:.2f} {:.2f}, at end {:.2f} {:.2f} {:.2f}".format(
            *results.load[0], *results.load[1]
        ),
        "",
        *(
            [
                f"one change of {options.churn_keys:,} keys beside the holders' keys, in process (median of 20): "
                + ", ".join(f"{stage} {ms:.2f} ms" for stage, ms in results.probe.items()),
                "",
            ]
            if results.probe
            else []
        ),
        "| round | churn | slot updates | victim p50 / p90 / p99 ms | server CPU | changes sent | acknowledged "
        "| refused | lost | opens (refused) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in results.phases:
        cpu = f"{100 * p.server_cpu_s / p.seconds:.0f}%"
        if p.churn:
            counts = " | ".join(str(total(p.changes, what)) for what in ("sent", "accepted", "refused", "lost"))
            counts += f" | {total(p.changes, 'opens')} ({total(p.changes, 'open_refused')})"
        else:
            counts = "- | - | - | - | -"
        lines.append(
            f"| {p.round + 1} | {'with' if p.churn else 'without'} | {len(p.latencies)} | {spread(p.latencies)} "
            f"| {cpu} | {counts} |"
        )
    lines.append("")
    for churning in (False, True):
        mine = [p for p in results.phases if p.churn is churning]
        medians = [_ms(median_of(p.quantile(q) for p in mine)) for q in (0.5, 0.9, 0.99)]
        pooled = spread([s for p in mine for s in p.latencies])
        lines.append(
            f"{'with' if churning else 'without'} churn: victim p50 / p90 / p99 {' / '.join(medians)} ms "
            f"(median of rounds); all rounds pooled {pooled} ms"
        )
    for churning in (False, True):
        mine = [p for p in results.phases if p.churn is churning]
        first = [s for p in mine for s in p.during(0, BURST_S)]
        rest = [s for p in mine for s in p.during(BURST_S, float("inf"))]
        lines.append(
            f"{'with' if churning else 'without'} churn, pooled: the phases' first {BURST_S:g} s {spread(first)} ms "
            f"({len(first)} slot updates), the rest {spread(rest)} ms ({len(rest)})"
        )
    parts = []
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        r = ratios(results.phases, q)
        if r:
            parts.append(f"{name} {statistics.median(r):.2f} ({', '.join(f'{x:.2f}' for x in r)})")
    lines.append("with / without churn, median of the rounds' ratios (per round): " + "; ".join(parts))
    churned = [p for p in results.phases if p.churn]
    seconds = sum(p.seconds for p in churned)
    seconds = max(seconds, 1e-9)
    for kind in ("paced", "greedy"):
        tally = {w: sum(p.changes.get(kind, {}).get(w, 0) for p in churned) for w in _TALLY}
        if tally["opens"] == 0 and tally["sent"] == 0:
            continue
        lines.append(
            f"churn tenant, {kind} streams: {tally['sent']} changes sent ({tally['sent'] / seconds:.1f}/s), "
            f"{tally['accepted']} acknowledged ({tally['accepted'] / seconds:.1f}/s), {tally['refused']} refused "
            f"(stream closed), {tally['lost']} lost after a refusal, {tally['unanswered']} unanswered at the "
            f"phase's end; {tally['opens']} opens, {tally['open_refused']} refused"
        )
    reasons: dict[str, int] = {}
    for p in churned:
        for per_kind in p.changes.values():
            for reason, n in per_kind.items():
                if reason.startswith("why:"):
                    reasons[reason[4:]] = reasons.get(reason[4:], 0) + n
    if reasons:
        lines.append("refusals: " + "; ".join(f"{n} x {why}" for why, n in sorted(reasons.items())))
    if any(p.victim_errors for p in results.phases):
        lines.append(f"the victim's stream ended: {[e for p in results.phases for e in p.victim_errors]}")
    return "\n".join(lines)


# -- the client processes (``role holders`` / ``role churn``) -----------------------------------------

_SUBSCRIBE = "/geyser.Geyser/Subscribe"
_TALLY = ("sent", "accepted", "refused", "lost", "unanswered", "opens", "open_refused")


def random_keys(count: int) -> list[str]:
    from solders.pubkey import Pubkey

    return [str(Pubkey(os.urandom(32))) for _ in range(count)]


def accounts_request(keys: list[str]) -> bytes:
    accounts = geyser_pb2.SubscribeRequestFilterAccounts(account=keys)
    return geyser_pb2.SubscribeRequest(accounts={"keys": accounts}).SerializeToString()


def ping_request(ping_id: int) -> bytes:
    return geyser_pb2.SubscribeRequest(ping=geyser_pb2.SubscribeRequestPing(id=ping_id)).SerializeToString()


def _subscribe(channel: grpc.aio.Channel) -> Any:
    """Subscribe with requests already serialized (built once, not per send)."""
    return channel.stream_stream(_SUBSCRIBE, request_serializer=lambda raw: raw)


def _why(exc: grpc.aio.AioRpcError) -> str:
    details = exc.details() or ""
    for marker in ("filter change rate", "filter key rate", "filter budget", "stream open rate", "stream limit"):
        if marker in details:
            return marker
    return f"{exc.code().name}: {details[:80]}"


@dataclass
class Churner:
    """One churn stream: its requests, its pace, what became of its changes."""

    variants: list[bytes]
    rate: Any  # gateway.grpc.rules.ChangeRate (imported where used: --server-code may predate it)
    answered: asyncio.Event  # shared: the phase's end waits on it for the last answers
    tally: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_TALLY, 0))
    outstanding: set[int] = field(default_factory=set)
    seq: int = 0
    opened: asyncio.Event = field(default_factory=asyncio.Event)  # once its first open was answered

    def reset(self) -> None:
        self.tally = dict.fromkeys(_TALLY, 0)


async def _churn_stream(channel: grpc.aio.Channel, token: str, me: Churner, running: asyncio.Event) -> None:
    """Open, change the filters whenever the pace allows while ``running``; open again when refused."""
    metadata = (("x-token", token),)
    while True:
        if me.opened.is_set():  # the first open is at set-up; the later ones (after a refusal) while churning
            await running.wait()
        call = _subscribe(channel)(metadata=metadata)
        opened = asyncio.get_running_loop().create_future()

        async def read(call: Any = call, opened: asyncio.Future[None] = opened) -> None:
            async for raw in call:
                update = geyser_pb2.SubscribeUpdate.FromString(raw)
                if update.WhichOneof("update_oneof") == "pong":
                    if update.pong.id == 0 and not opened.done():
                        opened.set_result(None)
                    elif update.pong.id in me.outstanding:
                        me.outstanding.discard(update.pong.id)
                        me.tally["accepted"] += 1
                        me.answered.set()

        reader = asyncio.create_task(read())
        try:
            await call.write(me.variants[0])
            await call.write(ping_request(0))
            me.rate.take(time.monotonic())  # the opening request is a change too
            await asyncio.wait({reader, opened}, return_when=asyncio.FIRST_COMPLETED)
            if not opened.done():
                await reader  # raises the refusal
            me.tally["opens"] += 1
            me.opened.set()
            n = 0
            while not reader.done():
                await running.wait()
                if not me.rate.take(time.monotonic()):
                    await asyncio.sleep(max(0.001, (1 - me.rate.tokens) / me.rate.per_s))
                    continue
                n += 1
                me.seq += 1
                me.outstanding.add(me.seq)
                me.tally["sent"] += 1
                try:
                    await call.write(me.variants[n % len(me.variants)])
                    await call.write(ping_request(me.seq))
                except grpc.aio.AioRpcError:
                    raise
                except Exception:  # the call ended meanwhile: the reader has its status
                    break
            await reader
        except grpc.aio.AioRpcError as exc:
            why = _why(exc)
            if not opened.done():
                me.tally["open_refused"] += 1
                me.opened.set()
            else:
                me.tally["refused"] += 1
                me.tally["lost"] += max(0, len(me.outstanding) - 1)
            me.tally[f"why:{why}"] = me.tally.get(f"why:{why}", 0) + 1
            me.outstanding.clear()
            me.answered.set()
            await asyncio.sleep(1.0)  # then open again
        finally:
            reader.cancel()
            call.cancel()
            me.rate = type(me.rate)(me.rate.burst, me.rate.per_s)  # a new stream has a new bucket


async def churn(args: argparse.Namespace) -> None:
    """``--paced`` + ``--greedy`` streams of one account; ``start`` churns, ``stop`` answers the counts."""
    from gateway.grpc.rules import FILTER_CHANGES_BURST, FILTER_CHANGES_PER_S, ChangeRate

    pool_size = 5 * args.keys + 1  # consecutive windows of ``keys`` share no key; none repeats within a stream
    pool = random_keys(pool_size)

    def window(start: int) -> list[str]:
        return [pool[(start + i) % pool_size] for i in range(args.keys)]

    answered = asyncio.Event()  # set at each answer or refusal
    streams: dict[str, list[Churner]] = {"paced": [], "greedy": []}
    for n in range(args.paced + args.greedy):
        kind, per_s = ("paced", PACE * FILTER_CHANGES_PER_S) if n < args.paced else ("greedy", 2 * FILTER_CHANGES_PER_S)
        variants = [accounts_request(window(v * args.keys + 97 * n)) for v in range(VARIANTS)]
        streams[kind].append(Churner(variants, ChangeRate(FILTER_CHANGES_BURST, per_s), answered))
    running = asyncio.Event()
    channel = grpc.aio.insecure_channel(f"{LOOPBACK}:{args.port}")
    everyone = [me for group in streams.values() for me in group]
    tasks = [asyncio.create_task(_churn_stream(channel, args.token, me, running)) for me in everyone]
    await asyncio.gather(*(me.opened.wait() for me in everyone))
    emit({"event": "ready", "streams": sum(me.tally["opens"] for me in everyone)})
    loop = asyncio.get_running_loop()
    while (command := (await loop.run_in_executor(None, sys.stdin.readline)).strip()) not in ("quit", ""):
        if command == "start":
            for me in everyone:
                me.reset()
            running.set()
            emit({"event": "started"})
        elif command == "stop":
            running.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_S):
                    while any(me.outstanding for me in everyone):
                        answered.clear()
                        await answered.wait()
            for me in everyone:
                me.tally["unanswered"] = len(me.outstanding)
                me.outstanding.clear()  # a late answer counts in no phase
            changes: dict[str, dict[str, int]] = {}
            for kind, group in streams.items():
                changes[kind] = {}
                for me in group:
                    for what, n in me.tally.items():
                        changes[kind][what] = changes[kind].get(what, 0) + n
            emit({"event": "done", "changes": changes})
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await channel.close()


async def holders(args: argparse.Namespace) -> None:
    """Each account's ``--streams`` streams hold ``--keys`` keys between them; ``status`` says how many are open."""
    tokens = [t for t in args.tokens.split(",") if t]
    per_stream = args.keys // args.streams
    channel = grpc.aio.insecure_channel(f"{LOOPBACK}:{args.port}")
    errors: list[str] = []
    open_streams = 0

    async def hold(token: str, ready: asyncio.Future[None]) -> None:
        nonlocal open_streams
        call = _subscribe(channel)(metadata=(("x-token", token),))
        try:
            await call.write(accounts_request(random_keys(per_stream)))
            await call.write(ping_request(1))
            async for raw in call:
                update = geyser_pb2.SubscribeUpdate.FromString(raw)
                if update.WhichOneof("update_oneof") == "pong" and not ready.done():
                    open_streams += 1
                    ready.set_result(None)
        except grpc.aio.AioRpcError as exc:
            errors.append(f"{exc.code().name}: {(exc.details() or '')[:120]}")
        finally:
            if ready.done():
                open_streams -= 1
            else:
                ready.set_result(None)

    loop = asyncio.get_running_loop()
    readies = [loop.create_future() for _ in range(len(tokens) * args.streams)]
    tasks = [asyncio.create_task(hold(tokens[n // args.streams], ready)) for n, ready in enumerate(readies)]
    await asyncio.gather(*readies)
    emit({"event": "ready", "streams": open_streams, "keys": open_streams * per_stream, "errors": errors})
    while (command := (await loop.run_in_executor(None, sys.stdin.readline)).strip()) not in ("quit", ""):
        if command == "status":
            emit({"event": "status", "open": open_streams, "errors": errors})
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await channel.close()


async def victim(args: argparse.Namespace) -> None:
    """One stream subscribed to slots; ``start`` clears, ``stop`` answers each slot update's latency and arrival."""
    channel = grpc.aio.insecure_channel(f"{LOOPBACK}:{args.port}")
    call = _subscribe(channel)(metadata=(("x-token", args.token),))
    slots = geyser_pb2.SubscribeRequest(slots={"slots": geyser_pb2.SubscribeRequestFilterSlots()})
    latencies: list[float] = []
    at: list[float] = []
    errors: list[str] = []
    started = time.time()
    live = asyncio.Event()

    async def read() -> None:
        try:
            async for raw in call:
                now = time.time()
                update = geyser_pb2.SubscribeUpdate.FromString(raw)
                if update.WhichOneof("update_oneof") == "slot" and update.HasField("created_at"):
                    live.set()
                    latencies.append(now - update.created_at.ToNanoseconds() / 1e9)
                    at.append(now - started)
        except grpc.aio.AioRpcError as exc:
            errors.append(f"{exc.code().name}: {(exc.details() or '')[:120]}")
        finally:
            live.set()

    await call.write(slots.SerializeToString())
    reader = asyncio.create_task(read())
    await live.wait()  # the stream is live: a slot came
    emit({"event": "ready", "errors": errors})
    loop = asyncio.get_running_loop()
    while (command := (await loop.run_in_executor(None, sys.stdin.readline)).strip()) not in ("quit", ""):
        if command == "start":
            latencies.clear()
            at.clear()
            started = time.time()
            emit({"event": "started"})
        elif command == "stop":
            emit({"event": "done", "latencies": latencies, "at": at, "errors": errors})
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    await channel.close()


def probe(args: argparse.Namespace) -> None:
    """The server's work for one churn change, in this process, with whatever code is on the path (no
    socket, no loop): parse, compile, the filter budget's claim, and the fan-out's replace followed by the
    next slot update's publish (the old fan-out rebuilt its indexes there), beside the holders' keys."""
    from gateway.grpc.budget import FilterBudget
    from gateway.grpc.rules import StreamLimits
    from geyser_proto.fanout import Fanout
    from geyser_proto.filters import compile_request

    try:
        budget = FilterBudget(StreamLimits(), whole_feed=True)  # type: ignore[call-arg,unused-ignore]
    except TypeError:  # before the budget knew of the replay log
        budget = FilterBudget(StreamLimits())

    class Drop:
        def deliver(self, data: bytes) -> None:
            pass

    fanout = Fanout()
    per_stream = args.keys // args.streams
    for account in range(args.holders):
        for _ in range(args.streams):
            member = fanout.attach(Drop())
            filters = compile_request(geyser_pb2.SubscribeRequest.FromString(accounts_request(random_keys(per_stream))))
            assert budget.claim(member, f"holder-{account}", filters) is None
            fanout.replace(member, filters)
    slots = geyser_pb2.SubscribeRequest(slots={"slots": geyser_pb2.SubscribeRequestFilterSlots()})
    fanout.attach(Drop(), compile_request(slots))
    churner = fanout.attach(Drop())
    pool = random_keys(2 * args.churn_keys)
    raws = [accounts_request(pool[::2][: args.churn_keys]), accounts_request(pool[1::2][: args.churn_keys])]
    stages: dict[str, list[float]] = {"parse": [], "compile": [], "budget": [], "fan-out": []}
    for n in range(args.changes):
        t0 = time.perf_counter()
        request = geyser_pb2.SubscribeRequest.FromString(raws[n % 2])
        t1 = time.perf_counter()
        filters = compile_request(request)
        t2 = time.perf_counter()
        assert budget.claim(churner, "churn", filters) is None
        t3 = time.perf_counter()
        fanout.replace(churner, filters)
        fanout.publish(geyser_pb2.SubscribeUpdate(slot=geyser_pb2.SubscribeUpdateSlot(slot=n + 1)))
        t4 = time.perf_counter()
        for stage, seconds in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            stages[stage].append(seconds)
    emit({"event": "probe", "ms": {stage: 1000 * statistics.median(v) for stage, v in stages.items()}})


def probe_costs(options: Options) -> dict[str, float]:
    """:func:`probe` in a process of its own, with the server's code (``--server-code`` or this checkout)."""
    root = (options.server_code or REPO_ROOT).resolve()
    args = [sys.executable, str(Path(__file__).resolve()), "role", "probe", "--holders", str(options.holders)]
    args += ["--streams", str(options.holder_streams), "--keys", str(options.keys)]
    args += ["--churn-keys", str(options.churn_keys), "--changes", "20"]
    done = subprocess.run(
        args, cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, check=True, timeout=300
    )
    for line in done.stdout.splitlines():
        if line.startswith(b"{"):
            event = orjson.loads(line)
            if event.get("event") == "probe":
                return dict(event["ms"])
    raise RuntimeError(f"the probe answered nothing: {done.stderr[-2000:]!r}")


def role(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.grpc_churn role")
    sub = parser.add_subparsers(dest="role", required=True)
    hold = sub.add_parser("holders")
    hold.add_argument("--port", type=int, required=True)
    hold.add_argument("--tokens", required=True)
    hold.add_argument("--streams", type=int, required=True)
    hold.add_argument("--keys", type=int, required=True)
    ch = sub.add_parser("churn")
    ch.add_argument("--port", type=int, required=True)
    ch.add_argument("--token", required=True)
    ch.add_argument("--keys", type=int, required=True)
    ch.add_argument("--paced", type=int, required=True)
    ch.add_argument("--greedy", type=int, required=True)
    pr = sub.add_parser("probe")
    pr.add_argument("--holders", type=int, required=True)
    pr.add_argument("--streams", type=int, required=True)
    pr.add_argument("--keys", type=int, required=True)
    pr.add_argument("--churn-keys", type=int, required=True)
    pr.add_argument("--changes", type=int, required=True)
    vi = sub.add_parser("victim")
    vi.add_argument("--port", type=int, required=True)
    vi.add_argument("--token", required=True)
    args = parser.parse_args(argv)
    if args.role == "probe":
        probe(args)
        return
    roles = {"holders": holders, "churn": churn, "victim": victim}
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(roles[args.role](args))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["role"]:
        role(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="python -m bench.grpc_churn", description=__doc__.splitlines()[0])
    parser.add_argument("--holders", type=int, default=16, help="accounts holding keys")
    parser.add_argument("--holder-streams", type=int, default=3, help="streams of each holder account")
    parser.add_argument("--keys", type=int, default=10_000, help="keys each holder account holds")
    parser.add_argument("--churn-streams", type=int, default=8, help="churn streams paced at the allowed rate")
    parser.add_argument("--greedy", type=int, default=2, help="churn streams sending at twice the allowed rate")
    parser.add_argument("--churn-keys", type=int, default=10_000, help="fresh keys in each change")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--phase", type=float, default=15.0, help="seconds of each phase")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds between phases")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds after set-up before the first phase")
    parser.add_argument("--server-code", type=Path, default=None, help="run the server from this checkout")
    parser.add_argument("--no-probe", action="store_true", help="skip timing one change's stages in process")
    args = parser.parse_args(argv)
    options = Options(
        args.holders,
        args.holder_streams,
        args.keys,
        args.churn_streams,
        args.greedy,
        args.churn_keys,
        args.rounds,
        args.phase,
        args.settle,
        args.warmup,
        server_code=args.server_code,
        probe=not args.no_probe,
    )
    print(format_results(run(options), options))


if __name__ == "__main__":
    main()
