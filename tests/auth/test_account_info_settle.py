"""``GET /account/info`` while a settle lands between its two reads (the store's balance, then this
replica's unsettled usage): the balance is still what the replica's last header said (issue 66)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest

from gateway.app.settings import Settings
from tests.auth.helpers import request
from tests.credits.helpers import fund, new_pubkey
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings

GET_SLOT = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"})


@pytest.fixture
async def slow_flush(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str
) -> AsyncIterator[RunningGateway]:
    """A gateway whose background flush waits a minute: the test decides when usage settles."""
    settings = Settings.model_validate(
        {
            "home": tmp_path,
            **service_key_settings(tmp_path),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode_url,
            "ip_limits": TEST_IP_LIMITS,
            "credit_flush_interval_s": 60.0,
            "lease_ttl_s": 600.0,
        }
    )
    async with serve_gateway(settings) as running:
        yield running


async def test_info_after_draining_is_consistent_with_a_settle_between_its_reads(
    slow_flush: RunningGateway, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = slow_flush.app
    pubkey = new_pubkey()
    assert app.auth.api_keys is not None
    key = await app.auth.api_keys.rotate(pubkey, None)
    await fund(app.conn.db, pubkey, 10)
    async with aiohttp.ClientSession() as http:
        remaining = []
        for _ in range(10):  # getSlot: 1 credit each, the last one drains the account
            answer = await request(http, "POST", slow_flush.url + "/", body=GET_SLOT, headers={"X-Api-Key": key})
            assert answer.status == 200, answer
            remaining.append({k.lower(): v for k, v in answer.headers.items()}["x-credits-remaining"])
        assert remaining[-1] == "0" and app.meter.unsettled(pubkey) == 10

        store = app.auth.accounts
        assert store is not None
        read = store.get
        settled: list[int] = []

        async def read_then_settle(wanted: str) -> Any:
            """The stored record, then a settle before the handler reads the unsettled usage (once)."""
            record = await read(wanted)
            if not settled:
                await app.meter.flush()
                settled.append(app.meter.unsettled(pubkey))
            return record

        monkeypatch.setattr(store, "get", read_then_settle)
        info = await request(http, "GET", slow_flush.url + "/account/info", headers={"X-Api-Key": key})
        assert info.status == 200, info
        assert settled == [0], "the settle did not happen between the reads"
        assert await db.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey) == 0
        assert (info.json["balance"], info.json["total_consumed_credits"]) == (0, 10), info.json
