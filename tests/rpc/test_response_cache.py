"""The finality-aware response cache through running gateways, on real transactions of the local chain.

Each gateway is in front of a relay to the session's devnode that keeps every request it passes on,
so "served from the cache" is seen as "the node was not asked". Every test makes its own transactions:
the shared layer (the session's Redis) outlives a test, and a fresh signature is a fresh key.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import redis.asyncio as aioredis
from solana.rpc.async_api import AsyncClient
from solana.rpc.models import TxOpts
from solders.keypair import Keypair
from solders.transaction import Transaction

from gateway.rpc.cache_rules import cache_key
from gateway.rpc.store import BUDGET_PREFIX, PREFIX, WINDOW_S, SharedResponses
from gateway.runtime.ports import free_port
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.chain import send_sol, signed_transfer, wait_landed
from tests.recorded_metrics import recording
from tests.sending.conftest import FailingRelay, sending_settings
from tests.sending.helpers import Caller
from tests.support import RunningGateway, serve_gateway

TX_PRICE = 5  # getTransaction: READ_MEDIUM
STATUS_PRICE = 1  # getSignatureStatuses: READ_CHEAP


class Answer:
    """One JSON-RPC call through a gateway: status, headers (lower-case names), the raw body, the credits left."""

    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = headers
        self.raw = raw
        self.doc: Any = orjson.loads(raw)
        self.remaining = int(headers.get("x-credits-remaining", "-1"))

    @property
    def cache(self) -> str | None:
        return self.headers.get("x-cache")


async def post(caller: Caller, body: Any) -> Answer:
    async with caller.http.post(caller.url + "/", data=orjson.dumps(body), headers=caller.headers) as resp:
        return Answer(resp.status, {k.lower(): v for k, v in resp.headers.items()}, await resp.read())


async def rpc(caller: Caller, method: str, params: list[Any]) -> Answer:
    answer = await post(caller, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert answer.status == 200, answer.raw
    return answer


async def node_raw(node_url: str, method: str, params: list[Any]) -> bytes:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with aiohttp.ClientSession() as http, http.post(node_url, json=body) as resp:
        return await resp.read()


async def finalized_transfer(node_url: str, payer: Keypair) -> str:
    async with AsyncClient(node_url) as client:
        sig = await send_sol(client, payer, Keypair().pubkey(), 1_000_000)
        await wait_landed(client, sig, finalized=True)
    return str(sig)


@asynccontextmanager
async def relayed(
    relay: FailingRelay, home: Path, database_url: str, redis_url: str, db: asyncpg.Connection, **extra: object
) -> AsyncIterator[tuple[RunningGateway, Caller]]:
    """Another gateway (a replica) in front of ``relay``, with ``extra`` settings, and a paying caller."""
    url = f"http://127.0.0.1:{relay.port}/"
    settings = sending_settings(home, database_url, redis_url, url, **extra)
    async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
        signer = WalletSigner(os.urandom(32))
        key = await create_api_key(http, signer, gw.url)
        await create_account(db, signer.pubkey)
        yield gw, Caller(http, gw.url, signer, key)


# -- getTransaction ------------------------------------------------------------------------------------


async def test_a_finalized_transaction_is_served_from_the_cache_and_charged_alike(
    relayed_caller: Caller, relay: FailingRelay, payer: Keypair, devnode_url: str
) -> None:
    sig = await finalized_transfer(devnode_url, payer)
    params: list[Any] = [sig, {"encoding": "json"}]  # the node's default commitment: finalized
    start = await rpc(relayed_caller, "getSlot", [])
    miss = await rpc(relayed_caller, "getTransaction", params)
    assert miss.cache == "miss" and miss.doc["result"]["transaction"]["signatures"] == [sig]
    assert relay.count(sig) == 1
    hit = await rpc(relayed_caller, "getTransaction", params)
    assert hit.cache == "hit"
    assert relay.count(sig) == 1  # the node was not asked again
    # byte for byte what the node itself answers (the params as planning forwards them)
    direct = await node_raw(
        devnode_url, "getTransaction", [sig, {"encoding": "json", "maxSupportedTransactionVersion": 0}]
    )
    assert hit.raw == miss.raw == direct
    # billing does not change: the caller pays the class price either way
    assert start.remaining - miss.remaining == TX_PRICE
    assert miss.remaining - hit.remaining == TX_PRICE


async def test_a_confirmed_read_is_never_cached(
    relayed_caller: Caller, relay: FailingRelay, payer: Keypair, devnode_url: str
) -> None:
    sig = await finalized_transfer(devnode_url, payer)
    params: list[Any] = [sig, {"commitment": "confirmed"}]
    first = await rpc(relayed_caller, "getTransaction", params)
    second = await rpc(relayed_caller, "getTransaction", params)
    assert first.doc["result"] is not None and first.doc == second.doc
    assert (first.cache, second.cache) == ("miss", "miss")
    assert relay.count(sig) == 2


async def test_not_found_is_not_cached_and_the_transaction_is_served_once_finalized(
    relayed_caller: Caller, relay: FailingRelay, payer: Keypair, devnode_url: str
) -> None:
    raw = base64.b64decode(await signed_transfer(devnode_url, payer, Keypair().pubkey(), 1_000_000))
    tx = Transaction.from_bytes(raw)
    sig = str(tx.signatures[0])
    before = await rpc(relayed_caller, "getTransaction", [sig])
    assert before.doc["result"] is None and before.cache == "miss"
    async with AsyncClient(devnode_url) as client:
        await client.send_raw_transaction(raw, TxOpts(skip_preflight=True))
        await wait_landed(client, tx.signatures[0], finalized=True)
    after = await rpc(relayed_caller, "getTransaction", [sig])
    assert after.doc["result"]["transaction"]["signatures"] == [sig], after.doc  # not the null of before
    again = await rpc(relayed_caller, "getTransaction", [sig])
    assert again.cache == "hit" and again.raw == after.raw
    assert relay.count(sig) == 2


async def test_a_status_that_is_not_final_yet_is_never_served_once_it_changed(
    relayed_caller: Caller, relay: FailingRelay, payer: Keypair, devnode_url: str
) -> None:
    """A status read before finalization (processed or confirmed) goes to the node every time; the first
    finalized one is what the next call gets, and from then on from the cache."""
    seen: list[str] = []
    async with AsyncClient(devnode_url) as client:
        for _ in range(5):  # 100 ms slots: catch a transaction before it is finalized
            raw = base64.b64decode(await signed_transfer(devnode_url, payer, Keypair().pubkey(), 1_000_000))
            sig = str(Transaction.from_bytes(raw).signatures[0])
            await client.send_raw_transaction(raw, TxOpts(skip_preflight=True))
            seen = []
            while not seen or seen[-1] != "finalized":
                status = (await rpc(relayed_caller, "getSignatureStatuses", [[sig]])).doc["result"]["value"][0]
                if status is not None:
                    seen.append(status["confirmationStatus"])
                await asyncio.sleep(0.03)  # under the account's 50 calls a second
            if seen[0] != "finalized":
                break
    assert seen[0] in ("processed", "confirmed"), seen
    asked = relay.count(sig)
    cached = await rpc(relayed_caller, "getSignatureStatuses", [[sig]])
    assert cached.cache == "hit" and cached.doc["result"]["value"][0]["confirmationStatus"] == "finalized"
    assert relay.count(sig) == asked


async def test_an_answer_that_may_change_is_kept_only_for_the_configured_ttl(
    relay: FailingRelay, tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection, payer: Keypair
) -> None:
    sig = await finalized_transfer(relay.node_url, payer)
    params: list[Any] = [sig, {"commitment": "confirmed"}]
    async with relayed(relay, tmp_path, database_url, redis_url, db, response_cache_unfinalized_ttl_ms=500) as (
        _,
        caller,
    ):
        first = await rpc(caller, "getTransaction", params)
        second = await rpc(caller, "getTransaction", params)
        assert (first.cache, second.cache) == ("miss", "hit") and relay.count(sig) == 1
        await asyncio.sleep(0.6)
        third = await rpc(caller, "getTransaction", params)
        assert third.cache == "miss" and relay.count(sig) == 2


# -- getSignatureStatuses, batches, other methods ----------------------------------------------------------


async def test_only_the_statuses_the_cache_lacks_go_to_the_node(
    relayed_caller: Caller, relay: FailingRelay, payer: Keypair, devnode_url: str
) -> None:
    final = await finalized_transfer(devnode_url, payer)
    unknown = str(
        Transaction.from_bytes(
            base64.b64decode(await signed_transfer(devnode_url, payer, payer.pubkey(), 1))
        ).signatures[0]
    )
    first = await rpc(relayed_caller, "getSignatureStatuses", [[final]])
    assert first.cache == "miss" and first.doc["result"]["value"][0]["confirmationStatus"] == "finalized"
    both = await rpc(relayed_caller, "getSignatureStatuses", [[unknown, final], {"searchTransactionHistory": True}])
    assert both.cache == "partial"
    assert both.doc["result"]["value"] == [None, first.doc["result"]["value"][0]]
    assert relay.count(final) == 1 and relay.count(unknown) == 1  # the node was asked for the unknown one only
    asked = next(orjson.loads(b) for b in relay.bodies if unknown.encode() in b)
    assert asked["params"][0] == [unknown]
    alone = await rpc(relayed_caller, "getSignatureStatuses", [[final]])
    assert alone.cache == "hit" and alone.doc["result"]["value"] == first.doc["result"]["value"]
    assert relay.count(final) == 1
    assert first.remaining - both.remaining == STATUS_PRICE and both.remaining - alone.remaining == STATUS_PRICE


async def test_a_batch_says_partial_and_other_final_methods_are_cached(
    relayed_caller: Caller, relay: FailingRelay, devnode_url: str
) -> None:
    tip = orjson.loads(await node_raw(devnode_url, "getSlot", []))["result"]
    slot = tip - 50  # 5 s back: at or below the finalized slot the gateway's probe (every 2 s) has seen
    batch = [
        {"jsonrpc": "2.0", "id": "t", "method": "getBlockTime", "params": [slot]},
        {"jsonrpc": "2.0", "id": "g", "method": "getGenesisHash"},
        {"jsonrpc": "2.0", "id": "e", "method": "getEpochSchedule"},
    ]
    first = await post(relayed_caller, batch)
    asked = relay.count(f'"getBlockTime","params":[{slot}]')
    assert first.status == 200 and asked == 1
    second = await post(relayed_caller, batch)
    assert second.cache == "hit" and second.raw == first.raw
    assert relay.count(f'"getBlockTime","params":[{slot}]') == 1
    mixed = await post(relayed_caller, [*batch, {"jsonrpc": "2.0", "id": "s", "method": "getSlot"}])
    assert mixed.cache == "partial" and [a["id"] for a in mixed.doc] == ["t", "g", "e", "s"]
    future = await rpc(relayed_caller, "getBlockTime", [tip + 100_000])  # not a finalized slot: an error, not kept
    assert "error" in future.doc and future.cache == "miss"


async def test_a_method_never_cached_is_a_miss_the_node_answers(relayed_caller: Caller) -> None:
    """``getSlot`` is no cached method: the forwarder looks nothing up, and the call still says ``miss`` and
    is counted once as a miss, alone or as a batch."""
    with recording() as recorded:
        one = await rpc(relayed_caller, "getSlot", [])
        batch = await post(relayed_caller, [{"jsonrpc": "2.0", "id": n, "method": "getSlot"} for n in range(3)])
    assert (one.cache, batch.cache) == ("miss", "miss")
    assert isinstance(one.doc["result"], int) and [answer["id"] for answer in batch.doc] == [0, 1, 2]
    assert all(isinstance(answer["result"], int) for answer in batch.doc)
    assert recorded.counts[("gateway_response_cache_lookups_total", ("miss",))] == 2
    assert recorded.counts[("gateway_response_cache_lookups_total", ("hit",))] == 0


# -- settings and the shared layer ----------------------------------------------------------------------


async def test_the_setting_off_caches_nothing(
    relay: FailingRelay, tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection, payer: Keypair
) -> None:
    sig = await finalized_transfer(relay.node_url, payer)
    async with relayed(relay, tmp_path, database_url, redis_url, db, response_cache=False) as (gw, caller):
        assert gw.app.cache is None
        first = await rpc(caller, "getTransaction", [sig])
        second = await rpc(caller, "getTransaction", [sig])
    assert first.doc == second.doc and first.doc["result"] is not None
    assert first.cache is None and second.cache is None
    assert relay.count(sig) == 2


async def test_another_replica_finds_a_final_answer_in_redis(
    relay: FailingRelay,
    tmp_path: Path,
    database_url: str,
    redis_url: str,
    db: asyncpg.Connection,
    redis_client: aioredis.Redis,
    payer: Keypair,
) -> None:
    sig = await finalized_transfer(relay.node_url, payer)
    key = PREFIX + cache_key("getTransaction", [sig, {"maxSupportedTransactionVersion": 0}])
    async with relayed(relay, tmp_path / "a", database_url, redis_url, db) as (_, one):
        miss = await rpc(one, "getTransaction", [sig])
        assert miss.cache == "miss"
        for _ in range(100):  # written off the call's path
            if await redis_client.exists(key):
                break
            await asyncio.sleep(0.02)
        assert 0 < await redis_client.ttl(key) <= 3600  # final answers expire too: Redis runs noeviction
    async with relayed(relay, tmp_path / "b", database_url, redis_url, db) as (_, other):
        hit = await rpc(other, "getTransaction", [sig])
    assert hit.cache == "hit" and hit.raw == miss.raw
    assert relay.count(sig) == 1


async def test_redis_down_never_fails_the_call(
    relay: FailingRelay, tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection, payer: Keypair
) -> None:
    dead = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=1)
    shared = SharedResponses(dead)
    assert await shared.get_many([b"k"]) == [None]
    assert not shared.available  # left alone for a while after a failure
    await shared.set_many([(b"k", b"1", 60)])  # skipped, never raised
    closed = aioredis.Redis.from_url(redis_url)
    await closed.aclose()
    await SharedResponses(closed).set_many([(b"k", b"1", 60)])  # swallowed, whatever a closed client does
    await dead.aclose()

    sig = await finalized_transfer(relay.node_url, payer)
    async with relayed(relay, tmp_path, database_url, redis_url, db) as (gw, caller):
        assert gw.app.cache is not None
        unreachable = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=1)
        gw.app.cache.shared = SharedResponses(unreachable)
        first = await rpc(caller, "getTransaction", [sig])
        second = await rpc(caller, "getTransaction", [sig])
        await unreachable.aclose()
    assert first.doc["result"] is not None and (first.cache, second.cache) == ("miss", "hit")  # the replica's layer
    assert relay.count(sig) == 1


# -- what a caller can make the cache hold -----------------------------------------------------------------

PADDING = 250_000  # bytes of one unknown config field


async def cache_keys(redis: aioredis.Redis, fragment: str) -> list[bytes]:
    return [key async for key in redis.scan_iter(match=PREFIX + b"*", count=1000) if fragment.encode() in key]


async def used_memory(redis: aioredis.Redis) -> int:
    return int((await redis.info("memory"))["used_memory"])


async def test_padded_calls_cannot_fill_redis_and_a_normal_call_is_still_cached(
    relayed_caller: Caller, relay: FailingRelay, redis_client: aioredis.Redis, payer: Keypair, devnode_url: str
) -> None:
    """40 final reads, each with a different 250 KB config field the method does not read: each is refused
    free with -32602 before the node or the cache sees it, and the shared Redis does not grow by their
    size (before the fix: 40 keys of 250 KB, 10 MB)."""
    sig = await finalized_transfer(devnode_url, payer)
    found = await rpc(
        relayed_caller, "getTransaction", [sig, {"commitment": "confirmed"}]
    )  # not kept: a confirmed read
    slot = found.doc["result"]["slot"]
    before = await used_memory(redis_client)
    start = await rpc(relayed_caller, "getSlot", [])
    for n in range(40):
        padding = {f"pad{n}": "x" * PADDING}
        method, params = ("getTransaction", [sig, padding]) if n % 2 else ("getBlock", [slot, padding])
        answer = await rpc(relayed_caller, method, params)
        assert answer.doc["error"]["code"] == -32602 and f"`pad{n}`" in answer.doc["error"]["message"]
        assert len(answer.raw) < 1000  # the error does not echo the field
        await asyncio.sleep(0.03)  # under the account's 50 calls a second
    after_padded = await rpc(relayed_caller, "getSlot", [])
    assert start.remaining - after_padded.remaining == 1  # the getSlot: the refusals were free
    assert relay.count(sig) == 1 and relay.count("pad") == 0  # the node never saw them
    assert await cache_keys(redis_client, sig) == []
    assert await used_memory(redis_client) - before < 2 << 20

    miss = await rpc(relayed_caller, "getTransaction", [sig, {"encoding": "json"}])
    hit = await rpc(relayed_caller, "getTransaction", [sig, {"encoding": "json"}])
    assert (miss.cache, hit.cache) == ("miss", "hit") and hit.raw == miss.raw
    for _ in range(100):  # written off the call's path
        if await cache_keys(redis_client, sig):
            break
        await asyncio.sleep(0.02)
    assert len(await cache_keys(redis_client, sig)) == 1


async def budget_used(redis: aioredis.Redis) -> int:
    window = int(time.time()) // WINDOW_S
    counts = await redis.mget([BUDGET_PREFIX + str(n).encode() for n in (window, window - 1)])
    return sum(int(c) for c in counts if c is not None)


async def test_the_store_stops_sharing_answers_at_its_redis_budget(
    relay: FailingRelay,
    tmp_path: Path,
    database_url: str,
    redis_url: str,
    db: asyncpg.Connection,
    redis_client: aioredis.Redis,
    payer: Keypair,
) -> None:
    """The cache's bytes in Redis are counted there; past the budget an answer is served, not shared."""
    first, second = [await finalized_transfer(relay.node_url, payer) for _ in range(2)]
    async with relayed(relay, tmp_path, database_url, redis_url, db) as (gw, caller):
        shared = gw.app.cache.shared if gw.app.cache is not None else None
        assert shared is not None
        shared.budget_bytes = await budget_used(redis_client) + 100_000
        assert (await rpc(caller, "getTransaction", [first])).cache == "miss"
        for _ in range(100):
            if await cache_keys(redis_client, first):
                break
            await asyncio.sleep(0.02)
        assert len(await cache_keys(redis_client, first)) == 1
        spent = await budget_used(redis_client)
        assert spent > len(PREFIX) + len(first)  # the entry was counted
        shared.budget_bytes = spent  # nothing more fits
        assert (await rpc(caller, "getTransaction", [second])).cache == "miss"
        assert (await rpc(caller, "getTransaction", [second])).cache == "hit"  # the replica's layer still works
        await asyncio.sleep(0.5)
        assert await cache_keys(redis_client, second) == []
        assert await budget_used(redis_client) == spent
    assert relay.count(second) == 1
