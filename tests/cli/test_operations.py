"""``gateway audit``, ``webhooks dead|replay``, ``sends pending`` and ``status`` against a real PostgreSQL
(and Redis; no Ray and no node: ``status`` shows them down and exits 1)."""

from __future__ import annotations

import json

import asyncpg
import pytest

from tests.cli.conftest import Run
from tests.credits.helpers import fund, new_pubkey, new_signature


async def test_audit_exit_codes(cli_pool: asyncpg.Pool, gateway_cli: Run) -> None:
    pubkey = new_pubkey()
    await fund(cli_pool, pubkey, 400)
    clean = await gateway_cli("audit")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "conservation holds" in clean.stdout
    await cli_pool.execute("UPDATE accounts SET balance = balance + 7 WHERE pubkey = $1", pubkey)  # planted
    try:
        broken = await gateway_cli("audit")
        assert broken.returncode == 1 and pubkey in broken.stdout and "do not balance" in broken.stdout
        doc = json.loads((await gateway_cli("audit", "--json")).stdout)
        assert [m["pubkey"] for m in doc["mismatches"]] == [pubkey] and doc["mismatches"][0]["balance"] == 407
    finally:
        await cli_pool.execute("UPDATE accounts SET balance = balance - 7 WHERE pubkey = $1", pubkey)
    assert (await gateway_cli("audit")).returncode == 0


async def dead_job(pool: asyncpg.Pool, pubkey: str, price: int) -> int:
    webhook = await pool.fetchval(
        """INSERT INTO webhooks (pubkey, url, filter_type, filter_value, secret)
           VALUES ($1, 'https://receiver.example/hook', 'account', $1, 'whsec') RETURNING id""",
        pubkey,
    )
    job = await pool.fetchval(
        """INSERT INTO delivery_jobs (webhook_id, event_type, payload, status, attempts, price, charged, last_error)
           VALUES ($1, 'transaction', '{}', 'dead', 8, $2, 0, 'connection refused') RETURNING id""",
        webhook,
        price,
    )
    return int(job)


async def test_webhooks_dead_and_replay(cli_pool: asyncpg.Pool, gateway_cli: Run) -> None:
    pubkey, other = new_pubkey(), new_pubkey()
    await fund(cli_pool, pubkey, 100)
    await fund(cli_pool, other, 100)
    job = await dead_job(cli_pool, pubkey, 3)
    theirs = await dead_job(cli_pool, other, 0)
    listed = json.loads((await gateway_cli("webhooks", "dead", "--account", pubkey, "--json")).stdout)
    assert [r["id"] for r in listed] == [job] and listed[0]["last_error"] == "connection refused"
    every = (await gateway_cli("webhooks", "dead")).stdout
    assert str(job) in every and str(theirs) in every
    done = await gateway_cli("webhooks", "replay", str(job), "--reason", "receiver fixed", "--operator", "dan")
    assert done.returncode == 0, done.stderr
    assert "charged 3 credits again" in done.stdout
    row = await cli_pool.fetchrow("SELECT status, attempts, charged FROM delivery_jobs WHERE id = $1", job)
    assert tuple(row) == ("pending", 0, 0)
    action = await cli_pool.fetchrow("SELECT * FROM operator_actions WHERE pubkey = $1", pubkey)
    assert (action["action"], action["operator"], action["reason"]) == ("webhook_replay", "dan", "receiver fixed")
    again = await gateway_cli("webhooks", "replay", str(job), "--reason", "twice")
    assert again.returncode == 1 and "not dead" in again.stderr
    assert (await gateway_cli("webhooks", "replay", "999999999", "--reason", "x")).returncode == 1
    await cli_pool.execute("UPDATE webhooks SET status = 'deleted' WHERE pubkey = $1", other)
    gone = await gateway_cli("webhooks", "replay", str(theirs), "--reason", "x")
    assert gone.returncode == 1 and "deleted" in gone.stderr


async def test_sends_pending(cli_pool: asyncpg.Pool, gateway_cli: Run) -> None:
    pubkey = new_pubkey()
    await fund(cli_pool, pubkey, 1_000)
    signature = new_signature()
    await cli_pool.execute(
        """INSERT INTO sends (signature, pubkey, blockhash, held, base_fee, created_at)
           VALUES ($1, $2, 'bh', 120, 5, now() - interval '90 seconds')""",
        signature,
        pubkey,
    )
    rows = json.loads((await gateway_cli("sends", "pending", "--json")).stdout)
    mine = [r for r in rows if r["signature"] == signature]
    assert len(mine) == 1 and mine[0]["held"] == 120 and 85 < mine[0]["age_s"] < 600
    table = (await gateway_cli("sends", "pending")).stdout
    assert signature in table
    await cli_pool.execute(
        "UPDATE sends SET status = 'expired', charged = 0, settled_at = now() WHERE signature = $1", signature
    )
    assert signature not in (await gateway_cli("sends", "pending")).stdout


async def test_status_without_ray_or_node_is_down(gateway_script: Run) -> None:
    ran = await gateway_script("status", "--json")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    doc = json.loads(ran.stdout)
    state = {p["name"]: p["state"] for p in doc["parts"]}
    assert state["PostgreSQL"] == "up" and state["Redis"] == "up"
    assert state["node"] == "down" and state["Ray"] == "down"
    assert not doc["ok"] and "Ray" in doc["down"]
    assert {"lag webhooks", "lag sends", "lag deposits", "lag signals"} <= set(state)
    table = await gateway_script("status")
    assert table.returncode == 1 and "down: node, Ray" in table.stdout


async def test_history_is_append_only_and_audit_checks_it(cli_pool: asyncpg.Pool, gateway_cli: Run) -> None:
    pubkey = new_pubkey()
    await fund(cli_pool, pubkey, 400)
    credited = await gateway_cli("account", "credit", pubkey, "5", "--reason", "goodwill")
    assert credited.returncode == 0, credited.stderr
    for sql in (
        "UPDATE ledger_entries SET amount = amount + 1 WHERE pubkey = $1",
        "DELETE FROM ledger_entries WHERE pubkey = $1",
        "UPDATE operator_actions SET reason = 'rewritten' WHERE pubkey = $1",
        "DELETE FROM operator_actions WHERE pubkey = $1",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await cli_pool.execute(sql, pubkey)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await cli_pool.execute("TRUNCATE operator_actions")
    clean = await gateway_cli("audit")
    assert clean.returncode == 0 and "append-only" in clean.stdout, clean.stdout
    await cli_pool.execute("ALTER TABLE operator_actions DISABLE TRIGGER operator_actions_append_only")
    try:
        broken = await gateway_cli("audit", "--json")
        doc = json.loads(broken.stdout)
        assert broken.returncode == 1 and doc["ok"] is False, broken.stdout
        assert [gap.split(":")[0] for gap in doc["append_only_gaps"]] == ["operator_actions"], doc
    finally:
        await cli_pool.execute("ALTER TABLE operator_actions ENABLE TRIGGER operator_actions_append_only")
    assert (await gateway_cli("audit")).returncode == 0
