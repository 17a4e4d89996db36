"""``gateway account ...`` against a real PostgreSQL: what it shows, and every change a ledger entry or an
operator action with the reason and the operator, the audit clean after each."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import asyncpg

from gateway.app.features import method_registry
from gateway.core.identity import Identity
from gateway.core.methods import PriceTable
from gateway.credits.meter import Meter
from gateway.credits.stage import MeteringStage
from gateway.limits.rules import Limiter
from gateway.pipeline.http import http_call
from gateway.pipeline.stages import Call, Handler, Reply, ReplyStyle, compose, error_boundary
from gateway.rpc.forward import Forwarder, ParseStage
from gateway.storage.ledger import check_conservation, lease
from tests.cli.conftest import Run
from tests.credits.helpers import ScriptedNode, fund, new_pubkey, new_signature


async def funded(pool: asyncpg.Pool, credits: int) -> str:
    pubkey = new_pubkey()
    await fund(pool, pubkey, credits)
    return pubkey


async def test_show(cli_pool: asyncpg.Pool, gateway_cli: Run) -> None:
    pubkey = await funded(cli_pool, 5_000)
    shown = await gateway_cli("account", "show", pubkey)
    assert shown.returncode == 0, shown.stderr
    assert "balance 5000" in shown.stdout and "active" in shown.stdout and "credit batches" in shown.stdout
    data = json.loads((await gateway_cli("account", "show", pubkey, "--json")).stdout)
    assert data["balance"] == 5_000 and data["available"] == 5_000 and data["status"] == "active"
    assert [b["remaining"] for b in data["batches"]] == [5_000]
    assert data["ledger"][0]["type"] == "deposit"
    assert data["limits"]["rate_source"] == "default"
    missing = await gateway_cli("account", "show", new_pubkey())
    assert missing.returncode == 1 and "no account" in missing.stderr


async def test_credit_is_an_adjustment_entry_with_reason_and_operator(
    cli_pool: asyncpg.Pool, gateway_cli: Run, gateway_script: Run
) -> None:
    pubkey = await funded(cli_pool, 100)
    done = await gateway_script(  # the installed console script, once
        "account", "credit", pubkey, "250", "--reason", "outage goodwill", "--operator", "alice", "--expires-days", "3"
    )
    assert done.returncode == 0, done.stderr
    assert "balance 350" in done.stdout
    entry = await cli_pool.fetchrow("SELECT * FROM ledger_entries WHERE pubkey = $1 ORDER BY id DESC LIMIT 1", pubkey)
    assert (entry["type"], entry["amount"], entry["balance_after"]) == ("adjustment", 250, 350)
    assert "outage goodwill" in entry["description"] and entry["ref"] == "operator:alice"
    batch = await cli_pool.fetchrow("SELECT * FROM credit_batches WHERE pubkey = $1 AND source = 'adjustment'", pubkey)
    assert batch["granted"] == batch["remaining"] == 250
    assert abs(batch["expires_at"] - (datetime.now(UTC) + timedelta(days=3))) < timedelta(minutes=5)
    action = await cli_pool.fetchrow("SELECT * FROM operator_actions WHERE pubkey = $1", pubkey)
    assert (action["action"], action["operator"], action["reason"]) == ("credit", "alice", "outage goodwill")
    async with cli_pool.acquire() as conn:
        assert (await check_conservation(conn, pubkey)).ok
    # the operator defaults to $USER
    assert (await gateway_cli("account", "credit", pubkey, "1", "--reason", "r")).returncode == 0
    assert (
        await cli_pool.fetchval("SELECT ref FROM ledger_entries WHERE pubkey = $1 ORDER BY id DESC LIMIT 1", pubkey)
        == "operator:tester"
    )


async def test_refusals(cli_pool: asyncpg.Pool, gateway_cli: Run) -> None:
    pubkey = await funded(cli_pool, 1_000)
    before = await cli_pool.fetchval("SELECT count(*) FROM ledger_entries WHERE pubkey = $1", pubkey)
    for amount in ("-5", "0", "1.5", "ten"):
        refused = await gateway_cli("account", "credit", pubkey, amount, "--reason", "r")
        assert refused.returncode == 1 and "positive whole number" in refused.stderr, (amount, refused.stderr)
    unknown = await gateway_cli("account", "credit", new_pubkey(), "10", "--reason", "r")
    assert unknown.returncode == 1 and "no account" in unknown.stderr
    no_reason = await gateway_cli("account", "debit", pubkey, "10", "--reason", " ")
    assert no_reason.returncode == 1 and "reason is required" in no_reason.stderr
    # a pending send holds 300: 700 can be debited, not more
    await cli_pool.execute(
        "INSERT INTO sends (signature, pubkey, blockhash, held, base_fee) VALUES ($1, $2, 'bh', 300, 5)",
        new_signature(),
        pubkey,
    )
    beyond = await gateway_cli("account", "debit", pubkey, "701", "--reason", "chargeback")
    assert beyond.returncode == 1 and "has 700 to spend" in beyond.stderr
    assert await cli_pool.fetchval("SELECT count(*) FROM ledger_entries WHERE pubkey = $1", pubkey) == before
    taken = await gateway_cli("account", "debit", pubkey, "700", "--reason", "chargeback", "--operator", "bob")
    assert taken.returncode == 0, taken.stderr
    entry = await cli_pool.fetchrow("SELECT * FROM ledger_entries WHERE pubkey = $1 ORDER BY id DESC LIMIT 1", pubkey)
    assert (entry["type"], entry["amount"], entry["balance_after"], entry["ref"]) == (
        "debit",
        -700,
        300,
        "operator:bob",
    )
    async with cli_pool.acquire() as conn:
        assert (await check_conservation(conn, pubkey)).ok


def pipeline(pool: asyncpg.Pool, pubkey: str, meter: Meter) -> Handler:
    async def authenticate(call: Call, next_handler: Handler) -> Reply:
        call.identity = Identity(pubkey, "api_key")
        return await next_handler(call)

    stage = MeteringStage(meter, Limiter(50, 4), lambda _: {"deposit_address": "Dep1"})
    return compose(
        [error_boundary, authenticate, ParseStage(method_registry(), PriceTable.default()), stage],
        Forwarder(ScriptedNode()),
    )


async def call(handler: Handler) -> tuple[int, dict[str, object]]:
    body = b'{"jsonrpc":"2.0","id":1,"method":"getSlot","params":[]}'
    reply = await handler(http_call("POST", "/", {}, style=ReplyStyle.JSONRPC, body=body))
    return reply.status, json.loads(reply.body)


async def test_suspend_refuses_the_accounts_calls_and_resume_admits_them(
    cli_pool: asyncpg.Pool, gateway_cli: Run
) -> None:
    pubkey = await funded(cli_pool, 1_000)
    done = await gateway_cli("account", "suspend", pubkey, "--reason", "abuse report 17", "--operator", "carol")
    assert done.returncode == 0, done.stderr
    assert await cli_pool.fetchval("SELECT status FROM accounts WHERE pubkey = $1", pubkey) == "suspended"
    meter = Meter(cli_pool)
    try:
        status, body = await call(pipeline(cli_pool, pubkey, meter))
        assert status == 403 and "ACCOUNT_SUSPENDED" in json.dumps(body), body
    finally:
        await meter.stop()
    again = await gateway_cli("account", "suspend", pubkey, "--reason", "again")
    assert again.returncode == 0 and "already" in again.stdout
    assert (
        await gateway_cli("account", "resume", pubkey, "--reason", "cleared", "--operator", "carol")
    ).returncode == 0
    meter = Meter(cli_pool)
    try:
        status, _ = await call(pipeline(cli_pool, pubkey, meter))
        assert status == 200
    finally:
        await meter.stop()
    actions = await cli_pool.fetch(
        "SELECT action, reason, operator FROM operator_actions WHERE pubkey = $1 ORDER BY id", pubkey
    )
    assert [tuple(a) for a in actions] == [("suspend", "abuse report 17", "carol"), ("resume", "cleared", "carol")]


async def test_limits_overrides_reach_the_lease(cli_pool: asyncpg.Pool, gateway_cli: Run) -> None:
    pubkey = await funded(cli_pool, 1_000)
    done = await gateway_cli("account", "limits", pubkey, "--rate", "5", "--concurrency", "2", "--reason", "plan B")
    assert done.returncode == 0, done.stderr
    grant = await lease(cli_pool, pubkey, "r1", 10, 5.0)
    assert grant is not None and (grant.rate_limit_rps, grant.concurrency_limit) == (5, 2)
    assert (await gateway_cli("account", "limits", pubkey, "--rate", "7", "--reason", "more")).returncode == 0
    shown = await gateway_cli("account", "limits", pubkey)
    assert "rate 7 req/s (override)" in shown.stdout and "concurrency 2 (override)" in shown.stdout
    assert (await gateway_cli("account", "limits", pubkey, "--reset", "--reason", "back")).returncode == 0
    row = await cli_pool.fetchrow("SELECT rate_limit_rps, concurrency_limit FROM accounts WHERE pubkey = $1", pubkey)
    assert tuple(row) == (None, None)
    assert (await gateway_cli("account", "limits", pubkey, "--rate", "0", "--reason", "x")).returncode == 1
    assert (await gateway_cli("account", "limits", pubkey, "--rate", "3")).returncode == 1  # no reason
    kinds = await cli_pool.fetchval(
        "SELECT count(*) FROM operator_actions WHERE pubkey = $1 AND action = 'limits'", pubkey
    )
    assert kinds == 3


async def test_limits_json_and_no_python_tuples(cli_pool: asyncpg.Pool, gateway_cli: Run) -> None:
    pubkey = await funded(cli_pool, 1_000)
    changed = await gateway_cli("account", "limits", pubkey, "--rate", "5", "--reason", "plan B", "--json")
    assert changed.returncode == 0, changed.stderr
    doc = json.loads(changed.stdout)
    assert doc["rate_limit_rps"] == 5 and doc["rate_source"] == "override" and doc["concurrency_source"] == "default"
    streams = {"grpc_max_streams": None, "grpc_max_opens_per_minute": None, "grpc_max_streams_per_address": None}
    assert doc["overrides_before"] == {"rate_limit_rps": None, "concurrency_limit": None, **streams}
    assert doc["overrides_after"] == {"rate_limit_rps": 5, "concurrency_limit": None, **streams}
    shown = json.loads((await gateway_cli("account", "limits", pubkey, "--json")).stdout)
    assert shown == {key: doc[key] for key in shown} and shown["pubkey"] == pubkey
    said = await gateway_cli("account", "limits", pubkey, "--reset", "--reason", "back")
    assert said.returncode == 0 and "(5, None)" not in said.stdout and "None" not in said.stdout, said.stdout
    assert "overrides were rate 5, concurrency default, now none" in said.stdout
    assert "every replica applies them at the account's next call" in said.stdout


async def test_a_limits_change_reaches_a_replicas_meter_at_once_both_ways(
    cli_pool: asyncpg.Pool, redis_url: str, gateway_cli: Run
) -> None:
    """A replica reads an account's limits from its credit lease: the CLI's change makes every replica give
    back its leases of the account (the recall channel), so the next call leases anew with the new limits,
    tightened or loosened alike, instead of at the lease's end (lease_ttl_s, 30 s). Real meter, PostgreSQL
    and Redis channel."""
    import time

    import redis.asyncio as aioredis

    from gateway.credits.meter import Meter
    from gateway.credits.recall import CreditRecall
    from gateway.storage.channels import RECALL, Channel

    pubkey = await funded(cli_pool, 100_000)
    client = aioredis.Redis.from_url(redis_url)
    meter = Meter(cli_pool, idle_release_s=60.0, flush_interval_s=0.05, lease_ttl_s=30.0)
    meter.start()
    recall = CreditRecall(meter)
    recall.start(Channel(client, RECALL))
    try:
        for _ in range(500):  # a want published before the subscription is live would not be heard
            if recall.live:
                break
            await asyncio.sleep(0.01)

        async def limits_after(*args: str) -> tuple[int | None, float]:
            done = await gateway_cli("account", "limits", pubkey, *args, "--reason", "plan change")
            assert done.returncode == 0, done.stderr
            began = time.monotonic()
            while time.monotonic() - began < 10:
                # what the credit stage reads before it admits: a caller refused 429 spends nothing, so
                # its lease is not used up and would stay (with the old limits) until idle or expired
                acct = meter.known(pubkey) or await meter.prepare(pubkey)
                if acct.rate_limit_rps == expected:
                    break
                await asyncio.sleep(0.05)
            return meter.accounts[pubkey].rate_limit_rps, time.monotonic() - began

        first = await meter.admit(pubkey, 1)  # a lease, with the default limits
        meter.complete(first, "getSlot", "sig-first")
        assert meter.accounts[pubkey].rate_limit_rps is None
        expected: int | None = 3
        tightened, took_down = await limits_after("--rate", "3")
        expected = None
        loosened, took_up = await limits_after("--reset")
        print(f"\ntightened in {took_down:.2f} s, loosened in {took_up:.2f} s (lease_ttl_s 30 s)")
        assert (tightened, loosened) == (3, None)
        assert took_down < 10 and took_up < 10  # not the lease's 30 s
    finally:
        await recall.stop()
        await meter.stop()
        await client.aclose()
