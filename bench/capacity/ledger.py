"""Credit lease grants and settles a second on the embedded PostgreSQL: the real functions of
``gateway/storage/ledger/leases.py``, over many funded accounts, from 1, 4 and 16 connections at once.

What a replica's meter sends the database: a ``lease`` when it first serves an account (and about
every ten calls' worth of it after), a ``settle`` of the account's usage rows once a
``credit_flush_interval_s`` (two calls' rows here: an account at 2 requests/s flushed every second,
renewing the lease; and ten: the same account flushed every 5 s), and a last ``settle`` that
releases the lease once the account is idle. Each is one transaction under the account's row lock.
PostgreSQL's CPU is that of every process of its cluster (the backends, the WAL writer, the
checkpointer); its commit waits on a real ``fsync`` of this machine's disk (the settings are printed).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from bench.capacity import Figure, load_average
from gateway.core.credits import CreditPolicy, DepositCredit, UsageRecord
from gateway.credits.store import credit_deposit_on
from gateway.storage.connections import Connections
from gateway.storage.ledger.leases import lease, settle
from gateway.storage.migrate import migrate_url

SECTION = "PostgreSQL ledger"
ACCOUNTS = 2_000
POLICY = CreditPolicy(credits_per_usdc=100_000, credit_expiry_seconds=90 * 86_400)
LEASE_WANT = 20_000  # far more than a run settles from one lease: no lease runs out mid-run
PRICE = 2  # a cheap read's credits
RECORDS_PER_SETTLE = 2  # an account at 2 requests/s, flushed every second (and 10: every 5 s)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Cluster:
    """The PostgreSQL processes of one data dir: the postmaster and its children. Their CPU is read
    from /proc: the live children's own, and the postmaster's with that of the children it reaped
    (backends and autovacuum workers come and go during a run)."""

    def __init__(self, pgdata: Path) -> None:
        self.postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])

    def cpu_s(self) -> float:
        ticks = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # fields 3 on of stat(5): state, ppid, ...
            if int(entry) == self.postmaster:
                ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
            elif int(fields[1]) == self.postmaster:
                ticks += int(fields[11]) + int(fields[12])
        return ticks / CLOCK_TICKS


async def fund(database_url: str, accounts: int, connections: int = 4) -> list[str]:
    """``accounts`` new accounts with 10 USDC of credits each, through the ledger's deposit path."""
    keys = [f"bench-{secrets.token_hex(16)}" for _ in range(accounts)]
    todo = iter(keys)

    async def worker() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            for pubkey in todo:
                deposit = DepositCredit(f"bench-{secrets.token_hex(16)}", pubkey, 10_000_000)
                outcome = await credit_deposit_on(conn, deposit, POLICY)
                assert outcome.credited, outcome
        finally:
            await conn.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return keys


def records(n: int) -> list[UsageRecord]:
    now = datetime.now(UTC)
    return [UsageRecord("getSlot", PRICE, False, secrets.token_hex(8), now) for _ in range(n)]


async def _run(
    name: str, cluster: Cluster, workers: int, seconds: float | None, step: Callable[[], Awaitable[bool]]
) -> Figure:
    """``workers`` loops of ``step`` (False: nothing left) for ``seconds`` (None: until nothing is left)."""
    done = [0]
    deadline = time.perf_counter() + seconds if seconds is not None else float("inf")

    async def worker() -> None:
        while time.perf_counter() < deadline and await step():
            done[0] += 1

    pg0, cpu0, start = cluster.cpu_s(), time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    elapsed, cpu, pg = time.perf_counter() - start, time.process_time() - cpu0, cluster.cpu_s() - pg0
    return Figure(SECTION, f"{name}, {workers} connection(s)", done[0], elapsed, cpu, pg, load_average())


async def lease_run(pool: asyncpg.Pool, cluster: Cluster, keys: Iterator[str], workers: int, seconds: float,
                    leases: list[int]) -> Figure:  # fmt: skip
    replica = secrets.token_hex(8)

    async def step() -> bool:
        grant = await lease(pool, next(keys), replica, LEASE_WANT, 60.0, at_least=PRICE)
        assert grant is not None and grant.lease_id is not None, grant
        leases.append(grant.lease_id)
        return True

    return await _run("lease grant", cluster, workers, seconds, step)


async def settle_run(
    pool: asyncpg.Pool, cluster: Cluster, leases: list[int], workers: int, seconds: float, rows: int
) -> Figure:
    """Each lease settled in turn with ``rows`` usage rows (its next flush), renewing it."""
    turn = itertools.cycle(leases)
    seqs: dict[int, int] = {}
    busy: set[int] = set()

    async def step() -> bool:
        lease_id = next(turn)
        while lease_id in busy:  # one flush of a lease at a time, as the meter does
            lease_id = next(turn)
        busy.add(lease_id)
        try:
            seqs[lease_id] = seq = seqs.get(lease_id, 0) + 1
            result = await settle(pool, lease_id, records(rows), False, seq=seq, renew_ttl_s=60.0)
            assert result.applied, result
        finally:
            busy.discard(lease_id)
        return True

    return await _run(f"settle of {rows} usage rows", cluster, workers, seconds, step)


async def release_run(pool: asyncpg.Pool, cluster: Cluster, leases: list[int], workers: int) -> Figure:
    """Every lease ended: the last settle, with no usage left (the meter's release after idling)."""
    todo = iter(leases)

    async def step() -> bool:
        lease_id = next(todo, None)
        if lease_id is None:
            return False
        await settle(pool, lease_id, [], True)
        return True

    return await _run("settle releasing the lease", cluster, workers, None, step)


async def settings(pool: asyncpg.Pool) -> str:
    names = ("fsync", "synchronous_commit", "shared_buffers", "max_connections")
    values = [f"{n}={await pool.fetchval(f'SHOW {n}')}" for n in names]
    return "PostgreSQL " + str(await pool.fetchval("SHOW server_version")) + ": " + ", ".join(values)


async def measure(
    database_url: str, pgdata: Path, seconds: float, accounts: int = ACCOUNTS
) -> tuple[list[Figure], str]:
    """Every ledger figure, and PostgreSQL's settings; the database is migrated and funded here."""
    await migrate_url(database_url)
    funding = time.perf_counter()
    keys = await fund(database_url, accounts)
    funded = f"{accounts:,} accounts funded in {time.perf_counter() - funding:.1f} s"
    cluster, conns = Cluster(pgdata), await Connections.open(database_url, None, pool_size=16)
    assert conns.db is not None
    pool, figures, leases = conns.db, list[Figure](), list[int]()
    try:
        cycle = itertools.cycle(keys)
        for workers in (1, 4, 16):
            figures.append(await lease_run(pool, cluster, cycle, workers, seconds, leases))
        for workers in (1, 4, 16):
            figures.append(await settle_run(pool, cluster, leases, workers, seconds, RECORDS_PER_SETTLE))
        figures.append(await settle_run(pool, cluster, leases, 16, seconds, 5 * RECORDS_PER_SETTLE))
        figures.append(await release_run(pool, cluster, leases, 4))
        return figures, f"{await settings(pool)}; {funded}"
    finally:
        await conns.close()
