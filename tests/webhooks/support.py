"""What the delivery tests share: accounts, subscriptions and jobs written to the module's own
database (the ``delivery_dsn`` and ``pool`` fixtures of conftest.py), dispatchers run in this process,
a real aiohttp receiver on 127.0.0.1, and waits that end on what the database shows."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import orjson
from aiohttp import web

from gateway.core.credits import UsageRecord
from gateway.storage.ledger import lease, settle
from gateway.storage.ledger.audit import check_conservation
from gateway.webhooks.dispatcher import DispatchConfig, Dispatcher, RetryPolicy, fixed_delays
from gateway.webhooks.rules import new_secret
from gateway.webhooks.store import subscriptions as webhooks
from tests.auth.helpers import create_account

FAST = fixed_delays([0.05] * 7)
CONFIG = DispatchConfig(
    concurrency=16, per_webhook=16, timeout_s=2.0, lease_s=10.0, allow_private=True, poll_s=0.05, drain_s=2.0
)
WAIT_S = 60.0


# -- what goes in the database ---------------------------------------------------------------------


async def account(pool: asyncpg.Pool, usdc_base_units: int = 0) -> str:
    pubkey = f"acct-{secrets.token_hex(12)}"
    async with pool.acquire() as conn:
        await create_account(conn, pubkey, usdc_base_units)
    return pubkey


@dataclass
class Hook:
    id: int
    pubkey: str
    secret: str


async def subscribe(pool: asyncpg.Pool, url: str, pubkey: str | None = None, signal: bool = False) -> Hook:
    pubkey = pubkey or await account(pool)
    if signal:
        new = webhooks.NewWebhook(url, "signal", signal_events=("newPair",))
    else:
        new = webhooks.NewWebhook(url, "lifecycle", lifecycle_events=("deposit.credited",))
    secret = new_secret()
    hook = await webhooks.create(pool, pubkey, new, secret, max_per_account=1_000)
    assert isinstance(hook, webhooks.Webhook), hook
    return Hook(hook.id, pubkey, secret)


async def enqueue(pool: asyncpg.Pool, hook: Hook, payload: Any = None, price: int = 0) -> int:
    event_type = "signal.newPair" if price else "deposit.credited"
    job_id: int = await pool.fetchval(
        """INSERT INTO delivery_jobs (webhook_id, event_type, payload, price)
           VALUES ($1, $2, $3::jsonb, $4) RETURNING id""",
        hook.id,
        event_type,
        orjson.dumps(payload if payload is not None else {"n": secrets.token_hex(4)}).decode(),
        price,
    )
    return job_id


async def job(pool: asyncpg.Pool, job_id: int) -> asyncpg.Record:
    row: asyncpg.Record = await pool.fetchrow("SELECT * FROM delivery_jobs WHERE id = $1", job_id)
    return row


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        await asyncio.sleep(0.02)


def settled(pool: asyncpg.Pool, *ids: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        done = await pool.fetchval(
            "SELECT count(*) FROM delivery_jobs WHERE id = ANY($1::bigint[]) AND status IN ('delivered', 'dead')",
            list(ids),
        )
        return bool(done == len(ids))

    return check


@asynccontextmanager
async def dispatching(
    pool: asyncpg.Pool, config: DispatchConfig = CONFIG, retry: RetryPolicy = FAST, name: str = "test"
) -> AsyncIterator[Dispatcher]:
    dispatcher = Dispatcher(pool, f"{name}:{secrets.token_hex(4)}", config, retry=retry)
    stop = asyncio.Event()
    task = asyncio.create_task(dispatcher.run(stop))
    try:
        yield dispatcher
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


# -- a receiver ------------------------------------------------------------------------------------


@dataclass
class Received:
    event_id: str
    webhook_id: int
    timestamp: int
    signature: str
    body: bytes
    headers: dict[str, str]
    at: float  # wall clock, as PostgreSQL's now()


@dataclass
class Answer:
    status: int = 200
    text: str = "ok"
    headers: dict[str, str] = field(default_factory=dict)
    wait_s: float = 0.0


class Receiver:
    """A real aiohttp server on 127.0.0.1 that records each delivery and answers as scripted."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.script: dict[str, list[Answer]] = {}  # per event id, consumed in order; then ``default``
        self.default = Answer()
        self.hold: dict[int, asyncio.Event] = {}  # per webhook id: answer once set
        self.in_flight: Counter[int] = Counter()
        self.most_in_flight: Counter[int] = Counter()
        self.group: dict[int, str] = {}  # webhook id -> a name, e.g. its account: in flight counted per group too
        self.group_in_flight: Counter[str] = Counter()
        self.group_most: Counter[str] = Counter()
        self.redirected = 0
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        got = Received(
            event_id=request.headers["X-Webhook-Event-Id"],
            webhook_id=int(request.headers["X-Webhook-Id"]),
            timestamp=int(request.headers["X-Webhook-Timestamp"]),
            signature=request.headers["X-Webhook-Signature"],
            body=body,
            headers=dict(request.headers),
            at=time.time(),
        )
        self.received.append(got)
        self.in_flight[got.webhook_id] += 1
        self.most_in_flight[got.webhook_id] = max(self.most_in_flight[got.webhook_id], self.in_flight[got.webhook_id])
        group = self.group.get(got.webhook_id, "")
        self.group_in_flight[group] += 1
        self.group_most[group] = max(self.group_most[group], self.group_in_flight[group])
        try:
            gate = self.hold.get(got.webhook_id)
            if gate is not None:
                await gate.wait()
            script = self.script.get(got.event_id)
            answer = script.pop(0) if script else self.default
            if answer.wait_s:
                await asyncio.sleep(answer.wait_s)
            return web.Response(status=answer.status, text=answer.text, headers=answer.headers)
        finally:
            self.in_flight[got.webhook_id] -= 1
            self.group_in_flight[group] -= 1

    async def elsewhere(self, request: web.Request) -> web.Response:
        self.redirected += 1
        return web.Response(text="followed")

    def events(self) -> Counter[str]:
        return Counter(r.event_id for r in self.received)


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


async def is_true(value: bool) -> bool:
    return value


async def ledger(pool: asyncpg.Pool, pubkey: str) -> list[tuple[str, int, str | None]]:
    rows = await pool.fetch("SELECT type, amount, ref FROM ledger_entries WHERE pubkey = $1 ORDER BY id", pubkey)
    return [(r["type"], int(r["amount"]), r["ref"]) for r in rows]


async def balance(pool: asyncpg.Pool, pubkey: str) -> int:
    return int(await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey))


async def spend(pool: asyncpg.Pool, pubkey: str, credits: int) -> None:
    """Spend ``credits`` of ``pubkey``'s balance on a call, as a replica does: a lease, then its settle."""
    grant = await lease(pool, pubkey, "test-replica", credits, 30)
    assert grant is not None and grant.lease_id is not None and grant.granted == credits, grant
    usage = UsageRecord("getBlock", credits, False, f"req-{secrets.token_hex(4)}", datetime.now(UTC))
    await settle(pool, grant.lease_id, [usage], release=True)


async def conserved(pool: asyncpg.Pool, pubkey: str) -> bool:
    async with pool.acquire() as conn:
        return (await check_conservation(conn, pubkey)).ok
