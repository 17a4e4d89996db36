"""sendTransaction and sendSmartTransaction: checked before billing, sent as is, answered at once.

Bad transactions are refused with -32602 before any credit is taken, on every send method.
``priority_fee_urgency`` cannot change a signed transaction: it refuses, free, one that pays less than
the urgency's percentile of recent fees, and says how to fix it.
"""

from __future__ import annotations

import asyncio
import base64
import time

import base58
import pytest
from solana.exceptions import SolanaRpcException
from solana.rpc.core import RPCException
from solana.rpc.models import TxOpts
from solders.keypair import Keypair
from solders.message import Message, MessageV0
from solders.transaction import Transaction, VersionedTransaction

from gateway_client import solana_client
from tests.chain import wait_confirmed
from tests.sending.conftest import FailingRelay
from tests.sending.helpers import Caller, b64, latest_blockhash, node_simulation, pay, transfer_ix

SEND_METHODS = ["sendTransaction", "sendSmartTransaction", "sendAndConfirm"]


async def test_solana_py_sends_through_the_gateway(caller: Caller, payer: Keypair, devnode_url: str) -> None:
    tx = pay(payer, 1_000_000, await latest_blockhash(devnode_url))
    async with solana_client(caller.url, api_key=caller.headers["X-Api-Key"]) as client:
        signature = (await client.send_raw_transaction(bytes(tx), TxOpts(skip_preflight=True))).value
        await wait_confirmed(client, signature)
    assert signature == tx.signatures[0]


@pytest.mark.parametrize("encode", [b64, lambda tx: base58.b58encode(bytes(tx)).decode()], ids=["base64", "base58"])
async def test_send_smart_transaction_returns_the_signature_at_once(
    caller: Caller, payer: Keypair, devnode_url: str, encode: object
) -> None:
    tx = pay(payer, 1_000_000, await latest_blockhash(devnode_url))
    signature = await caller.result("sendSmartTransaction", [encode(tx), {"simulate": True}])  # type: ignore[operator]
    assert signature == str(tx.signatures[0])
    async with solana_client(caller.url, api_key=caller.headers["X-Api-Key"]) as client:
        await wait_confirmed(client, tx.signatures[0])


async def test_a_failed_simulation_is_refunded_and_not_sent(caller: Caller, payer: Keypair, devnode_url: str) -> None:
    await caller.result("getSlot", [])
    _, _, before = await caller.rpc("getSlot", [])
    tx = pay(payer, 10**15, await latest_blockhash(devnode_url))
    status, doc, after = await caller.rpc("sendSmartTransaction", [b64(tx), {"simulate": True}])

    assert status == 200 and doc["error"]["code"] == -32002, doc
    assert after == before
    async with solana_client(caller.url, api_key=caller.headers["X-Api-Key"]) as client:
        assert (await client.get_signature_statuses([tx.signatures[0]])).value[0] is None
    own = await node_simulation(devnode_url, tx)  # what simulateTransaction (5 credits) answers
    assert own["err"] is not None and own["logs"] and own["unitsConsumed"], own
    assert doc["error"]["data"] == {"err": own["err"]}, doc  # the refunded answer: the error alone


async def test_an_urgency_the_transaction_does_not_pay_is_refused_free(
    caller: Caller, payer: Keypair, devnode_url: str
) -> None:
    blockhash = await latest_blockhash(devnode_url)
    # The 90th percentile of the last 150 slots' fees is above 0 once more than 15 slots paid one.
    for _ in range(20):
        paid = pay(payer, 1_000_000, blockhash, cu_price=50_000)
        await caller.result("sendTransaction", [b64(paid), {"encoding": "base64", "skipPreflight": True}])
        await asyncio.sleep(0.12)  # the next slot
    await caller.result("getSlot", [])
    _, _, before = await caller.rpc("getSlot", [])
    cheap = pay(payer, 1_000_000, blockhash)  # no SetComputeUnitPrice: pays 0
    status, doc, after = await caller.rpc("sendSmartTransaction", [b64(cheap), {"priority_fee_urgency": "critical"}])

    assert status == 200 and doc["error"]["code"] == -32602, doc
    assert "cannot be changed" in doc["error"]["message"] and "SetComputeUnitPrice" in doc["error"]["message"]
    assert after == before

    paying = pay(payer, 1_000_000, blockhash, cu_price=1_000_000)
    assert await caller.result("sendSmartTransaction", [b64(paying), {"priority_fee_urgency": "low"}]) == str(
        paying.signatures[0]
    )


def unsigned(payer: Keypair, blockhash: object) -> str:
    message = Message.new_with_blockhash([transfer_ix(payer, Keypair().pubkey(), 1)], payer.pubkey(), blockhash)  # type: ignore[arg-type]
    return base64.b64encode(bytes(Transaction.new_unsigned(message))).decode()


def oversized(payer: Keypair, blockhash: object) -> str:
    ixs = [transfer_ix(payer, Keypair().pubkey(), 1) for _ in range(40)]
    return b64(Transaction([payer], Message.new_with_blockhash(ixs, payer.pubkey(), blockhash), blockhash))  # type: ignore[arg-type]


def wrong_version(payer: Keypair, blockhash: object) -> str:
    message = MessageV0.try_compile(payer.pubkey(), [transfer_ix(payer, Keypair().pubkey(), 1)], [], blockhash)  # type: ignore[arg-type]
    raw = bytearray(bytes(VersionedTransaction(message, [payer])))
    raw[1 + 64] = 0x80 | 5  # the message's version prefix: v5 does not exist
    return base64.b64encode(bytes(raw)).decode()


def corrupt_signature(payer: Keypair, blockhash: object) -> str:
    raw = bytearray(bytes(pay(payer, 1_000_000, blockhash)))  # type: ignore[arg-type]
    raw[5] ^= 0xFF
    return base64.b64encode(bytes(raw)).decode()


BAD = {
    "garbage": lambda payer, blockhash: "this is not a transaction!",
    "unsigned": unsigned,
    "corrupt_signature": corrupt_signature,
    "oversized": oversized,
    "wrong_version": wrong_version,
}


@pytest.mark.parametrize("method", SEND_METHODS)
@pytest.mark.parametrize("bad", list(BAD))
async def test_a_bad_transaction_is_refused_free(
    caller: Caller, payer: Keypair, devnode_url: str, method: str, bad: str
) -> None:
    encoded = BAD[bad](payer, await latest_blockhash(devnode_url))
    await caller.result("getSlot", [])
    _, _, before = await caller.rpc("getSlot", [])
    params: list[object] = [encoded, {"encoding": "base64"}] if method != "sendSmartTransaction" else [encoded]
    status, doc, after = await caller.rpc(method, params)

    assert status == 200 and doc["error"]["code"] == -32602, doc
    assert after == before


async def test_solana_py_sees_a_refused_transaction_as_an_rpc_error(
    caller: Caller, payer: Keypair, devnode_url: str
) -> None:
    encoded = unsigned(payer, await latest_blockhash(devnode_url))
    async with solana_client(caller.url, api_key=caller.headers["X-Api-Key"]) as client:
        with pytest.raises((RPCException, SolanaRpcException)):
            await client.send_raw_transaction(base64.b64decode(encoded), TxOpts(skip_preflight=True))


async def test_the_urgency_guard_reads_the_fee_window_at_most_once_a_second(
    relayed_caller: Caller, relay: FailingRelay, payer: Keypair, devnode_url: str
) -> None:
    """Its refusals are free: the node's work behind them is bounded per replica, not per request."""
    blockhash = await latest_blockhash(devnode_url)
    started = time.monotonic()
    for _ in range(10):
        tx = pay(payer, 1_000_000, blockhash)
        _, doc, _ = await relayed_caller.rpc("sendSmartTransaction", [b64(tx), {"priority_fee_urgency": "critical"}])
        assert "result" in doc or doc["error"]["code"] == -32602, doc
    elapsed = time.monotonic() - started
    assert 1 <= relay.count("getRecentPrioritizationFees") <= 1 + int(elapsed)
