"""A send is charged only for a landing at or after the slot its hold was taken at.

Once a settled send's record is deleted (retention, ``send_retention_days``), the same signed
transaction sent again is a new send with a new hold. It can never land again (the node refuses a
signature it has, its blockhash has expired), but a node that keeps history still answers the
signature's OLD landing: neither the request's own race nor the reconciler may charge that landing
again. It is answered as it landed (``confirmed`` here, with its slot) and charged nothing: no ledger
entry, the balance untouched. The devnode keeps history for ``retention_slots`` (54,000 here), so
its ``getSignatureStatuses`` answers the old landing the way such a node would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from gateway.credits.retention import SettledRetention
from gateway.node.http import HttpUpstream, rpc_call
from gateway.sending.reconciler_actor import SendReconciler
from tests.chain import wait_confirmed
from tests.sending.conftest import FailingRelay, caller_at
from tests.sending.helpers import Caller, b64, latest_blockhash, pay

LANDING = 10


async def debits(db: asyncpg.Connection, signature: str) -> list[tuple[int, str]]:
    rows = await db.fetch("SELECT amount, description FROM ledger_entries WHERE ref = $1 ORDER BY id", signature)
    return [(int(r["amount"]), r["description"]) for r in rows]


async def balance(db: asyncpg.Connection, pubkey: str) -> int:
    return int(await db.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey))


async def flushed(db: asyncpg.Connection, pubkey: str, method: str, timeout_s: float = 10.0) -> None:
    """Wait until the replica's usage settle wrote ``method``'s call (and took its credits from the balance)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    query = "SELECT count(*) FROM usage_history WHERE pubkey = $1 AND method = $2"
    while not await db.fetchval(query, pubkey, method):
        assert asyncio.get_running_loop().time() < deadline, f"{method}'s usage was not settled"
        await asyncio.sleep(0.1)


async def purge_as_retention_would(database_url: str, db: asyncpg.Connection, signature: str) -> None:
    """Date the settled send 40 days back and run the retention pass (30 days): its row goes."""
    await db.execute("UPDATE sends SET settled_at = now() - interval '40 days' WHERE signature = $1", signature)
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    try:
        await SettledRetention(pool, send_days=30, usage_days=90).purge_once()
    finally:
        await pool.close()
    assert await db.fetchval("SELECT count(*) FROM sends WHERE signature = $1", signature) == 0


async def reconcile_once(database_url: str, devnode_url: str) -> int:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    node = HttpUpstream(devnode_url)
    try:
        return await SendReconciler(pool, node, min_age_s=0).run_once()
    finally:
        await node.close()
        await pool.close()


async def wait_blockhash_expired(devnode_url: str, blockhash: str, timeout_s: float = 60.0) -> None:
    """150 blocks of 100 ms: about 15 s."""
    node = HttpUpstream(devnode_url)
    try:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while (await rpc_call(node, "isBlockhashValid", [blockhash, {"commitment": "processed"}]))["value"]:
            assert asyncio.get_running_loop().time() < deadline, "the blockhash did not expire"
            await asyncio.sleep(0.5)
    finally:
        await node.close()


async def test_sent_again_after_retention_the_race_finds_the_old_landing_and_charges_nothing(
    caller: Caller, payer: Keypair, devnode_url: str, database_url: str, db: asyncpg.Connection
) -> None:
    encoded = b64(pay(payer, 1_000_000, await latest_blockhash(devnode_url)))
    first = await caller.result("sendAndConfirm", [encoded])
    signature = first["signature"]
    assert first["status"] == "confirmed" and first["charged_credits"] == LANDING, first
    await purge_as_retention_would(database_url, db, signature)
    before = await balance(db, caller.signer.pubkey)

    again = await caller.result("sendAndConfirm", [encoded])  # a new send: its race finds the old landing

    assert again["status"] == "confirmed" and again["slot"] == first["slot"], again
    assert again["charged_credits"] == 0, again
    assert await debits(db, signature) == [(-LANDING, f"sendAndConfirm confirmed: {signature}")]
    assert await balance(db, caller.signer.pubkey) == before
    status = await caller.result("getSendStatus", [signature])
    assert (status["status"], status["charged_credits"], status["retry_safe"]) == ("confirmed", 0, False), status
    assert status["slot"] == first["slot"]


async def test_a_transaction_landed_by_sendtransaction_then_sent_with_sendandconfirm_is_not_charged_a_landing(
    caller: Caller, payer: Keypair, devnode_url: str, db: asyncpg.Connection
) -> None:
    """The same rule without retention: the landing came before the hold, from another send."""
    tx = pay(payer, 1_000_000, await latest_blockhash(devnode_url))
    await caller.result("sendTransaction", [b64(tx), {"encoding": "base64", "skipPreflight": True}])
    async with AsyncClient(devnode_url) as client:
        await wait_confirmed(client, tx.signatures[0])
    await flushed(db, caller.signer.pubkey, "sendTransaction")  # its 2 credits are in the balance
    before = await balance(db, caller.signer.pubkey)

    result = await caller.result("sendAndConfirm", [b64(tx)])

    assert (result["status"], result["charged_credits"]) == ("confirmed", 0), result
    assert await debits(db, result["signature"]) == []
    assert await balance(db, caller.signer.pubkey) == before


class StatusCacheRelay(FailingRelay):
    """The relay, which can answer ``getSignatureStatuses`` without ``searchTransactionHistory`` as a
    node whose status cache no longer holds the signature (``forget_old``): a real node's plain status
    answer covers recent slots only, its history answer (what the reconciler asks) every slot it keeps."""

    forget_old = False

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        response = await super()._relay(request)
        if not self.forget_old or not _plain_status_poll(json.loads(body)):
            return response
        assert isinstance(response, web.Response) and isinstance(response.body, bytes)
        doc = json.loads(response.body)
        if isinstance(doc.get("result"), dict):
            doc["result"]["value"] = [None for _ in doc["result"]["value"]]
        return web.json_response(doc)


def _plain_status_poll(doc: Any) -> bool:
    if not isinstance(doc, dict) or doc.get("method") != "getSignatureStatuses":
        return False
    params = doc.get("params") or []
    options = params[1] if len(params) > 1 and isinstance(params[1], dict) else {}
    return not options.get("searchTransactionHistory")


@pytest.fixture
async def cache_relay(devnode_url: str) -> AsyncIterator[StatusCacheRelay]:
    running = StatusCacheRelay(devnode_url)
    await running.start()
    yield running
    await running.stop()


async def test_sent_again_after_retention_and_expiry_the_reconciler_finds_the_old_landing_and_charges_nothing(
    cache_relay: StatusCacheRelay,
    payer: Keypair,
    devnode_url: str,
    database_url: str,
    redis_url: str,
    tmp_path: Path,
    db: asyncpg.Connection,
) -> None:
    blockhash = await latest_blockhash(devnode_url)
    encoded = b64(pay(payer, 1_000_000, blockhash))
    node_url = f"http://127.0.0.1:{cache_relay.port}/"
    async with caller_at(node_url, tmp_path, database_url, redis_url, db) as caller:
        first = await caller.result("sendAndConfirm", [encoded])
        signature = first["signature"]
        assert first["status"] == "confirmed" and first["charged_credits"] == LANDING, first
        await purge_as_retention_would(database_url, db, signature)
        await wait_blockhash_expired(devnode_url, str(blockhash))
        cache_relay.forget_old = True  # the race no longer sees it; the reconciler's history read does
        before = await balance(db, caller.signer.pubkey)

        again = await caller.result("sendAndConfirm", [encoded])
        assert again["status"] == "unknown" and again["charged_credits"] == LANDING, again  # held, pending
        assert await reconcile_once(database_url, devnode_url) >= 1

        assert await debits(db, signature) == [(-LANDING, f"sendAndConfirm confirmed: {signature}")]
        assert await balance(db, caller.signer.pubkey) == before
        status = await caller.result("getSendStatus", [signature])
        assert (status["status"], status["charged_credits"], status["retry_safe"]) == ("confirmed", 0, False), status
        assert status["slot"] == first["slot"]
        assert await db.fetchval("SELECT settled_by FROM sends WHERE signature = $1", signature) == "reconciler"


async def test_a_node_that_cannot_say_its_slot_gets_nothing_held_or_sent(
    relayed_caller: Caller, relay: FailingRelay, payer: Keypair, devnode_url: str, db: asyncpg.Connection
) -> None:
    """Without the slot a landing could not be told from an earlier one: no hold, no broadcast."""
    tx = pay(payer, 1_000_000, await latest_blockhash(devnode_url))
    relay.fail_on = b'"getSlot"'
    before = await balance(db, relayed_caller.signer.pubkey)
    status, doc, _ = await relayed_caller.rpc("sendAndConfirm", [b64(tx)])

    assert status == 200 and doc["error"]["code"] == -32003, doc
    assert "nothing was sent" in doc["error"]["message"], doc
    signature = str(tx.signatures[0])
    assert await db.fetchval("SELECT count(*) FROM sends WHERE signature = $1", signature) == 0
    assert relay.count(signature) == 0 and relay.count("sendTransaction") == 0
    async with AsyncClient(devnode_url) as node:
        assert (await node.get_signature_statuses([tx.signatures[0]])).value[0] is None
    assert await balance(db, relayed_caller.signer.pubkey) == before
