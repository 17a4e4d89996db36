"""gateway.history.enrich, pure, over the node's own JSON: every transaction here is made on the session
devnode (or read from a feed devnode's pump.fun trades) and fetched with getTransaction in the test,
then handed to the pure functions. Expected values follow from what was sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.system_program import TransferParams, transfer

from devnode.node import Devnode
from gateway.history.enrich import (
    account_keys,
    describe_error,
    enrich,
    entry,
    history,
    signature_list,
    transaction_request,
    ui_amount,
)
from tests.chain import USDC_MINT, airdrop, mint_usdc, send, submit, transfer_usdc_instruction, wait_landed
from tests.feed import Trade, feed_devnode, node_rpc, pump_trades

SYSTEM = "11111111111111111111111111111111"
PUMP = "6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P"
COMPUTE_BUDGET = "ComputeBudget111111111111111111111111111111"


async def fetch(url: str, sig: str, encoding: str = "jsonParsed") -> dict[str, Any]:
    config = {**transaction_request(sig)[1], "encoding": encoding}
    tx = await node_rpc(url, "getTransaction", [sig, config])
    assert isinstance(tx, dict)
    return tx


class Made:
    """Transactions made once for the module, and the node's JSON of each."""

    def __init__(self, url: str, sender: Keypair, receiver: Keypair) -> None:
        self.url = url
        self.sender = sender
        self.receiver = receiver
        self.sigs: dict[str, str] = {}


@pytest.fixture(scope="module")
async def made(devnode: Devnode) -> AsyncIterator[Made]:
    url = devnode.rpc_url
    sender, receiver = Keypair(), Keypair()
    await airdrop(url, sender.pubkey(), 3_000_000_000)
    found = Made(url, sender, receiver)
    async with AsyncClient(url) as client:
        pay = transfer(TransferParams(from_pubkey=sender.pubkey(), to_pubkey=receiver.pubkey(), lamports=1_000_007))
        found.sigs["sol_v0"] = str(await send(client, sender, [pay], v0=True))
        await mint_usdc(client, devnode.usdc_mint_authority, sender, sender.pubkey(), 3_000_000)
        await mint_usdc(client, devnode.usdc_mint_authority, sender, receiver.pubkey(), 1)
        move = transfer_usdc_instruction(sender.pubkey(), receiver.pubkey(), 2_500_001)
        found.sigs["usdc"] = str(await send(client, sender, [move]))
        too_much = transfer(TransferParams(from_pubkey=sender.pubkey(), to_pubkey=receiver.pubkey(), lamports=10**16))
        failed = await submit(client, sender, [too_much], skip_preflight=True)
        await wait_landed(client, failed)
        found.sigs["failed"] = str(failed)
    yield found


async def test_sol_transfer_excludes_the_fee_in_both_encodings(made: Made) -> None:
    sig = made.sigs["sol_v0"]
    parsed, plain = await fetch(made.url, sig), await fetch(made.url, sig, "json")
    expected = [
        {"account": str(made.sender.pubkey()), "amount": -1_000_007, "ui_amount": "-0.001000007"},
        {"account": str(made.receiver.pubkey()), "amount": 1_000_007, "ui_amount": "0.001000007"},
    ]
    for tx in (parsed, plain):
        enriched = enrich(tx)
        assert enriched["sol_transfers"] == expected
        assert enriched["token_transfers"] == []
        assert [(p["program_id"], p["name"], p["top_level"]) for p in enriched["program_interactions"]] == [
            (SYSTEM, "System", True)
        ]
        assert account_keys(tx)[:2] == [str(made.sender.pubkey()), str(made.receiver.pubkey())]
    assert enrich(parsed)["program_interactions"][0]["instructions"] == ["transfer"]  # the node parsed it
    assert enrich(plain)["program_interactions"][0]["instructions"] == []  # raw System data is not read here
    assert enrich(parsed)["summary"] == enrich(plain)["summary"]


async def test_token_transfer_is_signed_raw_base_units_with_an_exact_ui_amount(made: Made) -> None:
    tx = await fetch(made.url, made.sigs["usdc"])
    tokens = enrich(tx)["token_transfers"]
    assert sorted((t["owner"], t["amount"], t["ui_amount"]) for t in tokens) == sorted(
        [(str(made.sender.pubkey()), "-2500001", "-2.500001"), (str(made.receiver.pubkey()), "2500001", "2.500001")]
    )
    assert {(t["mint"], t["decimals"]) for t in tokens} == {(str(USDC_MINT), 6)}
    assert enrich(tx)["sol_transfers"] == []  # both token accounts existed: no SOL moved but the fee


async def test_a_failed_transaction_moved_nothing_and_says_why(made: Made) -> None:
    sig = made.sigs["failed"]
    tx = await fetch(made.url, sig)
    listed = await node_rpc(made.url, "getSignaturesForAddress", [str(made.sender.pubkey()), {"limit": 1}])
    assert signature_list(listed) is not None and listed[0]["signature"] == sig
    got = entry(listed[0], tx)
    assert got["error"] == tx["meta"]["err"] == {"InstructionError": [0, {"Custom": 1}]}
    assert got["enriched"]["sol_transfers"] == [] and got["enriched"]["token_transfers"] == []
    assert describe_error(got["error"]) == "instruction 1 failed: custom program error 1"
    assert got["enriched"]["summary"] == "Failed System call: instruction 1 failed: custom program error 1"
    assert got["fee"] == tx["meta"]["fee"] and f"{tx['meta']['fee']:,}-lamport fee" in got["explanation"]


async def test_an_entry_the_node_no_longer_returns_keeps_what_the_list_said(made: Made) -> None:
    listed = await node_rpc(made.url, "getSignaturesForAddress", [str(made.sender.pubkey()), {"limit": 3}])
    result = history(listed, [None, *[await fetch(made.url, e["signature"]) for e in listed[1:]]])
    assert result["count"] == 3 and [t["found"] for t in result["transactions"]] == [False, True, True]
    missing = result["transactions"][0]
    assert (missing["slot"], missing["block_time"], missing["error"]) == (
        listed[0]["slot"],
        listed[0]["blockTime"],
        listed[0]["err"],
    )
    assert missing["fee"] is None and missing["enriched"]["sol_transfers"] == []
    assert "retention" in missing["explanation"]


def test_ui_amount_is_exact() -> None:
    assert ui_amount(1_234_567, 6) == "1.234567"
    assert ui_amount(-5_000_000, 6) == "-5"
    assert ui_amount(2**64 - 1, 9) == "18446744073.709551615"
    assert ui_amount(-1, 9) == "-0.000000001"
    assert ui_amount(42, 0) == "42"


def test_what_the_node_did_not_say_is_left_out() -> None:
    empty = enrich({"meta": None, "transaction": "not an object"})
    assert (empty["token_transfers"], empty["sol_transfers"], empty["program_interactions"]) == ([], [], [])
    assert isinstance(empty["summary"], str)
    assert signature_list({"not": "a list"}) is None and signature_list([{"slot": 1}]) is None


@pytest.fixture(scope="module")
async def trades(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Trade]]:
    async with feed_devnode(tmp_path_factory.mktemp("feed-devnode")) as node:
        yield await pump_trades(node.rpc_url)


@pytest.mark.parametrize("kind", ["Buy", "Sell"])
async def test_pump_fun_trades_name_the_program_and_the_instruction(trades: dict[str, Trade], kind: str) -> None:
    trade = trades[kind]
    enriched = enrich(trade.transaction)
    pump = next(p for p in enriched["program_interactions"] if p["program_id"] == PUMP)
    assert pump["name"] == "pump.fun" and pump["top_level"]
    assert pump["instructions"] == [kind.lower(), "event"]  # the trade, then its emit_cpi! event
    budget = next(p for p in enriched["program_interactions"] if p["program_id"] == COMPUTE_BUDGET)
    assert budget["instructions"] == ["setComputeUnitLimit", "setComputeUnitPrice"]
    assert enriched["summary"].startswith(f"pump.fun {kind.lower()}: {trade.trader[:4]}")
