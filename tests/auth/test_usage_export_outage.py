"""A CSV export whose database stops answering in the middle: the status is already sent, so the file
ends with the line docs/api.md names (``# stopped: ...; continue with ?cursor=<id>``), no 500, no hang.
The gateway has a private embedded PostgreSQL (tests/storage/test_store_outage.py's fixtures), stopped
by the test."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import asyncpg

from gateway_client import WalletSigner
from tests.auth.helpers import create_api_key
from tests.storage.test_store_outage import Stores, gateway, http, stores  # noqa: F401 - its fixtures
from tests.support import RunningGateway

#: 300,000 rows, about 18 MB of CSV: far more than loopback's socket buffers hold, so the gateway is still
#: reading pages (held back by the reader) when the database stops.
ROWS = 300_000


async def test_an_export_the_database_stops_under_says_where_it_stopped(
    stores: Stores,  # noqa: F811
    gateway: RunningGateway,  # noqa: F811
    http: aiohttp.ClientSession,  # noqa: F811
) -> None:
    signer = WalletSigner(bytes(32 * [7]))
    key = await create_api_key(http, signer, gateway.url)
    conn = await asyncpg.connect(stores.database_url)
    try:
        await conn.execute(
            """INSERT INTO usage_history (pubkey, method, credits, request_id)
               SELECT $1, 'getSlot', 1, 'r' || i FROM generate_series(1, $2::int) AS i""",
            signer.pubkey,
            ROWS,
        )
    finally:
        await conn.close()
    async with http.get(gateway.url + "/account/usage.csv", headers={"X-Api-Key": key}) as resp:
        assert resp.status == 200
        first = await resp.content.readline()
        assert first == b"timestamp,method,calls,credits,refunded,request_id\r\n"
        head = await resp.content.readexactly(1_000_000)  # rows of the first pages are out
        await asyncio.to_thread(stores.postgres.stop)
        rest = await asyncio.wait_for(resp.content.read(), 60)
    lines = (head + rest).decode().splitlines()
    assert 1_000_000 // 60 < len(lines) - 1 < ROWS
    assert re.fullmatch(r"# stopped: the database did not answer; continue with \?cursor=[0-9]+", lines[-1]), lines[-1]
    cursor = int(lines[-1].rsplit("=", 1)[1])
    assert lines[-2].endswith(f",r{cursor}")  # the last row sent: the next export starts below it
