"""The usage totals (usage_daily, kept by the usage flush) and the CSV exports, over real HTTP on the
shared gateway in front of the devnode: totals equal the usage rows' sums after calls, a batch, a refund
and a settled send; the export streams every row, formula cells guarded; bad input is 400."""

from __future__ import annotations

import csv
import io
import secrets
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import asyncpg
import orjson
import pytest

from devnode.node import Devnode
from gateway.auth.usage_totals import cell
from gateway.storage import sends
from gateway.storage.migrate import migrate, shipped_migrations
from gateway.storage.sends import SendStatus
from gateway_client import WalletSigner
from tests.app.test_csv_cells import CASES
from tests.auth.helpers import create_account, create_api_key, open_session, request
from tests.credits.helpers import new_signature
from tests.databases import drop_database
from tests.support import RunningGateway


def _rpc(method: str, params: list[object] | None = None, id_: int = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or []}


async def _call(http: aiohttp.ClientSession, url: str, key: str, body: object) -> object:
    answer = await request(http, "POST", url + "/", body=orjson.dumps(body), headers={"X-Api-Key": key})
    assert answer.status == 200, answer
    return answer.json


async def _sums(db: asyncpg.Connection, pubkey: str) -> dict[str, tuple[int, int, int]]:
    """Each method's (credits, calls, refunds) summed from the usage rows: what the totals must equal."""
    rows = await db.fetch(
        """SELECT method, sum(credits)::bigint AS credits, sum(calls)::bigint AS calls,
                  COALESCE(sum(calls) FILTER (WHERE refunded), 0)::bigint AS refunds
           FROM usage_history WHERE pubkey = $1 GROUP BY method""",
        pubkey,
    )
    return {r["method"]: (r["credits"], r["calls"], r["refunds"]) for r in rows}


async def test_totals_equal_the_usage_rows(
    gateway: RunningGateway,
    http: aiohttp.ClientSession,
    signer: WalletSigner,
    db: asyncpg.Connection,
    devnode: Devnode,
    database_url: str,
) -> None:
    pubkey = signer.pubkey
    await create_account(db, pubkey)
    key = await create_api_key(http, signer, gateway.url)
    for i in range(3):
        await _call(http, gateway.url, key, _rpc("getSlot", id_=i))
    batch = [_rpc("getSlot", id_=1), _rpc("getBalance", [pubkey], id_=2), _rpc("getBalance", [pubkey], id_=3)]
    await _call(http, gateway.url, key, batch)
    purged = devnode.chain.first_available_block
    del devnode.chain.blocks[purged]  # retention passed over the node's oldest block: the node's failure
    config = {"maxSupportedTransactionVersion": 0, "transactionDetails": "none", "rewards": False}
    refused = await _call(http, gateway.url, key, _rpc("getBlock", [purged, config]))
    assert isinstance(refused, dict) and refused["error"]["code"] == -32004, refused
    await gateway.app.meter.flush()
    signature = new_signature()  # a sendAndConfirm's settlement writes its usage row itself
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    try:
        held = await sends.hold(pool, pubkey, signature, "11111111111111111111111111111111", 10, 2, f"{signature}-1")
        assert held.outcome is sends.HoldOutcome.HELD
        await sends.settle(pool, signature, SendStatus.CONFIRMED, slot=10)
    finally:
        await pool.close()

    sums = await _sums(db, pubkey)
    assert sums["getSlot"] == (4, 4, 0) and sums["getBalance"] == (2, 2, 0)
    assert sums["getBlock"] == (0, 1, 1) and sums["sendAndConfirm"] == (10, 1, 0)
    answer = await request(http, "GET", gateway.url + "/account/usage/daily", headers={"X-Api-Key": key})
    assert answer.status == 200, answer
    doc = answer.json
    today = datetime.now(UTC).date().isoformat()
    assert doc["ok"] is True and doc["to"] == today and len(doc["days"]) == 30
    assert {m["method"]: (m["credits"], m["calls"], m["refunds"]) for m in doc["methods"]} == sums
    classes = {m["method"]: m["class"] for m in doc["methods"]}
    assert classes["getSlot"] == "READ_CHEAP" and classes["getBlock"] == "READ_HEAVY"
    day = doc["days"][-1]
    assert day["day"] == today
    assert (day["credits"], day["calls"], day["refunds"]) == (16, 8, 1)
    assert sum(c["credits"] for c in day["classes"].values()) == 16
    assert all(d["calls"] == 0 and d["classes"] == {} for d in doc["days"][:-1])

    # the same totals from the table, summed per key: one row per (day, method), not per call
    stored = await db.fetch("SELECT method, credits, calls, refunds FROM usage_daily WHERE pubkey = $1", pubkey)
    assert {r["method"]: (r["credits"], r["calls"], r["refunds"]) for r in stored} == sums

    token = await open_session(http, signer, gateway.url)  # any credential
    week = await request(
        http,
        "GET",
        gateway.url + "/account/usage/daily",
        headers={"Authorization": f"Bearer {token}"},
        params={"days": "7"},
    )
    assert week.status == 200 and len(week.json["days"]) == 7 and week.json["methods"] == doc["methods"]


@pytest.mark.parametrize("days", ["0", "367", "-1", "x", "1.5", ""])
async def test_bad_days_is_400(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection, days: str
) -> None:
    await create_account(db, signer.pubkey)
    key = await create_api_key(http, signer, gateway.url)
    answer = await request(
        http, "GET", gateway.url + "/account/usage/daily", headers={"X-Api-Key": key}, params={"days": days}
    )
    assert answer.status == 400 and answer.json["error"]["code"] == "INVALID_REQUEST", answer


async def _csv(
    http: aiohttp.ClientSession, url: str, key: str, params: dict[str, str] | None = None
) -> list[list[str]]:
    async with http.get(url, headers={"X-Api-Key": key}, params=params) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.headers["Content-Type"].startswith("text/csv")
        assert "attachment" in resp.headers["Content-Disposition"]
        text = (await resp.read()).decode()
    return list(csv.reader(io.StringIO(text)))


async def test_csv_exports_stream_every_row_with_formulas_guarded(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    pubkey = signer.pubkey
    await create_account(db, pubkey)
    key = await create_api_key(http, signer, gateway.url)
    await db.execute(
        """INSERT INTO usage_history (pubkey, method, credits, request_id)
           SELECT $1, 'getSlot', 1, 'r' || i FROM generate_series(1, 4500) AS i""",
        pubkey,
    )
    await db.execute(
        "INSERT INTO usage_history (pubkey, method, credits, request_id) VALUES ($1, '=HYPERLINK(\"x\")', 2, '+1,2')",
        pubkey,
    )
    rows = await _csv(http, gateway.url + "/account/usage.csv", key)
    assert rows[0] == ["timestamp", "method", "calls", "credits", "refunded", "request_id"]
    assert len(rows) == 1 + 4501  # more than two of the server's pages
    assert rows[1][1:] == ['\'=HYPERLINK("x")', "1", "2", "false", "'+1,2"]
    assert [r[5] for r in rows[2:5]] == ["r4500", "r4499", "r4498"] and rows[-1][5] == "r1"

    first = await _csv(http, gateway.url + "/account/usage.csv", key, {"limit": "10"})
    assert len(first) == 1 + 10 + 1 and first[-1][0].startswith("# more rows: continue with ?cursor=")
    cursor = first[-1][0].rsplit("=", 1)[1]
    rest = await _csv(http, gateway.url + "/account/usage.csv", key, {"cursor": cursor, "limit": "3"})
    assert [r[5] for r in rest[1:4]] == ["r4491", "r4490", "r4489"]

    ledger = await _csv(http, gateway.url + "/account/ledger.csv", key)
    assert ledger[0] == ["timestamp", "type", "amount", "balance", "description", "signature"]
    assert len(ledger) == 2 and ledger[1][1] == "deposit" and ledger[1][5].startswith("test-deposit-")


@pytest.mark.parametrize("params", [{"limit": "0"}, {"limit": "1000001"}, {"cursor": "x"}, {"limit": "-5"}])
async def test_bad_export_parameters_are_400(
    gateway: RunningGateway,
    http: aiohttp.ClientSession,
    signer: WalletSigner,
    db: asyncpg.Connection,
    params: dict[str, str],
) -> None:
    await create_account(db, signer.pubkey)
    key = await create_api_key(http, signer, gateway.url)
    for path in ("/account/usage.csv", "/account/ledger.csv"):
        answer = await request(http, "GET", gateway.url + path, headers={"X-Api-Key": key}, params=params)
        assert answer.status == 400 and answer.json["error"]["code"] == "INVALID_REQUEST", answer


@pytest.mark.parametrize("path", ["/account/usage/daily", "/account/usage.csv", "/account/ledger.csv"])
async def test_without_credentials_402_and_without_account_404(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, path: str
) -> None:
    bare = await request(http, "GET", gateway.url + path)
    assert (bare.status, bare.code) == (402, -32002), bare
    token = await open_session(http, signer, gateway.url)  # a wallet with no account record
    missing = await request(http, "GET", gateway.url + path, headers={"Authorization": f"Bearer {token}"})
    assert (missing.status, missing.code) == (404, "ACCOUNT_NOT_FOUND"), missing


async def test_the_migration_backfills_the_totals_of_existing_rows(database_url: str) -> None:
    """Migration 0027 on a database that already holds usage rows: their totals, per UTC day and method."""
    parts = urlsplit(database_url)
    name = f"backfill_{secrets.token_hex(5)}"
    admin = await asyncpg.connect(urlunsplit(parts._replace(path="/postgres")))
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    url = urlunsplit(parts._replace(path=f"/{name}"))
    try:
        conn = await asyncpg.connect(url)
        try:
            await migrate(conn, [m for m in shipped_migrations() if m.version < 27])
            await conn.execute(
                """INSERT INTO usage_history (pubkey, method, credits, refunded, calls, created_at) VALUES
                   ('a', 'getSlot', 1, false, 1, '2026-01-01 23:59:59+00'),
                   ('a', 'getSlot', 0, true, 1, '2026-01-01 10:00:00+00'),
                   ('a', 'getSlot', 1, false, 1, '2026-01-02 00:00:00+00'),
                   ('a', 'accountNotification', 6, false, 6, '2026-01-02 01:00:00+00'),
                   ('b', 'getBlock', 25, false, 1, '2026-01-01 12:00:00+00')"""
            )
            await migrate(conn)
            rows = await conn.fetch("SELECT * FROM usage_daily ORDER BY pubkey, day, method")
        finally:
            await conn.close()
    finally:
        await drop_database(url)
    assert [(r["pubkey"], str(r["day"]), r["method"], r["credits"], r["calls"], r["refunds"]) for r in rows] == [
        ("a", "2026-01-01", "getSlot", 1, 2, 1),
        ("a", "2026-01-02", "accountNotification", 6, 6, 0),
        ("a", "2026-01-02", "getSlot", 1, 1, 0),
        ("b", "2026-01-01", "getBlock", 25, 1, 0),
    ]


def test_the_servers_cells_are_the_pages() -> None:
    """The server's CSV cell (gateway.auth.usage_totals.cell) is the page's (tests/app/test_csv_cells.py's cases)."""
    assert [cell(value, text) for (value, text), _ in CASES] == [want for _, want in CASES]
