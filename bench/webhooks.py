"""Webhook deliveries per second with one dispatcher, against a plain aiohttp client posting the same
signed bodies, and how long a backlog takes to drain after a receiver outage.

    python -m bench.webhooks [--jobs 20000] [--webhooks 16] [--concurrency 64] [--per-subscription 16]
                             [--rounds 3] [--backlog 10000] [--profile]

On an embedded PostgreSQL in a temporary directory. The receiver is a plain aiohttp server (uvloop) in
a process of its own on 127.0.0.1, answering 200 ``ok`` to every POST after reading the body; both
senders below run in this process, on asyncio's default loop and with the collector tuned as the
dispatcher actor's (``gc_young_threshold``, start-up's objects frozen), each with ``--concurrency``
posts in flight over one keep-alive session:

- ``dispatcher``: :class:`gateway.webhooks.dispatcher.Dispatcher` delivering ``--jobs`` jobs spread
  over ``--webhooks`` subscriptions: claims from PostgreSQL, signing, the post, the outcome written
  back (``webhook_allow_private`` on: loopback receiver, no SSRF guard on the connector);
- ``plain``: aiohttp alone posting the same number of bodies built and signed the same way (the
  body, the four headers), nothing read from or written to a database.

The rate is jobs over the time from the start until the last one is recorded (dispatcher) or answered
(plain); the CPU column is this process's CPU per delivery over the same window, and PostgreSQL's (all
its processes) is printed beside the dispatcher's (the receiver's is in neither). Rounds alternate
which goes first; the ratio's median over the rounds is printed with each round's.

Then the outage: the receiver is stopped, ``--backlog`` jobs are queued and a dispatcher fails each one
once (connection refused); then, as if the outage had outlasted their retry delays, all of them are
made due, the receiver comes back, and the drain is timed from then until every job is delivered by a
new dispatcher. (With the service's schedule a job that failed is due again 5 to 6 s later, then 30 s,
2 min...: a shorter outage adds up to that wait to its jobs' delivery.)

``--profile`` runs cProfile over one more dispatcher run and prints where its time went; ``--python-gc``
keeps Python's own collector settings (the comparison for the actor's tuning). Each run's CPU figure
says how much of it was the collector's.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import os
import pstats
import secrets
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import asyncpg
import orjson
import psutil

from bench._proc import LOOPBACK, ServerProcess, process_cpu_s, spawn_server
from gateway.base.config import ServiceSettings
from gateway.base.process_gc import freeze_startup, tune_gc
from gateway.core.credits import CreditPolicy, DepositCredit
from gateway.credits.store import credit_deposit_on
from gateway.runtime.embedded import EmbeddedPostgres
from gateway.runtime.ports import free_port
from gateway.storage.migrate import migrate_url
from gateway.webhooks.dispatcher import USER_AGENT, DispatchConfig, Dispatcher, RetryPolicy, fixed_delays
from gateway.webhooks.rules import (
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WEBHOOK_ID_HEADER,
    delivery_body,
    event_id,
    new_secret,
    retry_delay_s,
    signature,
)

#: ``--price``'s account is funded at one credit per base unit, with no minimum and a day to spend them.
BENCH_CREDITS = CreditPolicy(credits_per_usdc=10**6, credit_expiry_seconds=86_400, minimum_base_units=1)

#: What one delivery carries: a deposit.credited event as the sources write it (about 200 bytes).
PAYLOAD = {
    "signature": "5" * 88,
    "amount_base_units": 1_000_000,
    "credits_added": 100_000,
    "bonus_credits": 0,
    "new_balance": 250_000,
}
EVENT = "deposit.credited"
TARGETS = ("dispatcher", "plain")


# -- the receiver (the ``receiver`` subcommand) -----------------------------------------------------


def receiver_main(port: int) -> None:
    import uvloop
    from aiohttp import web

    count = 0

    async def hook(request: web.Request) -> web.Response:
        nonlocal count
        await request.read()
        count += 1
        return web.Response(text="ok")

    async def counted(request: web.Request) -> web.Response:
        return web.Response(text=str(count))

    app = web.Application()
    app.router.add_post("/hook", hook)
    app.router.add_get("/count", counted)
    uvloop.install()
    web.run_app(app, host=LOOPBACK, port=port, access_log=None, print=None, backlog=4096)


@asynccontextmanager
async def receiver(port: int) -> AsyncIterator[ServerProcess]:
    async with spawn_server("receiver", "bench.webhooks", ["receiver", "--port", str(port)], port, path="/hook") as rec:
        yield rec


async def received(http: aiohttp.ClientSession, rec: ServerProcess) -> int:
    async with http.get(rec.url.replace("/hook", "/count")) as resp:
        return int(await resp.text())


# -- the two senders ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    target: str
    count: int
    seconds: float
    cpu_s: float
    db_cpu_s: float = 0.0
    gc_s: float = 0.0  # of ``cpu_s``, Python's cyclic collector's

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    @property
    def cpu_us(self) -> float:
        return self.cpu_s / self.count * 1e6

    @property
    def db_cpu_us(self) -> float:
        return self.db_cpu_s / self.count * 1e6

    @property
    def gc_us(self) -> float:
        return self.gc_s / self.count * 1e6


class CollectorTime:
    """The CPU time Python's cyclic collector has taken in this process since it was installed."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self._started = 0.0
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.total_s += time.process_time() - self._started


COLLECTOR = CollectorTime()


#: The embedded PostgreSQL's postmaster (its CPU and its backends' is the database's share).
POSTMASTER: list[int] = []


def db_cpu_s() -> float:
    if not POSTMASTER:
        return 0.0
    root = psutil.Process(POSTMASTER[0])
    return process_cpu_s([root.pid, *(child.pid for child in root.children(recursive=True))])


async def subscriptions(pool: asyncpg.Pool, url: str, count: int, credits: int = 0) -> list[int]:
    """``count`` subscriptions of a new account holding ``credits`` (a deposit, as a paid account's)."""
    pubkey = f"bench-{secrets.token_hex(8)}"
    if credits:
        deposit = DepositCredit(f"bench-{secrets.token_hex(16)}", pubkey, credits)
        async with pool.acquire() as conn:
            assert (await credit_deposit_on(conn, deposit, BENCH_CREDITS)).credited
    else:
        await pool.execute("INSERT INTO accounts (pubkey) VALUES ($1)", pubkey)
    rows = await pool.fetch(
        """INSERT INTO webhooks (pubkey, url, filter_type, lifecycle_events, secret)
           SELECT $1, $2, 'lifecycle', '{deposit.credited}', $3 FROM generate_series(1, $4) RETURNING id""",
        pubkey,
        url,
        new_secret(),
        count,
    )
    return [int(r["id"]) for r in rows]


async def enqueue(pool: asyncpg.Pool, hooks: list[int], count: int, price: int = 0) -> None:
    """``count`` jobs spread over ``hooks``, each charged ``price`` credits before its attempt (0: free)."""
    await pool.execute(
        """INSERT INTO delivery_jobs (webhook_id, event_type, payload, price)
           SELECT ($1::bigint[])[1 + n % cardinality($1::bigint[])], $2, $3::jsonb, $5
           FROM generate_series(1, $4) n""",
        hooks,
        EVENT,
        orjson.dumps(PAYLOAD).decode(),
        count,
        price,
    )


def config(args: argparse.Namespace) -> DispatchConfig:
    return DispatchConfig(
        concurrency=args.concurrency,
        per_webhook=args.per_subscription,
        allow_private=True,
        poll_s=0.05,
    )


async def dispatch(pool: asyncpg.Pool, args: argparse.Namespace, count: int, retry: RetryPolicy = retry_delay_s) -> Run:
    """Start a dispatcher and time it until ``count`` jobs are recorded delivered."""
    dispatcher = Dispatcher(pool, f"bench-{secrets.token_hex(4)}", config(args), retry=retry)
    cpu0, db0, gc0, started = time.process_time(), db_cpu_s(), COLLECTOR.total_s, time.perf_counter()
    async with running(dispatcher):
        await until(lambda: dispatcher.stats.delivered >= count)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu0
        return Run("dispatcher", count, elapsed, cpu, db_cpu_s() - db0, COLLECTOR.total_s - gc0)


async def plain(url: str, args: argparse.Namespace, count: int) -> Run:
    """aiohttp alone: the same bodies and headers, built and signed per post, ``--concurrency`` at once."""
    secret, created = new_secret(), datetime.now(UTC)
    jobs = iter(range(1, count + 1))
    headers = {"User-Agent": USER_AGENT}
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=args.concurrency), headers=headers, timeout=timeout
    ) as http:

        async def worker() -> None:
            for job_id in jobs:
                body = delivery_body(1, job_id, EVENT, orjson.loads(orjson.dumps(PAYLOAD)), created)
                event, now = event_id(1, job_id), int(time.time())
                signed = {
                    SIGNATURE_HEADER: signature(secret, event, now, body),
                    TIMESTAMP_HEADER: str(now),
                    EVENT_ID_HEADER: event,
                    WEBHOOK_ID_HEADER: "1",
                    "Content-Type": "application/json",
                }
                async with http.post(url, data=body, headers=signed, allow_redirects=False) as resp:
                    await resp.content.read(512)
                    if resp.status != 200:
                        raise RuntimeError(f"the receiver answered {resp.status}")

        cpu0, gc0, started = time.process_time(), COLLECTOR.total_s, time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu0
        return Run("plain", count, elapsed, cpu, gc_s=COLLECTOR.total_s - gc0)


# -- the run -----------------------------------------------------------------------------------------


async def rounds(pool: asyncpg.Pool, args: argparse.Namespace) -> list[dict[str, Run]]:
    port = free_port()
    results: list[dict[str, Run]] = []
    async with receiver(port) as rec, aiohttp.ClientSession() as http:
        paid = args.price * args.jobs * (args.rounds + int(args.profile))
        hooks = await subscriptions(pool, rec.url, args.webhooks, paid)
        if not args.python_gc:
            freeze_startup()  # set up, as the actor is once its pool is
        for n in range(args.rounds):
            order = TARGETS if n % 2 == 0 else TARGETS[::-1]
            runs: dict[str, Run] = {}
            for target in order:
                before = await received(http, rec)
                if target == "dispatcher":
                    await enqueue(pool, hooks, args.jobs, args.price)
                    runs[target] = await dispatch(pool, args, args.jobs)
                else:
                    runs[target] = await plain(rec.url, args, args.jobs)
                got = await received(http, rec) - before
                if got != args.jobs:
                    raise RuntimeError(f"{target}: the receiver got {got} posts for {args.jobs} jobs")
            results.append(runs)
            print(round_line(n + 1, runs), flush=True)
        if args.profile:
            await enqueue(pool, hooks, args.jobs, args.price)
            profile = cProfile.Profile()
            profile.enable()
            await dispatch(pool, args, args.jobs)
            profile.disable()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(30)
            print(text.getvalue())
    return results


def round_line(n: int, runs: dict[str, Run]) -> str:
    parts = [f"{t} {r.rate:,.0f}/s ({r.cpu_us:.0f} µs CPU each, {r.gc_us:.0f} collecting)" for t, r in runs.items()]
    parts.append(f"PostgreSQL {runs['dispatcher'].db_cpu_us:.0f} µs CPU per delivery")
    return f"round {n}: " + ", ".join(parts) + f"; ratio {runs['dispatcher'].rate / runs['plain'].rate:.3f}"


async def until(check: Callable[[], bool], timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {timeout_s:g} s")
        await asyncio.sleep(0.005)


@asynccontextmanager
async def running(dispatcher: Dispatcher) -> AsyncIterator[Dispatcher]:
    stop = asyncio.Event()
    task = asyncio.create_task(dispatcher.run(stop))
    try:
        yield dispatcher
    finally:
        stop.set()
        await task


async def outage(pool: asyncpg.Pool, args: argparse.Namespace) -> None:
    """Queue a backlog while the receiver is down and let every job fail once; then, as if the outage
    had outlasted their retry delays, make them all due, bring the receiver back and time the drain
    from then with a new dispatcher."""
    port = free_port()
    url = f"http://{LOOPBACK}:{port}/hook"
    hooks = await subscriptions(pool, url, args.webhooks)
    started = time.perf_counter()
    down = Dispatcher(pool, f"bench-{secrets.token_hex(4)}", config(args), retry=fixed_delays([3600]))
    async with running(down):
        await enqueue(pool, hooks, args.backlog)
        await until(lambda: down.stats.retried >= args.backlog)
    failed_s = time.perf_counter() - started
    await pool.execute("UPDATE delivery_jobs SET next_attempt_at = now() WHERE webhook_id = ANY($1)", hooks)
    async with receiver(port):
        back = time.perf_counter()
        up = Dispatcher(pool, f"bench-{secrets.token_hex(4)}", config(args))
        async with running(up):
            await until(lambda: up.stats.delivered >= args.backlog)
            drain_s = time.perf_counter() - back
    print(
        f"outage: {args.backlog:,} jobs failed once while the receiver was down ({failed_s:.1f} s, connection "
        f"refused); once it was back, the backlog (all due) drained in {drain_s:.1f} s "
        f"({args.backlog / drain_s:,.0f} deliveries/s)"
    )


async def main_async(args: argparse.Namespace, database_url: str) -> None:
    await migrate_url(database_url)
    pool = await asyncpg.create_pool(database_url, min_size=2, max_size=8)
    try:
        results = await rounds(pool, args)
        ratios = [r["dispatcher"].rate / r["plain"].rate for r in results]
        best = {t: max(r[t].rate for r in results) for t in TARGETS}
        print()
        print(f"| target | deliveries/s (best of {len(results)}) | CPU µs per delivery (median) |")
        print("|---|---:|---:|")
        for t in TARGETS:
            cpu = statistics.median(r[t].cpu_us for r in results)
            print(f"| {t} | {best[t]:,.0f} | {cpu:.0f} |")
        shown = ", ".join(f"{r:.3f}" for r in ratios)
        # Issue 64's targets: free deliveries above 0.55 of the plain client, paid ones above 1,000 a second
        # (the median round; issue 53's 0.8 is retired, bench/README.md says why).
        rates = ", ".join(f"{r['dispatcher'].rate:,.0f}" for r in results)
        median_rate = statistics.median(r["dispatcher"].rate for r in results)
        print(f"\ndispatcher / plain: median of rounds {statistics.median(ratios):.3f} ({shown}); target > 0.55 free")
        print(f"dispatcher: {median_rate:,.0f} deliveries/s, median of rounds ({rates}); target > 1,000 paid")
        if args.backlog:
            print()
            await outage(pool, args)
    finally:
        await pool.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serving = sub.add_parser("receiver", help="(internal) the receiver process")
    serving.add_argument("--port", type=int, required=True)
    parser.add_argument("--jobs", type=int, default=20_000, help="deliveries per run (default 20000)")
    parser.add_argument("--webhooks", type=int, default=16, help="subscriptions they are spread over (default 16)")
    parser.add_argument("--concurrency", type=int, default=64, help="posts in flight (default 64)")
    parser.add_argument("--per-subscription", type=int, default=16, help="dispatcher's per-subscription cap")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating which target goes first")
    parser.add_argument("--price", type=int, default=0, help="credits charged per delivery (0: free, as lifecycle)")
    parser.add_argument("--backlog", type=int, default=10_000, help="jobs queued during the outage (0: skip it)")
    parser.add_argument("--profile", action="store_true", help="cProfile one more dispatcher run")
    parser.add_argument(
        "--python-gc", action="store_true", help="Python's own collector settings, not the dispatcher actor's"
    )
    args = parser.parse_args(argv)
    if args.command == "receiver":
        receiver_main(args.port)
        return
    if not args.python_gc:
        tune_gc(ServiceSettings.model_fields["gc_young_threshold"].default)  # as the dispatcher actor's process
    with tempfile.TemporaryDirectory(prefix="bench-webhooks-") as home:
        pg = EmbeddedPostgres(Path(home))
        try:
            url = pg.start()
            POSTMASTER[:] = [int((Path(home) / "postgres" / "postmaster.pid").read_text().split()[0])]
            asyncio.run(main_async(args, url))
        finally:
            pg.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
