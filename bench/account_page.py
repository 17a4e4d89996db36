"""What the account page's reads cost on a busy account (issue 51 item 6): the usage totals, history
pages deep in the account by cursor, and the CSV export's first byte, with 10^7 usage rows.

    python -m bench.account_page [--rows 10000000] [--requests 40]

A gateway on the devnode in this process (``bench/inprocess.py``, no Ray). The rows go straight into its
embedded PostgreSQL with ``generate_series`` (100 calls a second for about 28 hours at 10^7, five
methods, one in 50 refunded), their totals as migration 0027's backfill writes them, then ``VACUUM
ANALYZE``. Each route is requested ``--requests`` times in turn after two warm-up requests, over one
keep-alive connection; p50 and p95 of the wall time are printed, never asserted. The per-address limits
are lifted: the bench measures the reads, not the limiter.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import aiohttp
import asyncpg

from bench.inprocess import Stores, gateway_on_devnode, run_with_stores
from gateway.auth.exports import EXPORTS_PER_ACCOUNT, seat_key
from gateway.limits.settings import DEFAULT_IP_LIMITS
from gateway.storage.seats import Seat

CHUNK = 1_000_000
PAGE_ROWS = 20  # the page's history page (webapp/src/main.js)
ROWS_SQL = """
INSERT INTO usage_history (pubkey, method, credits, request_id, refunded, created_at, calls)
SELECT $1, (ARRAY['getSlot', 'getBalance', 'getAccountInfo', 'getBlock', 'getSignaturesForAddress'])[1 + i % 5],
       CASE WHEN i % 50 = 0 THEN 0 WHEN i % 5 = 3 THEN 25 ELSE 1 END,
       'bench-' || i, i % 50 = 0, now() - ($3 - i) * interval '10 milliseconds', 1
FROM generate_series($2::bigint, LEAST($3::bigint, $2::bigint + $4 - 1)) AS i
"""
TOTALS_SQL = """
INSERT INTO usage_daily AS d (pubkey, day, method, credits, calls, refunds)
SELECT pubkey, (created_at AT TIME ZONE 'UTC')::date, method, sum(credits), sum(calls),
       COALESCE(sum(calls) FILTER (WHERE refunded), 0)
FROM usage_history WHERE pubkey = $1 GROUP BY 1, 2, 3
ON CONFLICT (pubkey, day, method) DO UPDATE
SET credits = d.credits + EXCLUDED.credits, calls = d.calls + EXCLUDED.calls, refunds = d.refunds + EXCLUDED.refunds
"""


async def fill(database_url: str, pubkey: str, rows: int) -> tuple[int, int]:
    """``rows`` usage rows of ``pubkey`` and their totals; the smallest and largest id."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("SET synchronous_commit = off")
        started = time.monotonic()
        for first in range(1, rows + 1, CHUNK):
            await conn.execute(ROWS_SQL, pubkey, first, rows, CHUNK)
            print(f"  {min(rows, first + CHUNK - 1):,} rows, {time.monotonic() - started:.0f} s", flush=True)
        await conn.execute("DELETE FROM usage_daily WHERE pubkey = $1", pubkey)  # the calls made so far
        await conn.execute(TOTALS_SQL, pubkey)
        await conn.execute("VACUUM ANALYZE usage_history")
        await conn.execute("VACUUM ANALYZE usage_daily")
        low, high = await conn.fetchrow("SELECT min(id), max(id) FROM usage_history WHERE pubkey = $1", pubkey)
        print(f"  filled, totals kept and vacuumed in {time.monotonic() - started:.0f} s", flush=True)
        return int(low), int(high)
    finally:
        await conn.close()


async def timed(
    requests: int, one: Callable[[], Awaitable[None]], settle: Callable[[], Awaitable[None]] | None = None
) -> tuple[float, float]:
    """p50 and p95 (ms) of ``requests`` calls of ``one``, after two unmeasured; ``settle`` runs after
    each, unmeasured."""
    times = []
    for n in range(requests + 2):
        started = time.perf_counter()
        await one()
        if n >= 2:
            times.append((time.perf_counter() - started) * 1000)
        if settle is not None:
            await settle()
    cuts = statistics.quantiles(times, n=20)
    return statistics.median(times), cuts[18]


async def run(rows: int, requests: int, stores: Stores) -> None:
    lifted = {group: {"rps": 10_000, "burst": 100_000} for group in DEFAULT_IP_LIMITS}
    async with gateway_on_devnode(stores, 400, ip_limits=lifted) as running:
        headers = {"X-Api-Key": running.api_key}
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{running.url}/account/info", headers=headers) as resp:
                pubkey = (await resp.json())["pubkey"]
            print(f"{rows:,} usage rows for one account:", flush=True)
            low, high = await fill(stores.database_url, pubkey, rows)

            def get(path: str, expect: int = 0) -> Callable[[], Awaitable[None]]:
                async def one() -> None:
                    async with http.get(running.url + path, headers=headers) as resp:
                        body = await resp.read()
                    assert resp.status == 200, body[:200]
                    if expect:
                        assert body.count(b'"method"') == expect, body[:200]

                return one

            def first_bytes(path: str, wanted: int) -> Callable[[], Awaitable[None]]:
                async def one() -> None:
                    async with http.get(running.url + path, headers=headers) as resp:
                        assert resp.status == 200
                        got = 0
                        while got < wanted:
                            chunk = await resp.content.readany()
                            if not chunk:
                                break
                            got += len(chunk)
                        resp.close()  # the rest is not read: the server stops streaming

                return one

            async def exports_ended() -> None:
                """Until the cut exports gave their seats back (an account streams 2 at once, docs/api.md)."""
                key, seats = seat_key(pubkey), running.app.seats
                taken: list[Seat] = []
                while len(taken) < EXPORTS_PER_ACCOUNT:
                    seat = await seats.take(key, EXPORTS_PER_ACCOUNT)
                    if seat is None:
                        await asyncio.sleep(0.002)
                    else:
                        taken.append(seat)
                for seat in taken:
                    await seats.give(seat)

            cases = [
                ("GET /account/usage/daily?days=14 (the chart)", get("/account/usage/daily?days=14")),
                ("GET /account/history, first page", get(f"/account/history?limit={PAGE_ROWS}", PAGE_ROWS)),
                (
                    "GET /account/history, middle page by cursor",
                    get(f"/account/history?limit={PAGE_ROWS}&cursor={(low + high) // 2}", PAGE_ROWS),
                ),
                (
                    "GET /account/history, last page by cursor",
                    get(f"/account/history?limit={PAGE_ROWS}&cursor={low + PAGE_ROWS}", PAGE_ROWS),
                ),
                (
                    "GET /account/history?limit=1000, middle page",
                    get(f"/account/history?limit=1000&cursor={(low + high) // 2}"),
                ),
                ("GET /account/usage.csv, first byte", first_bytes("/account/usage.csv", 1)),
                ("GET /account/usage.csv, first 2,000 rows", first_bytes("/account/usage.csv", 2_000 * 60)),
            ]
            print(f"{requests} requests each, one connection, ms:")
            print(f"  {'route':<52} {'p50':>8} {'p95':>8}")
            for name, one in cases:
                p50, p95 = await timed(requests, one, exports_ended if ".csv" in name else None)
                print(f"  {name:<52} {p50:>8.1f} {p95:>8.1f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.account_page", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args(argv)
    run_with_stores("gw-account-page-", lambda stores: run(args.rows, args.requests, stores))


if __name__ == "__main__":
    main()
