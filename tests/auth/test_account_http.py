"""Account endpoints over real HTTP: the Account resource, ledger and history paging, 404 and 400."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from gateway.base.keys import DEPOSIT_WALLET, load_keypair
from gateway.storage import sends
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key, open_session, request, signed
from tests.credits.helpers import fund, new_signature
from tests.support import RunningGateway

ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


async def _ledger(db: asyncpg.Connection, pubkey: str, rows: list[tuple[str, int, str]]) -> None:
    """Hand-written ledger rows, with the account's cached balance and consumption kept in step."""
    balance = 0
    consumed = -sum(amount for kind, amount, _ in rows if kind in ("debit", "refund"))
    await db.execute(
        "UPDATE accounts SET balance = $2, total_consumed = $3 WHERE pubkey = $1",
        pubkey,
        sum(amount for _, amount, _ in rows),
        consumed,
    )
    for kind, amount, description in rows:
        balance += amount
        await db.execute(
            "INSERT INTO ledger_entries (pubkey, type, amount, balance_after, description) VALUES ($1, $2, $3, $4, $5)",
            pubkey,
            kind,
            amount,
            balance,
            description,
        )


async def test_info_of_a_fresh_account(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, auth_home: Path
) -> None:
    before = int(datetime.now(UTC).timestamp())
    key = await create_api_key(http, signer, gateway.url)
    answer = await request(http, "GET", gateway.url + "/account/info", headers={"X-Api-Key": key})
    assert answer.status == 200, answer
    info = answer.json
    settings = gateway.app.settings
    deposit = str(load_keypair(auth_home / DEPOSIT_WALLET).pubkey())
    assert info["ok"] is True and info["pubkey"] == signer.pubkey
    assert info["balance"] == 0 and info["total_consumed_credits"] == 0 and info["pending_send_credits"] == 0
    assert info["status"] == "active"
    assert info["deposit_address"] == deposit
    assert before - 2 <= info["created_at"] <= before + 5
    assert info["last_deposit"] is None and info["credit_batches"] == []
    funding = info["funding"]
    assert funding == {
        **funding,  # and the extra guidance: minimum, what happens below it, when credits arrive
        "asset": "USDC",
        "network": "solana-mainnet",  # a gateway whose upstream is configured: not the embedded devnode
        "network_description": "solana-mainnet",
        "usdc_mint": settings.usdc_mint,
        "deposit_address": deposit,
        "credits_per_usdc": settings.credits_per_usdc,
        "credit_expiry_seconds": settings.credit_expiry_seconds,
        "credit_expiry_days": settings.credit_expiry_seconds // 86_400,
        "attribution": "USDC must be sent from the same wallet public key that activates the account",
        "minimum_deposit_usdc": "0.01",
    }
    assert "30 seconds" in funding["crediting"] and "not sent back" in funding["below_minimum"]


async def test_info_with_deposits_batches_and_spending(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    pubkey = signer.pubkey
    await create_account(db, pubkey, usdc_base_units=0)
    await _ledger(
        db, pubkey, [("deposit", 150_000, "1.5 USDC"), ("debit", -30, "getSlot x30"), ("refund", 5, "refund")]
    )
    now = datetime.now(UTC)
    await db.execute(
        "INSERT INTO deposits (signature, pubkey, amount_base_units, credits, status, created_at)"
        " VALUES ($1, $2, 10000, 1000, 'credited', $3), ($4, $2, 1500000, 150000, 'credited', $5),"
        " ($6, $2, 5, 0, 'ignored', $7)",
        f"old-{pubkey}",
        pubkey,
        now - timedelta(days=2),
        f"new-{pubkey}",
        now - timedelta(days=1),
        f"ignored-{pubkey}",
        now,
    )
    live = await db.fetchval(
        "INSERT INTO credit_batches (pubkey, source, granted, remaining, expires_at)"
        " VALUES ($1, 'deposit', 150000, 149975, $2) RETURNING id",
        pubkey,
        now + timedelta(days=30),
    )
    await db.execute(
        "INSERT INTO credit_batches (pubkey, source, granted, remaining, expires_at)"
        " VALUES ($1, 'bonus', 10, 10, $2), ($1, 'bonus', 10, 0, $3)",
        pubkey,
        now - timedelta(seconds=1),
        now + timedelta(days=30),
    )

    info = (await signed(http, signer, "GET", gateway.url, "/account/info")).json
    assert info["balance"] == 149_975
    assert info["total_consumed_credits"] == 25
    assert info["last_deposit"]["signature"] == f"new-{pubkey}"
    assert info["last_deposit"]["amount_usdc"] == "1.5"
    assert info["last_deposit"]["credits"] == 150_000
    assert ISO_UTC.fullmatch(info["last_deposit"]["timestamp"])
    assert len(info["credit_batches"]) == 1
    batch = info["credit_batches"][0]
    assert {k: batch[k] for k in ("id", "source", "granted", "remaining")} == {
        "id": live,
        "source": "deposit",
        "granted": 150_000,
        "remaining": 149_975,
    }
    assert ISO_UTC.fullmatch(batch["expires_at"])


async def test_ledger_and_history_pages_newest_first(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    pubkey = signer.pubkey
    await create_account(db, pubkey, usdc_base_units=0)
    await _ledger(db, pubkey, [("deposit", 100, "d1")] + [("debit", -1, f"call {i}") for i in range(4)])
    for i in range(5):
        await db.execute("INSERT INTO usage_history (pubkey, method, credits) VALUES ($1, $2, $3)", pubkey, f"m{i}", i)
    token = await open_session(http, signer, gateway.url)
    bearer = {"Authorization": f"Bearer {token}"}

    everything = await request(http, "GET", gateway.url + "/account/ledger", headers=bearer)
    assert everything.status == 200, everything
    entries = everything.json["entries"]
    assert [e["description"] for e in entries] == ["call 3", "call 2", "call 1", "call 0", "d1"]
    assert entries[0] == {**entries[0], "type": "debit", "amount": -1, "balance": 96}
    assert entries[-1]["type"] == "deposit" and entries[-1]["balance"] == 100
    assert all(ISO_UTC.fullmatch(e["timestamp"]) for e in entries)

    page = await request(
        http, "GET", gateway.url + "/account/ledger", headers=bearer, params={"offset": "1", "limit": "2"}
    )
    assert [e["description"] for e in page.json["entries"]] == ["call 2", "call 1"]
    assert page.json["next_cursor"] is not None  # a full page: there may be more
    past_end = await request(http, "GET", gateway.url + "/account/ledger", headers=bearer, params={"offset": "50"})
    assert past_end.json == {"entries": [], "next_cursor": None}

    walked: list[str] = []  # by cursor, two at a time, to the end
    params = {"limit": "2"}
    while True:
        answer = await request(http, "GET", gateway.url + "/account/ledger", headers=bearer, params=params)
        walked += [e["description"] for e in answer.json["entries"]]
        if answer.json["next_cursor"] is None:
            break
        params = {"limit": "2", "cursor": answer.json["next_cursor"]}
    assert walked == ["call 3", "call 2", "call 1", "call 0", "d1"]

    history = await request(http, "GET", gateway.url + "/account/history", headers=bearer, params={"limit": "3"})
    assert history.status == 200
    assert [(e["method"], e["credits"]) for e in history.json["entries"]] == [("m4", 4), ("m3", 3), ("m2", 2)]
    assert set(history.json["entries"][0]) == {"method", "credits", "timestamp", "request_id", "refunded", "calls"}


@pytest.mark.parametrize("path", ["/account/ledger", "/account/history"])
@pytest.mark.parametrize(
    "params",
    [
        {"limit": "0"},
        {"limit": "1001"},
        {"limit": "abc"},
        {"offset": "-1"},
        {"offset": "1.5"},
        {"offset": "9" * 30},
        {"offset": "10001"},  # deeper pages go by cursor: no scan of every row before the page
        {"offset": "2147483647"},
        {"cursor": "x"},
        {"cursor": "0"},
        {"cursor": "5", "offset": "1"},
    ],
)
async def test_bad_paging_is_400(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, path: str, params: dict[str, str]
) -> None:
    key = await create_api_key(http, signer, gateway.url)
    answer = await request(http, "GET", gateway.url + path, headers={"X-Api-Key": key}, params=params)
    assert (answer.status, answer.code) == (400, "INVALID_REQUEST"), answer


async def test_limit_1000_is_allowed(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    key = await create_api_key(http, signer, gateway.url)
    answer = await request(
        http, "GET", gateway.url + "/account/ledger", headers={"X-Api-Key": key}, params={"limit": "1000"}
    )
    assert answer.status == 200


@pytest.mark.parametrize("path", ["/account/info", "/account/ledger", "/account/history"])
async def test_missing_account_is_404(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, path: str
) -> None:
    answer = await signed(http, signer, "GET", gateway.url, path)
    assert (answer.status, answer.code) == (404, "ACCOUNT_NOT_FOUND"), answer
    token = await open_session(http, signer, gateway.url)
    by_session = await request(http, "GET", gateway.url + path, headers={"Authorization": f"Bearer {token}"})
    assert (by_session.status, by_session.code) == (404, "ACCOUNT_NOT_FOUND")


@pytest.mark.parametrize("path", ["/account/info", "/account/ledger", "/account/history"])
async def test_account_reads_without_credentials_are_402(
    gateway: RunningGateway, http: aiohttp.ClientSession, path: str
) -> None:
    answer = await request(http, "GET", gateway.url + path)
    assert (answer.status, answer.code) == (402, -32002)
    assert "payment-required" in answer.headers


async def test_info_shows_the_credits_held_for_sends_not_settled_yet(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    """A sendAndConfirm whose outcome is unknown holds its landing price: part of the balance, not
    spendable, and shown apart until it is settled."""
    key = await create_api_key(http, signer, gateway.url)
    await fund(gateway.app.conn.db, signer.pubkey, 100)
    held = await sends.hold(
        gateway.app.conn.db, signer.pubkey, new_signature(), "11111111111111111111111111111111", 10, 2, "r1"
    )
    assert held.outcome is sends.HoldOutcome.HELD, held
    info = (await request(http, "GET", gateway.url + "/account/info", headers={"X-Api-Key": key})).json
    assert (info["balance"], info["pending_send_credits"]) == (100, 10), info
