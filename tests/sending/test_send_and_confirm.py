"""sendAndConfirm on the local chain: real signed transactions, raced over the legs, held and settled.

Prices (defaults): landing 10 credits, base fee 2 (the SEND price). The ledger is read from PostgreSQL
itself: each settled send has one ``debit`` entry naming its outcome, or none when nothing is charged.
"""

from __future__ import annotations

import asyncio

import asyncpg
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.signature import Signature

from gateway.node.http import HttpUpstream
from gateway.sending.reconciler_actor import SendReconciler
from tests.sending.helpers import Caller, b64, latest_blockhash, node_simulation, pay, unknown_blockhash

LANDING, BASE_FEE = 10, 2


async def debits(db: asyncpg.Connection, signature: str) -> list[tuple[int, str]]:
    rows = await db.fetch("SELECT amount, description FROM ledger_entries WHERE ref = $1 ORDER BY id", signature)
    return [(int(r["amount"]), r["description"]) for r in rows]


async def test_a_transfer_lands_and_is_charged_the_landing_price(
    caller: Caller, payer: Keypair, devnode_url: str, db: asyncpg.Connection
) -> None:
    tx = pay(payer, 1_000_000, await latest_blockhash(devnode_url))
    result = await caller.result("sendAndConfirm", [b64(tx)])

    assert result["status"] == "confirmed" and result["confirmed"] is True, result
    assert result["signature"] == str(tx.signatures[0])
    assert result["charged_credits"] == LANDING and result["error"] is None
    assert isinstance(result["slot"], int) and result["landing_time_ms"] >= 0
    assert "local_rpc" in result["legs_attempted"] and result["retry_count"] == 0
    assert await debits(db, result["signature"]) == [(-LANDING, f"sendAndConfirm confirmed: {result['signature']}")]
    async with AsyncClient(devnode_url) as node:
        status = (await node.get_signature_statuses([tx.signatures[0]])).value[0]
    assert status is not None and status.err is None

    send_status = await caller.result("getSendStatus", [result["signature"]])
    assert send_status["status"] == "confirmed" and send_status["retry_safe"] is False
    assert send_status["charged_credits"] == LANDING


async def test_a_transaction_that_fails_on_chain_is_failed_and_pays_the_base_fee(
    caller: Caller, payer: Keypair, devnode_url: str, db: asyncpg.Connection
) -> None:
    tx = pay(payer, 10**15, await latest_blockhash(devnode_url))  # more than the payer has: fails, fee paid
    result = await caller.result("sendAndConfirm", [b64(tx)])

    assert result["status"] == "failed" and result["confirmed"] is False, result
    assert result["error"] and result["charged_credits"] == BASE_FEE
    assert await debits(db, result["signature"]) == [(-BASE_FEE, f"sendAndConfirm failed: {result['signature']}")]


async def test_the_credits_header_of_a_failed_send_is_the_ledgers_balance(
    caller: Caller, payer: Keypair, devnode_url: str, db: asyncpg.Connection
) -> None:
    """Settled as failed, the send charged the base fee and its hold is gone: the reply's
    X-Credits-Remaining is the balance, neither the hold nor the replica's lease counted."""
    tx = pay(payer, 10**15, await latest_blockhash(devnode_url))  # fails on chain: the base fee
    status, doc, remaining = await caller.rpc("sendAndConfirm", [b64(tx)])

    assert status == 200 and doc["result"]["status"] == "failed", doc
    balance = await db.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", caller.signer.pubkey)
    assert remaining == balance, (remaining, balance)
    assert await debits(db, str(tx.signatures[0])) == [(-BASE_FEE, f"sendAndConfirm failed: {tx.signatures[0]}")]


async def test_a_failing_preflight_sends_nothing_and_charges_nothing(
    caller: Caller, payer: Keypair, devnode_url: str, db: asyncpg.Connection
) -> None:
    tx = pay(payer, 10**15, await latest_blockhash(devnode_url))
    status, doc, _ = await caller.rpc("sendAndConfirm", [b64(tx), {"skipPreflight": False}])

    assert status == 200 and doc["error"]["code"] == -32002, doc
    signature = str(tx.signatures[0])
    assert await debits(db, signature) == []
    send_status = await caller.result("getSendStatus", [signature])
    assert (send_status["status"], send_status["retry_safe"], send_status["charged_credits"]) == ("refused", True, 0)
    async with AsyncClient(devnode_url) as node:
        assert (await node.get_signature_statuses([tx.signatures[0]])).value[0] is None  # never broadcast
    own = await node_simulation(devnode_url, tx)  # what simulateTransaction (5 credits) answers
    assert own["err"] is not None and own["logs"] and own["unitsConsumed"], own
    assert doc["error"]["data"] == {"err": own["err"]}, doc  # the free answer: the error alone


async def reconcile_all(devnode_url: str, database_url: str) -> int:
    """One pass of the send reconciler, as its actor runs it, over every pending send old enough."""
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    node = HttpUpstream(devnode_url)
    try:
        return await SendReconciler(pool, node, min_age_s=0).run_once()
    finally:
        await node.close()
        await pool.close()


async def test_an_unknown_blockhash_ends_unknown_then_the_reconciler_charges_the_base_fee(
    caller: Caller, payer: Keypair, devnode_url: str, database_url: str, db: asyncpg.Connection
) -> None:
    tx = pay(payer, 1_000_000, unknown_blockhash())
    result = await caller.result("sendAndConfirm", [b64(tx)])
    signature = result["signature"]

    assert result["status"] == "unknown" and result["charged_credits"] == LANDING, result  # held, pending
    held = await db.fetchval("SELECT held FROM sends WHERE signature = $1 AND status = 'pending'", signature)
    assert held == LANDING

    assert await reconcile_all(devnode_url, database_url) >= 1
    send_status = await caller.result("getSendStatus", [signature])
    assert (send_status["status"], send_status["retry_safe"]) == ("expired", True), send_status
    assert send_status["charged_credits"] == BASE_FEE  # it was sent: the base fee, as the interface prices it
    assert await debits(db, signature) == [(-BASE_FEE, f"sendAndConfirm expired: {signature}")]


async def test_a_broadcast_transaction_that_never_lands_is_charged_the_base_fee(
    caller: Caller, devnode_url: str, database_url: str, db: asyncpg.Connection
) -> None:
    """Correctly signed, but its fee payer holds nothing: broadcast, never lands, settled ``expired``
    once its blockhash has; the interface's "base fee otherwise" (issue 49 found it settled for 0)."""
    unfunded = Keypair()
    tx = pay(unfunded, 1_000, await latest_blockhash(devnode_url))
    result = await caller.result("sendAndConfirm", [b64(tx)])
    signature = result["signature"]
    assert result["status"] == "unknown" and result["legs_attempted"], result
    assert result["charged_credits"] == LANDING  # held until the chain proves what became of it

    check = {"jsonrpc": "2.0", "id": 1, "method": "isBlockhashValid", "params": [str(tx.message.recent_blockhash)]}
    for _ in range(600):  # 150 blocks of 100 ms, bounded at 60 s
        async with caller.http.post(devnode_url, json=check) as resp:
            if not (await resp.json())["result"]["value"]:
                break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the blockhash never expired")
    async with AsyncClient(devnode_url) as node:
        assert (await node.get_signature_statuses([tx.signatures[0]])).value[0] is None  # never landed
    assert await reconcile_all(devnode_url, database_url) >= 1

    send_status = await caller.result("getSendStatus", [signature])
    assert (send_status["status"], send_status["charged_credits"]) == ("expired", BASE_FEE), send_status
    assert await debits(db, signature) == [(-BASE_FEE, f"sendAndConfirm expired: {signature}")]
    history = await db.fetch(
        "SELECT credits, refunded FROM usage_history WHERE pubkey = $1 AND method = 'sendAndConfirm'",
        caller.signer.pubkey,
    )
    assert [(r["credits"], r["refunded"]) for r in history] == [(BASE_FEE, False)]

    again = await caller.result("sendAndConfirm", [b64(tx)])  # the first send's state, in the interface's values
    assert (again["status"], again["confirmed"], again["charged_credits"]) == ("unknown", False, BASE_FEE), again
    assert await debits(db, signature) == [(-BASE_FEE, f"sendAndConfirm expired: {signature}")]


async def test_the_same_transaction_twice_is_charged_once(
    caller: Caller, payer: Keypair, devnode_url: str, db: asyncpg.Connection
) -> None:
    encoded = b64(pay(payer, 1_000_000, await latest_blockhash(devnode_url)))
    first = await caller.result("sendAndConfirm", [encoded])
    again = await caller.result("sendAndConfirm", [encoded])

    assert first["status"] == again["status"] == "confirmed"
    assert again["charged_credits"] == LANDING
    assert len(await debits(db, first["signature"])) == 1


async def test_a_batch_answers_both_the_send_and_the_read(caller: Caller, payer: Keypair, devnode_url: str) -> None:
    encoded = b64(pay(payer, 1_000_000, await latest_blockhash(devnode_url)))
    body = [
        {"jsonrpc": "2.0", "id": "s", "method": "sendAndConfirm", "params": [encoded]},
        {"jsonrpc": "2.0", "id": "r", "method": "getSlot", "params": []},
    ]
    async with caller.http.post(caller.url + "/", json=body, headers=caller.headers) as resp:
        answers = {a["id"]: a for a in await resp.json()}
    assert answers["s"]["result"]["status"] == "confirmed", answers
    assert isinstance(answers["r"]["result"], int)


async def test_getsendstatus_shows_nothing_of_another_accounts_send(
    caller: Caller, payer: Keypair, devnode_url: str
) -> None:
    assert await caller.result("getSendStatus", [str(Signature.default())]) is None
