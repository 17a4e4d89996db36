"""The bulk lookups through a running gateway, on real accounts and transactions of the local chain.

Balances match the node's own ``getBalance``; token balances are those of real USDC accounts; the
transactions are real ones, matched by signature. Billing: exact charges, one usage record per item,
invalid keys and refused requests free, a list the balance cannot cover refused whole, an absent
transaction charged, failed lookups refunded. And the node sees one ``getMultipleAccounts`` per 100
addresses.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from devnode.node import Devnode
from gateway.core.credits import CreditPolicy, DepositCredit
from gateway.credits.store import credit_deposit_on
from gateway_client import WalletSigner
from tests.auth.helpers import create_api_key
from tests.chain import USDC_MINT, mint_usdc, send_sol, transfer_usdc, usdc_account
from tests.credits.helpers import new_signature
from tests.sending.conftest import FailingRelay, caller_at
from tests.sending.helpers import Caller
from tests.support import RunningGateway

Answer = tuple[int, dict[str, Any], int, Mapping[str, str]]


async def bulk(caller: Caller, route: str, body: Any) -> Answer:
    """(HTTP status, body, X-Credits-Remaining, headers) of ``POST /bulk/<route>``."""
    async with caller.http.post(f"{caller.url}/bulk/{route}", json=body, headers=caller.headers) as resp:
        doc = await resp.json()
        return resp.status, doc, int(resp.headers.get("X-Credits-Remaining", "-1")), resp.headers.copy()


async def balance_now(caller: Caller) -> int:
    """X-Credits-Remaining after a getSlot (1 credit)."""
    _, _, remaining = await caller.rpc("getSlot", [])
    return remaining


async def history(caller: Caller, request_id: str, count: int) -> list[dict[str, Any]]:
    """The usage records of the bulk request ``request_id`` once all ``count`` are settled (≤ 10 s)."""
    entries: list[dict[str, Any]] = []
    for _ in range(100):
        url = f"{caller.url}/account/history"
        async with caller.http.get(url, headers=caller.headers, params={"limit": "100"}) as resp:
            assert resp.status == 200
            doc = await resp.json()
        entries = [e for e in doc["entries"] if (e["request_id"] or "").startswith(request_id + ":")]
        if len(entries) >= count:
            return sorted(entries, key=lambda e: int(e["request_id"].rsplit(":", 1)[1]))
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(entries)} of {count} usage records of {request_id}")


def random_signature() -> str:
    return str(Keypair().sign_message(os.urandom(8)))


# -- balances ----------------------------------------------------------------------------------------


async def test_balances_are_the_nodes_and_each_distinct_valid_address_costs_one_credit(
    caller: Caller, payer: Keypair, devnode_url: str
) -> None:
    friend, fresh = Keypair().pubkey(), Keypair().pubkey()
    async with AsyncClient(devnode_url, commitment=Confirmed) as client:
        await send_sol(client, payer, friend, 1_234_567)
        addresses = [str(payer.pubkey()), str(friend), str(fresh)]
        expected = {a: (await client.get_balance(Pubkey.from_string(a))).value for a in addresses}
    assert expected[str(friend)] == 1_234_567 and expected[str(fresh)] == 0

    before = await balance_now(caller)
    status, doc, after, headers = await bulk(
        caller, "getBalances", {"addresses": [*addresses, "not-an-address", addresses[0]]}
    )
    assert status == 200, doc
    assert {r["address"]: r["lamports"] for r in doc["results"]} == expected
    assert len(doc["results"]) == 3  # the duplicate is looked up and charged once
    assert doc["errors"] == [
        {
            "address": "not-an-address",
            "error": {"code": "INVALID_ADDRESS", "message": doc["errors"][0]["error"]["message"]},
        }
    ]
    assert before - after == 3  # the invalid one is free
    assert all(name in headers for name in ("X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Request-Id"))
    entries = await history(caller, headers["X-Request-Id"], 3)
    assert [(e["method"], e["credits"], e["refunded"]) for e in entries] == [("bulk/getBalances", 1, False)] * 3


async def test_refusals_before_billing_are_free(caller: Caller) -> None:
    before = await balance_now(caller)
    too_many = [str(Keypair().pubkey()) for _ in range(101)]
    for body in ({"addresses": too_many}, {"addresses": []}, {"addresses": "x"}, {"addresses": [1]}, {}):
        status, doc, remaining, _ = await bulk(caller, "getBalances", body)
        assert status == 400 and doc["error"]["code"] == "INVALID_REQUEST", doc
        assert remaining == before
    status, doc, _, _ = await bulk(caller, "getBalances", {"addresses": too_many})
    assert "at most 100" in doc["error"]["message"] and "101" in doc["error"]["message"]
    status, doc, remaining, _ = await bulk(caller, "getTransactions", {"signatures": ["bad", "1" * 88]})
    assert status == 200 and doc["results"] == [] and len(doc["errors"]) == 2, doc
    assert {e["error"]["code"] for e in doc["errors"]} == {"INVALID_SIGNATURE"}
    assert remaining == before


async def test_a_balance_short_of_the_whole_list_is_refused_and_nothing_charged(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gateway.url)
        policy = CreditPolicy(credits_per_usdc=10**6, credit_expiry_seconds=3_600, minimum_base_units=1)
        assert (await credit_deposit_on(db, DepositCredit(new_signature(), signer.pubkey, 11), policy)).credited
        poor = Caller(http, gateway.url, signer, key)
        assert await balance_now(poor) == 10
        three = [random_signature() for _ in range(3)]
        status, doc, remaining, _ = await bulk(poor, "getTransactions", {"signatures": three})
        assert status == 402, doc
        assert doc["jsonrpc"] == "2.0" and doc["error"]["code"] == -32010, doc
        assert doc["error"]["data"]["required"] == 15 and doc["error"]["data"]["available"] == 10
        assert remaining == 10
        status, doc, remaining, _ = await bulk(poor, "getTransactions", {"signatures": three[:2]})
        assert status == 200 and [r["transaction"] for r in doc["results"]] == [None, None], doc
        assert remaining == 0  # absent transactions are charged: the node looked


# -- token balances ----------------------------------------------------------------------------------


async def test_token_balances_of_usdc_owners(
    caller: Caller, payer: Keypair, devnode: Devnode, devnode_url: str
) -> None:
    friend, nobody = Keypair().pubkey(), Keypair().pubkey()
    async with AsyncClient(devnode_url, commitment=Confirmed) as client:
        await mint_usdc(client, devnode.usdc_mint_authority, payer, payer.pubkey(), 5_000_000)
        await transfer_usdc(client, payer, friend, 1_234_567)
    before = await balance_now(caller)
    owners = [str(payer.pubkey()), str(friend), str(nobody)]
    status, doc, after, _ = await bulk(caller, "getTokenBalances", {"owners": owners})
    assert status == 200 and doc["errors"] == [], doc
    found = {r["owner"]: r["token_accounts"] for r in doc["results"]}
    assert found[str(nobody)] == []
    assert found[str(payer.pubkey())] == [
        {
            "address": str(usdc_account(payer.pubkey())),
            "mint": str(USDC_MINT),
            "amount": "3765433",
            "decimals": 6,
            "ui_amount": "3.765433",
            "program": "spl-token",
        }
    ]
    assert [(t["amount"], t["ui_amount"]) for t in found[str(friend)]] == [("1234567", "1.234567")]
    assert before - after == 15


# -- transactions ------------------------------------------------------------------------------------


async def test_transactions_matched_by_signature_absent_ones_charged(
    caller: Caller, payer: Keypair, devnode_url: str
) -> None:
    async with AsyncClient(devnode_url, commitment=Confirmed) as client:
        sent = [str(await send_sol(client, payer, Keypair().pubkey(), 1_000_000 + n)) for n in range(2)]
    absent = random_signature()
    before = await balance_now(caller)
    status, doc, after, _ = await bulk(caller, "getTransactions", {"signatures": [absent, *sent, "nope"]})
    assert status == 200, doc
    results = {r["signature"]: r["transaction"] for r in doc["results"]}
    assert set(results) == {absent, *sent} and results[absent] is None
    for signature in sent:
        assert results[signature]["transaction"]["signatures"][0] == signature
        assert results[signature]["meta"]["err"] is None
    assert [e["signature"] for e in doc["errors"]] == ["nope"]
    assert before - after == 15


# -- the node failing ----------------------------------------------------------------------------------


class PartialRelay(FailingRelay):
    """Fails only the calls of a batch that hold ``fail_on``; the others reach the node."""

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        doc = json.loads(body)
        if self.fail_on is None or self.fail_on not in body or not isinstance(doc, list):
            return await super()._relay(request)
        self.bodies.append(body)
        error = {"code": -32005, "message": "Node is behind by 42 slots"}
        failing = [c for c in doc if self.fail_on.decode() in json.dumps(c)]
        answers: list[Any] = [{"jsonrpc": "2.0", "id": c["id"], "error": error} for c in failing]
        rest = [c for c in doc if c not in failing]
        assert self._http is not None
        async with self._http.post(self.node_url, json=rest) as resp:
            answers += await resp.json()
        return web.json_response(answers)


@pytest.fixture
async def partial(devnode_url: str) -> AsyncIterator[PartialRelay]:
    running = PartialRelay(devnode_url)
    await running.start()
    yield running
    await running.stop()


async def test_failed_lookups_are_refunded(
    partial: PartialRelay, payer: Keypair, devnode_url: str, tmp_path: Path, database_url: str, redis_url: str, db: Any
) -> None:
    async with AsyncClient(devnode_url, commitment=Confirmed) as client:
        sent = str(await send_sol(client, payer, Keypair().pubkey(), 1_000_000))
    failing = random_signature()
    url = f"http://127.0.0.1:{partial.port}/"
    async with caller_at(url, tmp_path, database_url, redis_url, db) as caller:
        partial.fail_on = failing.encode()
        before = await balance_now(caller)
        status, doc, after, headers = await bulk(caller, "getTransactions", {"signatures": [sent, failing]})
        assert status == 200, doc
        assert [r["signature"] for r in doc["results"]] == [sent]
        assert [(e["signature"], e["error"]["code"]) for e in doc["errors"]] == [(failing, "UPSTREAM_ERROR")]
        assert before - after == 5
        entries = await history(caller, headers["X-Request-Id"], 2)
        assert [(e["credits"], e["refunded"]) for e in entries] == [(5, False), (0, True)]

        partial.fail_on = b"getMultipleAccounts"  # the whole chunk fails: nothing answered, nothing charged
        before = await balance_now(caller)
        status, doc, after, _ = await bulk(caller, "getBalances", {"addresses": [str(payer.pubkey())]})
        assert status == 502 and doc["error"]["code"] == "UPSTREAM_ERROR", doc
        assert before - after == 0

        partial.fail_on = None
        partial.cut = True  # the node's answer is lost
        status, doc, after2, _ = await bulk(caller, "getTokenBalances", {"owners": [str(payer.pubkey())]})
        assert status == 502 and after2 == after, doc


class UnicodeDigitsRelay(FailingRelay):
    """A hostile node (the relay rewriting the devnode's answers; no real node sends this on command):
    every token amount becomes Arabic-Indic digits, which ``str.isdigit()`` and ``int()`` both take."""

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if b"getTokenAccountsByOwner" not in body:
            return await super()._relay(request)
        assert self._http is not None
        async with self._http.post(self.node_url, data=body, headers={"Content-Type": "application/json"}) as resp:
            answers = await resp.json()
        for answer in answers:
            for entry in answer.get("result", {}).get("value", []):
                entry["account"]["data"]["parsed"]["info"]["tokenAmount"]["amount"] = "\u0661\u0662\u0663"
        return web.json_response(answers)


async def test_a_token_amount_in_unicode_digits_is_the_nodes_failure_refunded(
    devnode: Devnode, payer: Keypair, devnode_url: str, tmp_path: Path, database_url: str, redis_url: str, db: Any
) -> None:
    async with AsyncClient(devnode_url, commitment=Confirmed) as client:
        await mint_usdc(client, devnode.usdc_mint_authority, payer, payer.pubkey(), 1_000)
    relay = UnicodeDigitsRelay(devnode_url)
    await relay.start()
    try:
        async with caller_at(f"http://127.0.0.1:{relay.port}/", tmp_path, database_url, redis_url, db) as caller:
            nobody = str(Keypair().pubkey())
            before = await balance_now(caller)
            status, doc, after, _ = await bulk(caller, "getTokenBalances", {"owners": [str(payer.pubkey()), nobody]})
            assert status == 200, doc
            assert [r["owner"] for r in doc["results"]] == [nobody]  # before: the payer's amount read as "123"
            assert [(e["owner"], e["error"]["code"]) for e in doc["errors"]] == [
                (str(payer.pubkey()), "UPSTREAM_ERROR")
            ]
            assert before - after == 5  # the unreadable answer refunded, the empty one charged
    finally:
        await relay.stop()


async def test_node_down_refunds_everything(relayed_caller: Caller, relay: FailingRelay) -> None:
    before = await balance_now(relayed_caller)
    await relay.stop()
    status, doc, after, _ = await bulk(relayed_caller, "getBalances", {"addresses": [str(Keypair().pubkey())]})
    assert status == 502 and doc["error"]["code"] == "UPSTREAM_ERROR", doc
    assert after == before


# -- the node's work and the rate ------------------------------------------------------------------------


async def test_one_upstream_request_per_100_addresses_and_the_rate_counts_each(
    relayed_caller: Caller, relay: FailingRelay
) -> None:
    addresses = [str(Keypair().pubkey()) for _ in range(100)]
    before = await balance_now(relayed_caller)
    seen = relay.count("getMultipleAccounts")
    await asyncio.sleep(0.1)  # a list longer than the burst (50) needs a full bucket: the getSlot's unit back
    status, doc, after, _ = await bulk(relayed_caller, "getBalances", {"addresses": addresses})
    assert status == 200 and len(doc["results"]) == 100, doc
    assert relay.count("getMultipleAccounts") - seen == 1
    assert before - after == 100
    # 100 rate units from a bucket of 50 (50/s): admitted full, it leaves a debt; the next list waits
    status, doc, remaining, headers = await bulk(relayed_caller, "getBalances", {"addresses": addresses[:2]})
    assert status == 429 and doc["error"]["code"] == "RATE_LIMITED", doc
    assert int(headers["Retry-After"]) >= 1 and remaining == after
