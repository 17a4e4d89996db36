"""What a CSV export holds while it streams (gateway/auth/exports.py), over real HTTP on the shared
gateway with its real Redis: an account runs at most EXPORTS_PER_ACCOUNT at once over the whole service,
an export's seat comes back however it ends (whole, or cut by its client), and a rotated API key stops
the export it opened at its next page, with a last line saying why."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import asyncpg

from gateway.auth.exports import EXPORTS_PER_ACCOUNT, seat_key
from gateway.storage.seats import Seat, Seats
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key, request
from tests.support import RunningGateway

#: About 18 MB of CSV: far more than loopback's socket buffers hold, so an export the test reads no
#: further is still reading pages, held back by its reader.
ROWS = 300_000
HEAD = b"timestamp,method,calls,credits,refunded,request_id\r\n"


async def take_all(seats: Seats, pubkey: str, within_s: float = 10.0) -> list[Seat]:
    """Every export seat of the account (each export has given its own back, at Redis too)."""
    deadline = time.monotonic() + within_s
    taken: list[Seat] = []
    while len(taken) < EXPORTS_PER_ACCOUNT:
        seat = await seats.take(seat_key(pubkey), EXPORTS_PER_ACCOUNT)
        if seat is not None:
            taken.append(seat)
        elif time.monotonic() > deadline:
            raise AssertionError(f"{len(taken)} of {EXPORTS_PER_ACCOUNT} export seats came back")
        else:
            await asyncio.sleep(0.05)
    return taken


async def account_with_rows(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection, n: int
) -> str:
    """The signer's account with ``n`` usage rows; its API key."""
    await create_account(db, signer.pubkey)
    key = await create_api_key(http, signer, gateway.url)
    await db.execute(
        """INSERT INTO usage_history (pubkey, method, credits, request_id)
           SELECT $1, 'getSlot', 1, 'r' || i FROM generate_series(1, $2::int) AS i""",
        signer.pubkey,
        n,
    )
    return key


async def test_an_accounts_exports_at_once_are_capped_over_the_service(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    seats = gateway.app.seats
    assert seats.shared  # counted at Redis, as every replica counts them
    key = await account_with_rows(gateway, http, signer, db, 10)
    elsewhere = await take_all(seats, signer.pubkey, 0)  # as if exports ran on other replicas
    for path in ("/account/usage.csv", "/account/ledger.csv"):
        busy = await request(http, "GET", gateway.url + path, headers={"X-Api-Key": key})
        assert (busy.status, busy.json["error"]["code"]) == (429, "CONCURRENCY_LIMITED"), busy
        assert busy.headers["retry-after"] == "1", busy.headers
        assert busy.json["error"]["data"]["concurrency_limit"] == EXPORTS_PER_ACCOUNT, busy
    await seats.give(elsewhere.pop())
    async with http.get(gateway.url + "/account/usage.csv", headers={"X-Api-Key": key}) as resp:
        assert resp.status == 200
        assert (await resp.read()).count(b"\r\n") == 1 + 10
    await seats.give(elsewhere.pop())
    for seat in await take_all(seats, signer.pubkey):  # the export gave its seat back
        await seats.give(seat)


async def test_an_export_cut_by_its_client_gives_its_seat_back(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    key = await account_with_rows(gateway, http, signer, db, ROWS)
    for _ in range(EXPORTS_PER_ACCOUNT + 1):  # one more than the cap: each cut one came back
        async with http.get(gateway.url + "/account/usage.csv", headers={"X-Api-Key": key}) as resp:
            assert resp.status == 200
            assert await resp.content.readline() == HEAD
            await resp.content.readexactly(100_000)
            resp.close()  # the client goes away mid-file
        for seat in await take_all(gateway.app.seats, signer.pubkey):
            await gateway.app.seats.give(seat)


async def test_a_rotated_api_key_stops_the_export_it_opened(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    key = await account_with_rows(gateway, http, signer, db, ROWS)
    async with http.get(gateway.url + "/account/usage.csv", headers={"X-Api-Key": key}) as resp:
        assert resp.status == 200
        assert await resp.content.readline() == HEAD
        head = await resp.content.readexactly(1_000_000)  # rows of the first pages are out
        new_key = await create_api_key(http, signer, gateway.url)  # rotates: the old key is revoked
        await asyncio.sleep(0.5)  # the revocation is heard (the replicas' Redis channel)
        rest = await asyncio.wait_for(resp.content.read(), 60)
    lines = (head + rest).decode().splitlines()
    assert lines[-1] == "# stopped: the API key was revoked (rotated); reconnect with the new key", lines[-1]
    assert 1_000_000 // 60 < len(lines) - 1 < ROWS
    refused = await request(http, "GET", gateway.url + "/account/usage.csv", headers={"X-Api-Key": key})
    assert refused.status == 401, refused
    async with http.get(
        gateway.url + "/account/usage.csv", headers={"X-Api-Key": new_key}, params={"limit": "5"}
    ) as ok:
        assert ok.status == 200 and (await ok.read()).count(b"\r\n") == 1 + 5 + 1


async def test_a_whole_export_has_given_its_seat_back_when_its_answer_ends(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, db: asyncpg.Connection
) -> None:
    """A client that reads exports to their end one after another is never refused: no waiting."""
    key = await account_with_rows(gateway, http, signer, db, 10)
    for _ in range(5 * EXPORTS_PER_ACCOUNT):
        async with http.get(gateway.url + "/account/usage.csv", headers={"X-Api-Key": key}) as resp:
            assert resp.status == 200, await resp.text()
            assert (await resp.read()).count(b"\r\n") == 1 + 10
