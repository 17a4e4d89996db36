"""getTransactionHistory through a running gateway, on real transactions of the local chain.

The transactions are made here (a SOL transfer, a USDC mint and transfer, a transfer that fails on
chain) and their expected enrichment follows from what was sent: the amounts, the accounts, the
programs. Pump.fun trades come from a devnode of their own with the launch feed on (the session's
runs without it). Refusals are free, a history costs 25 credits, and a node that fails is an error
and refunded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest
from aiohttp import web
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer

from devnode.node import Devnode
from tests.chain import USDC_MINT, mint_usdc, send_sol, submit, transfer_usdc, usdc_account, wait_landed
from tests.feed import Trade, feed_devnode, node_rpc, pump_trades
from tests.sending.conftest import FailingRelay, caller_at, charged
from tests.sending.helpers import Caller

SYSTEM = "11111111111111111111111111111111"
TOKEN = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"
ASSOCIATED_TOKEN = "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL"
PUMP = "6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P"


def by_signature(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tx["signature"]: tx for tx in result["transactions"]}


def programs(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["program_id"]: p for p in entry["enriched"]["program_interactions"]}


# -- transfers, tokens, a failure --------------------------------------------------------------------


async def test_history_of_transfers_tokens_and_a_failure(
    caller: Caller, payer: Keypair, devnode: Devnode, devnode_url: str
) -> None:
    friend = Keypair().pubkey()
    me = payer.pubkey()
    async with AsyncClient(devnode_url) as client:
        sol = str(await send_sol(client, payer, friend, 1_000_000))
        minted = str(await mint_usdc(client, devnode.usdc_mint_authority, payer, me, 5_000_000))
        moved = str(await transfer_usdc(client, payer, friend, 1_234_567))
        too_much = transfer(TransferParams(from_pubkey=me, to_pubkey=friend, lamports=10**15))
        failed_sig = await submit(client, payer, [too_much], skip_preflight=True)
        assert (await wait_landed(client, failed_sig)).err is not None
        failed = str(failed_sig)

    doc, cost = await charged(caller, "getTransactionHistory", [str(me)])
    assert cost == 25, doc
    result = doc["result"]
    listed = await node_rpc(devnode_url, "getSignaturesForAddress", [str(me), {"commitment": "confirmed"}])
    assert [tx["signature"] for tx in result["transactions"]] == [e["signature"] for e in listed][:10]
    assert result["count"] == len(result["transactions"]) >= 5  # the airdrop, then the four made here
    assert result["transactions"][0]["signature"] == failed  # newest first
    entries = by_signature(result)

    for sig in (sol, minted, moved, failed):
        entry = entries[sig]
        node_tx = await node_rpc(devnode_url, "getTransaction", [sig, {"commitment": "confirmed"}])
        assert entry["found"] is True
        assert (entry["slot"], entry["block_time"]) == (node_tx["slot"], node_tx["blockTime"])
        assert entry["fee"] == node_tx["meta"]["fee"] and isinstance(entry["fee"], int) and entry["fee"] > 0
        assert isinstance(entry["explanation"], str) and entry["explanation"].count(". ") <= 2
        assert isinstance(entry["enriched"]["summary"], str) and "\n" not in entry["enriched"]["summary"]

    transfer_entry = entries[sol]
    assert transfer_entry["error"] is None
    assert transfer_entry["enriched"]["sol_transfers"] == [  # the fee is not a transfer: it is in `fee`
        {"account": str(me), "amount": -1_000_000, "ui_amount": "-0.001"},
        {"account": str(friend), "amount": 1_000_000, "ui_amount": "0.001"},
    ]
    assert transfer_entry["enriched"]["token_transfers"] == []
    assert programs(transfer_entry)[SYSTEM]["name"] == "System"
    assert programs(transfer_entry)[SYSTEM]["instructions"] == ["transfer"]
    assert transfer_entry["enriched"]["summary"].startswith("SOL transfer: 0.001 SOL")
    assert "succeeded" in transfer_entry["explanation"]

    mint_entry = entries[minted]
    assert mint_entry["enriched"]["token_transfers"] == [
        {
            "owner": str(me),
            "token_account": str(usdc_account(me)),
            "mint": str(USDC_MINT),
            "decimals": 6,
            "amount": "5000000",
            "ui_amount": "5",
        }
    ]
    assert mint_entry["enriched"]["summary"].startswith("Minted 5 USDC")

    token_entry = entries[moved]
    tokens = token_entry["enriched"]["token_transfers"]
    assert sorted((t["owner"], t["amount"], t["ui_amount"]) for t in tokens) == sorted(
        [(str(me), "-1234567", "-1.234567"), (str(friend), "1234567", "1.234567")]
    )
    assert all(t["mint"] == str(USDC_MINT) and t["decimals"] == 6 for t in tokens)
    names = {p["name"] for p in token_entry["enriched"]["program_interactions"]}
    assert {"Token", "Associated Token", "System"} <= names  # System: the new account, inside the ATA program
    assert programs(token_entry)[TOKEN]["top_level"] and not programs(token_entry)[SYSTEM]["top_level"]
    assert "transferChecked" in programs(token_entry)[TOKEN]["instructions"]
    # the friend's new token account's rent is the only SOL that moved
    rent = [s for s in token_entry["enriched"]["sol_transfers"] if s["amount"] > 0]
    assert [s["account"] for s in rent] == [str(usdc_account(friend))]
    assert token_entry["enriched"]["summary"].startswith("Token transfer: 1.234567 USDC")

    failed_entry = entries[failed]
    assert failed_entry["error"] == {"InstructionError": [0, {"Custom": 1}]}
    assert failed_entry["enriched"]["sol_transfers"] == []  # only the fee left the payer
    assert failed_entry["enriched"]["token_transfers"] == []
    assert failed_entry["enriched"]["summary"].startswith("Failed System call")
    assert "failed" in failed_entry["explanation"] and "fee" in failed_entry["explanation"]

    two = await caller.result("getTransactionHistory", [str(me), {"limit": 2}])
    assert two["count"] == 2 and two["transactions"] == result["transactions"][:2]


async def test_a_fresh_address_has_an_empty_history_and_still_costs_25(caller: Caller) -> None:
    doc, cost = await charged(caller, "getTransactionHistory", [str(Keypair().pubkey()), {"limit": 100}])
    assert doc["result"] == {"transactions": [], "count": 0} and cost == 25, doc


@pytest.mark.parametrize(
    "params",
    [
        [str(Pubkey.new_unique()), {"limit": 101}],
        [str(Pubkey.new_unique()), {"limit": 0}],
        [str(Pubkey.new_unique()), {"limit": "5"}],
        [str(Pubkey.new_unique()), {"limit": True}],
        [str(Pubkey.new_unique()), {"before": "x"}],
        [str(Pubkey.new_unique()), 10],
        ["not base58 0OIl"],
        [],
    ],
    ids=["limit-101", "limit-0", "limit-string", "limit-bool", "unknown-field", "bare-limit", "bad-address", "none"],
)
async def test_bad_params_are_refused_free(caller: Caller, params: list[Any]) -> None:
    doc, cost = await charged(caller, "getTransactionHistory", params)
    assert doc["error"]["code"] == -32602 and cost == 0, doc


# -- pump.fun trades from the feed ---------------------------------------------------------------------


@pytest.fixture(scope="module")
async def feed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, dict[str, Trade]]]:
    async with feed_devnode(tmp_path_factory.mktemp("feed-devnode")) as node:
        yield node.rpc_url, await pump_trades(node.rpc_url)


async def test_pump_fun_buys_and_sells_from_the_feed(
    feed: tuple[str, dict[str, Trade]], tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection
) -> None:
    url, trades = feed
    async with caller_at(url, tmp_path, database_url, redis_url, db) as caller:
        for kind, trade in trades.items():
            result = await caller.result("getTransactionHistory", [trade.trader, {"limit": 100}])
            entry = by_signature(result)[trade.signature]
            meta = trade.transaction["meta"]
            mine = [b for b in meta["postTokenBalances"] if b["owner"] == trade.trader]
            assert len(mine) == 1
            before = next((b for b in meta["preTokenBalances"] if b["accountIndex"] == mine[0]["accountIndex"]), None)
            change = int(mine[0]["uiTokenAmount"]["amount"]) - int(before["uiTokenAmount"]["amount"] if before else 0)
            assert (change > 0) == (kind == "Buy")
            own = [t for t in entry["enriched"]["token_transfers"] if t["owner"] == trade.trader]
            assert own == [
                {
                    "owner": trade.trader,
                    "token_account": own[0]["token_account"],
                    "mint": mine[0]["mint"],
                    "decimals": mine[0]["uiTokenAmount"]["decimals"],
                    "amount": str(change),
                    "ui_amount": own[0]["ui_amount"],
                }
            ]
            sol = next(s["amount"] for s in entry["enriched"]["sol_transfers"] if s["account"] == trade.trader)
            paid = meta["postBalances"][0] - meta["preBalances"][0] + meta["fee"]
            assert sol == paid and (sol < 0) == (kind == "Buy")
            pump = programs(entry)[PUMP]
            assert pump["name"] == "pump.fun" and pump["top_level"] and kind.lower() in pump["instructions"]
            assert entry["enriched"]["summary"].startswith(f"pump.fun {kind.lower()}: ")
            assert "Compute Budget" in {p["name"] for p in entry["enriched"]["program_interactions"]}


# -- the node failing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fail_on", [b"getSignaturesForAddress", b'getTransaction"'], ids=["list", "batch"])
async def test_a_node_error_is_an_error_and_refunded(
    relayed_caller: Caller, relay: FailingRelay, payer: Keypair, fail_on: bytes
) -> None:
    relay.fail_on = fail_on
    doc, cost = await charged(relayed_caller, "getTransactionHistory", [str(payer.pubkey())])  # funded: listed
    assert "result" not in doc and doc["error"]["code"] == -32003 and "Node is behind" in doc["error"]["message"], doc
    assert cost == 0


async def test_a_node_cut_off_or_unreachable_is_an_error_and_refunded(
    relayed_caller: Caller, relay: FailingRelay
) -> None:
    params = [str(Keypair().pubkey())]
    _, _, before = await relayed_caller.rpc("getSlot", [])
    relay.cut = True  # the request reaches the "node", the answer is lost
    _, doc, after = await relayed_caller.rpc("getTransactionHistory", params)
    assert doc["error"]["code"] == -32003 and "result" not in doc, doc
    assert after == before
    await relay.stop()  # nothing listens any more
    _, doc, after = await relayed_caller.rpc("getTransactionHistory", params)
    assert doc["error"]["code"] == -32003 and str(relay.port) not in str(doc), doc
    assert after == before


class VersionOneRelay(FailingRelay):
    """The relay, answering ``getTransaction`` of the signatures in ``version_one`` as a node answers a
    transaction of a version the request does not accept (-32015), the rest of the batch as the node does."""

    def __init__(self, node_url: str) -> None:
        super().__init__(node_url)
        self.version_one: set[str] = set()

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        calls = orjson.loads(body)
        if not isinstance(calls, list):
            return await super()._relay(request)
        async with aiohttp.ClientSession() as http, http.post(self.node_url, data=body) as resp:
            answers = {a["id"]: a for a in await resp.json()}
        for call in calls:
            if call["method"] == "getTransaction" and call["params"][0] in self.version_one:
                message = "Transaction version (1) is not supported by the requesting client"
                answers[call["id"]] = {
                    "jsonrpc": "2.0",
                    "id": call["id"],
                    "error": {"code": -32015, "message": message},
                }
        return web.json_response([answers[c["id"]] for c in calls])


async def refunds_of(db: asyncpg.Connection, pubkey: str, method: str, timeout_s: float = 10.0) -> list[int]:
    """The ``refund`` ledger entries naming ``method``, once the flush wrote one."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        rows = await db.fetch(
            "SELECT amount, description FROM ledger_entries WHERE pubkey = $1 AND type = 'refund'", pubkey
        )
        found = [int(r["amount"]) for r in rows if method in r["description"]]
        if found or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.2)


async def test_one_failed_lookup_refunds_its_share_not_the_whole_history(
    devnode_url: str, payer: Keypair, tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection
) -> None:
    me = payer.pubkey()
    async with AsyncClient(devnode_url) as client:
        for _ in range(5):
            await send_sol(client, payer, Keypair().pubkey(), 1_000_000)
    listed = await node_rpc(devnode_url, "getSignaturesForAddress", [str(me), {"limit": 5, "commitment": "confirmed"}])
    assert len(listed) == 5
    relay = VersionOneRelay(devnode_url)
    relay.version_one = {listed[1]["signature"]}
    await relay.start()
    try:
        async with caller_at(f"http://127.0.0.1:{relay.port}/", tmp_path, database_url, redis_url, db) as caller:
            doc, cost = await charged(caller, "getTransactionHistory", [str(me), {"limit": 5}])
    finally:
        await relay.stop()
    entries = doc["result"]["transactions"]
    assert [e["found"] for e in entries] == [True, False, True, True, True], doc
    assert "could not return its details" in entries[1]["explanation"] and "refunded" in entries[1]["explanation"]
    assert cost == 25 - 25 * 1 // 5 == 20  # one lookup of five failed: its share (5 credits) given back
    assert await refunds_of(db, caller.signer.pubkey, "getTransactionHistory") == [5]  # a ledger entry
