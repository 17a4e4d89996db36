"""GET /signals/recent through HTTP, on a gateway served in this process: the answer's shape, its
filters and bounds, its 400s, no credit or rate headers; and the replica's feed the app starts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from gateway.app.settings import Settings
from gateway.signals.rules import KINDS, SignalEvent
from gateway.signals.store import SignalLog
from tests.signals.conftest import clear_default_log
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings

PUMP = "6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P"
RETENTION = 500
UNWANTED_HEADERS = (
    "X-Credits-Remaining",
    "X-Credits-Low",
    "X-Ratelimit-Limit",
    "X-Ratelimit-Remaining",
)


def event(slot: int, kind: str) -> SignalEvent:
    return SignalEvent(kind, PUMP, f"sig{slot}{kind}", slot, f"mint{slot}", (f"mint{slot}",), block_time=1_700_000_000)  # type: ignore[arg-type]


@pytest.fixture
async def gateway(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, redis_client: aioredis.Redis
) -> AsyncIterator[RunningGateway]:
    """A gateway over the default signal log, which holds slots 100 to 104 (a newPair and a largeSwap
    each, and a graduation at 103)."""
    await clear_default_log(redis_client)
    writer = SignalLog(redis_client)
    for slot in range(100, 105):
        extra = [event(slot, "graduation")] if slot == 103 else []
        await writer.append_slot(slot, [event(slot, "newPair"), event(slot, "largeSwap"), *extra])
    settings = Settings(
        **service_key_settings(tmp_path),
        home=tmp_path,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode_url,
        ip_limits=TEST_IP_LIMITS,
        signal_retention_events=RETENTION,
    )
    try:
        async with serve_gateway(settings) as gw:
            yield gw
    finally:
        await clear_default_log(redis_client)


async def get(gw: RunningGateway, query: str = "") -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
    async with aiohttp.ClientSession() as http, http.get(f"{gw.url}/signals/recent{query}") as resp:
        return resp.status, await resp.json(), resp.headers


def ids(doc: dict[str, Any]) -> list[str]:
    return [e["id"] for e in doc["events"]]


async def test_recent_events_newest_first_free_and_without_credit_headers(gateway: RunningGateway) -> None:
    status, doc, headers = await get(gateway)
    assert status == 200
    assert set(doc) == {"events", "more", "next_since_slot", "retention_events"}
    assert ids(doc)[:4] == ["104-1", "104-0", "103-2", "103-1"] and len(ids(doc)) == 11
    assert doc["events"][0] == {"id": "104-1", **event(104, "largeSwap").to_json()}
    assert (doc["more"], doc["next_since_slot"], doc["retention_events"]) == (False, 104, RETENTION)
    assert not [name for name in UNWANTED_HEADERS if name in headers]


async def test_filters_and_paging(gateway: RunningGateway) -> None:
    _, graduations, _ = await get(gateway, "?kind=graduation")
    assert ids(graduations) == ["103-2"]
    _, since, _ = await get(gateway, "?since_slot=102&kind=newPair")
    assert ids(since) == ["104-0", "103-0"]
    _, page, _ = await get(gateway, "?limit=4")
    assert ids(page) == ["104-1", "104-0", "103-2", "103-1"] and page["more"] is True
    _, older, _ = await get(gateway, f"?limit=4&before={ids(page)[-1]}")
    assert ids(older) == ["103-0", "102-1", "102-0", "101-1"] and older["more"] is True
    _, nothing, _ = await get(gateway, "?since_slot=104")
    assert nothing["events"] == [] and nothing["next_since_slot"] == 104


BAD_QUERIES = [
    ("?kind=rugPull", "unknown signal kind 'rugPull'; known kinds: " + ", ".join(KINDS)),
    ("?limit=0", "limit must be an integer from 1 to 1000"),
    ("?limit=1001", "limit must be an integer from 1 to 1000"),
    ("?since_slot=-1", "since_slot must be an integer"),
    ("?before=abc", "before must be an event id"),
    ("?kinds=newPair", "unknown query parameter 'kinds'"),
]


async def test_a_bad_query_is_a_400_in_the_documented_shape(gateway: RunningGateway) -> None:
    for query, message in BAD_QUERIES:
        status, doc, headers = await get(gateway, query)
        assert status == 400, query
        assert doc["error"]["code"] == "INVALID_REQUEST" and doc["error"]["message"].startswith(message)
        assert not [name for name in UNWANTED_HEADERS if name in headers]


async def test_the_route_is_documented_and_the_kinds_are_listed(gateway: RunningGateway) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{gateway.url}/openapi.json") as resp:
            document = await resp.json()
        async with http.get(f"{gateway.url}/capabilities") as resp:
            capabilities = await resp.json()
    operation = document["paths"]["/signals/recent"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"limit", "kind", "since_slot", "before"}
    assert {"200", "400", "503"} <= set(operation["responses"])
    assert capabilities["service_profile"]["signals"] == dict.fromkeys(KINDS, True)


async def test_the_replica_feed_hands_new_events_to_its_listeners(
    gateway: RunningGateway, redis_client: aioredis.Redis
) -> None:
    feed = gateway.app.signal_feed
    assert feed is not None and gateway.app.signal_log is not None
    await asyncio.wait_for(feed.ready.wait(), 10)
    got: list[tuple[str, dict[str, Any]]] = []
    token = feed.add(lambda event_id, doc: got.append((event_id, doc)))
    await SignalLog(redis_client).append_slot(105, [event(105, "walletActivity")])
    deadline = asyncio.get_running_loop().time() + 10
    while not got:
        assert asyncio.get_running_loop().time() < deadline, "the feed delivered nothing"
        await asyncio.sleep(0.02)
    feed.remove(token)
    assert got == [("105-0", event(105, "walletActivity").to_json())]


async def test_a_caller_polling_too_fast_is_limited_per_address(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str
) -> None:
    """Public, but bounded: the per-address limit ``signals`` answers 429 with Retry-After."""
    limits = {**TEST_IP_LIMITS, "signals": {"rps": 0.5, "burst": 3}}
    settings = Settings(
        **service_key_settings(tmp_path),
        home=tmp_path,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode_url,
        ip_limits=limits,
    )
    async with serve_gateway(settings) as gw:
        answers = [await get(gw) for _ in range(4)]
    assert [status for status, _, _ in answers] == [200, 200, 200, 429]
    _, doc, headers = answers[-1]
    assert doc["error"]["code"] == "RATE_LIMITED" and int(headers["Retry-After"]) >= 1, doc
