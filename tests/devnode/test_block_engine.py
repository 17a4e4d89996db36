"""The local block engine through HTTP, in Jito's shapes, with real signed transactions: bundles land
in one slot or not at all, untipped and oversized bundles are refused, the statuses, the tip floor
and `/api/v1/transactions`."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import aiohttp
import base58
from solana.rpc.async_api import AsyncClient
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import VersionedTransaction

from devnode.block_engine.tips import TIP_ACCOUNTS
from devnode.node import Devnode
from tests.devnode.helpers import wait_for, wait_landed

SOL = 10**9
TIP = 10_000
PERCENTILE_KEYS = {
    "time",
    "landed_tips_25th_percentile",
    "landed_tips_50th_percentile",
    "landed_tips_75th_percentile",
    "landed_tips_95th_percentile",
    "landed_tips_99th_percentile",
    "ema_landed_tips_50th_percentile",
}


async def post(url: str, method: str, params: list[Any]) -> tuple[dict[str, Any], Any]:
    """The JSON-RPC response and the HTTP response headers."""
    payload = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with aiohttp.ClientSession() as session, session.post(url, json=payload) as resp:
        assert resp.status == 200
        body: dict[str, Any] = await resp.json()
        return body, resp.headers


async def bundles(node: Devnode, method: str, params: list[Any]) -> dict[str, Any]:
    assert node.block_engine_url is not None
    body, _ = await post(f"{node.block_engine_url}/bundles", method, params)
    return body


def pay(src: Keypair, dst: Pubkey, lamports: int) -> Instruction:
    return transfer(TransferParams(from_pubkey=src.pubkey(), to_pubkey=dst, lamports=lamports))


async def signed(client: AsyncClient, payer: Keypair, *ixs: Instruction) -> VersionedTransaction:
    blockhash = (await client.get_latest_blockhash()).value.blockhash
    return VersionedTransaction(MessageV0.try_compile(payer.pubkey(), list(ixs), [], blockhash), [payer])


def b64(tx: VersionedTransaction) -> str:
    return base64.b64encode(bytes(tx)).decode()


def jito_bundle_id(txs: list[VersionedTransaction]) -> str:
    return hashlib.sha256(",".join(str(tx.signatures[0]) for tx in txs).encode()).hexdigest()


async def inflight(node: Devnode, bundle_id: str) -> dict[str, Any]:
    body = await bundles(node, "getInflightBundleStatuses", [[bundle_id]])
    value: dict[str, Any] = body["result"]["value"][0]
    return value


async def settled(node: Devnode, bundle_id: str) -> dict[str, Any]:
    """The in-flight status once it is no longer Pending."""

    async def done() -> bool:
        return bool((await inflight(node, bundle_id))["status"] != "Pending")

    await wait_for(done)
    return await inflight(node, bundle_id)


async def test_a_tipped_bundle_lands_in_one_slot(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    a, b = Keypair().pubkey(), Keypair().pubkey()
    first = await signed(client, funded, pay(funded, a, SOL))
    second = await signed(client, funded, pay(funded, b, 2 * SOL), pay(funded, TIP_ACCOUNTS[3], TIP))
    sent = await bundles(node, "sendBundle", [[b64(first), b64(second)], {"encoding": "base64"}])
    bundle_id = sent["result"]
    assert bundle_id == jito_bundle_id([first, second])

    status = await settled(node, bundle_id)
    assert status["status"] == "Landed" and isinstance(status["landed_slot"], int)
    statuses = (await client.get_signature_statuses([first.signatures[0], second.signatures[0]])).value
    assert all(s is not None and s.err is None for s in statuses)
    assert {s.slot for s in statuses if s is not None} == {status["landed_slot"]}
    assert (await client.get_balance(a)).value == SOL
    assert (await client.get_balance(b)).value == 2 * SOL

    await wait_landed(client, second.signatures[0], "finalized")
    body = await bundles(node, "getBundleStatuses", [[bundle_id]])
    result = body["result"]
    assert isinstance(result["context"]["slot"], int)
    assert result["value"] == [
        {
            "bundle_id": bundle_id,
            "transactions": [str(first.signatures[0]), str(second.signatures[0])],
            "slot": status["landed_slot"],
            "confirmation_status": "finalized",
            "err": {"Ok": None},
        }
    ]

    async with aiohttp.ClientSession() as session, session.get(f"{node.block_engine_url}/bundles/tip_floor") as resp:
        floor = await resp.json()
    assert isinstance(floor, list) and len(floor) == 1 and set(floor[0]) == PERCENTILE_KEYS
    assert floor[0]["landed_tips_50th_percentile"] == TIP / SOL


async def test_a_bundle_whose_second_transaction_fails_leaves_no_trace(
    node: Devnode, client: AsyncClient, funded: Keypair
) -> None:
    fresh = Keypair().pubkey()
    before = (await client.get_balance(funded.pubkey())).value
    first = await signed(client, funded, pay(funded, fresh, SOL))
    # more than the payer holds once the first has run: the System program refuses it
    second = await signed(client, funded, pay(funded, TIP_ACCOUNTS[0], TIP), pay(funded, Keypair().pubkey(), 9 * SOL))
    bundle_id = (await bundles(node, "sendBundle", [[b64(first), b64(second)], {"encoding": "base64"}]))["result"]

    status = await settled(node, bundle_id)
    assert status == {"bundle_id": bundle_id, "status": "Failed", "landed_slot": None}
    await client.get_latest_blockhash()  # a slot or two later, still nothing
    statuses = (await client.get_signature_statuses([first.signatures[0], second.signatures[0]])).value
    assert statuses == [None, None]
    assert (await client.get_account_info(fresh)).value is None
    assert (await client.get_balance(funded.pubkey())).value == before  # no fee either
    assert (await bundles(node, "getBundleStatuses", [[bundle_id]]))["result"]["value"] == [None]


async def test_untipped_and_oversized_bundles_are_refused(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    untipped = await signed(client, funded, pay(funded, Keypair().pubkey(), SOL))
    body = await bundles(node, "sendBundle", [[b64(untipped)], {"encoding": "base64"}])
    assert body["error"]["code"] == -32602 and "tip" in body["error"]["message"]

    low = await signed(client, funded, pay(funded, TIP_ACCOUNTS[1], 999))
    body = await bundles(node, "sendBundle", [[b64(low)], {"encoding": "base64"}])
    assert body["error"]["code"] == -32602

    six = [await signed(client, funded, pay(funded, TIP_ACCOUNTS[2], TIP + n)) for n in range(6)]
    body = await bundles(node, "sendBundle", [[b64(tx) for tx in six], {"encoding": "base64"}])
    assert body["error"]["code"] == -32602 and "5" in body["error"]["message"]
    assert (await client.get_signature_statuses([six[0].signatures[0]])).value == [None]


async def test_base58_is_the_default_encoding(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    tx = await signed(client, funded, pay(funded, TIP_ACCOUNTS[7], TIP))
    bundle_id = (await bundles(node, "sendBundle", [[base58.b58encode(bytes(tx)).decode()]]))["result"]
    assert (await settled(node, bundle_id))["status"] == "Landed"


async def test_unknown_bundles_and_the_tip_accounts(node: Devnode) -> None:
    unknown = "0" * 64
    body = await bundles(node, "getInflightBundleStatuses", [[unknown]])
    assert body["result"]["value"] == [{"bundle_id": unknown, "status": "Invalid", "landed_slot": None}]
    assert isinstance(body["result"]["context"]["slot"], int)
    assert (await bundles(node, "getBundleStatuses", [[unknown]]))["result"]["value"] == [None]
    assert (await bundles(node, "getBundleStatuses", [[unknown] * 6]))["error"]["code"] == -32602
    tips = (await bundles(node, "getTipAccounts", []))["result"]
    assert tips == [str(a) for a in TIP_ACCOUNTS] and len(tips) == 8


async def test_tip_floor_before_anything_landed(node: Devnode) -> None:
    async with aiohttp.ClientSession() as session, session.get(f"{node.block_engine_url}/bundles/tip_floor") as resp:
        assert resp.status == 200
        floor = await resp.json()
    assert len(floor) == 1 and set(floor[0]) == PERCENTILE_KEYS
    assert all(isinstance(v, float) for k, v in floor[0].items() if k != "time")


async def test_simulate_bundle(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    fresh = Keypair().pubkey()
    good = await signed(client, funded, pay(funded, fresh, SOL))
    bad = await signed(client, funded, pay(funded, Keypair().pubkey(), 100 * SOL))
    ok = (await bundles(node, "simulateBundle", [{"encodedTransactions": [b64(good)]}]))["result"]["value"]
    assert ok["summary"] == "succeeded" and len(ok["transactionResults"]) == 1
    assert ok["transactionResults"][0]["err"] is None and ok["transactionResults"][0]["unitsConsumed"] > 0
    failed = (await bundles(node, "simulateBundle", [{"encodedTransactions": [b64(good), b64(bad)]}]))["result"]
    summary = failed["value"]["summary"]["failed"]
    assert summary["tx_signature"] == str(bad.signatures[0])
    assert len(failed["value"]["transactionResults"]) == 2
    assert (await client.get_account_info(fresh)).value is None  # simulated only


async def test_send_transaction_endpoint(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    assert node.block_engine_url is not None
    url = f"{node.block_engine_url}/transactions"
    to = Keypair().pubkey()
    tx = await signed(client, funded, pay(funded, to, SOL))
    body, headers = await post(url, "sendTransaction", [b64(tx), {"encoding": "base64"}])
    assert body["result"] == str(tx.signatures[0]) and "x-bundle-id" not in headers
    await wait_landed(client, tx.signatures[0])
    assert (await client.get_balance(to)).value == SOL

    tipped = await signed(client, funded, pay(funded, TIP_ACCOUNTS[5], TIP))
    body, headers = await post(f"{url}?bundleOnly=true", "sendTransaction", [b64(tipped), {"encoding": "base64"}])
    assert body["result"] == str(tipped.signatures[0])
    assert headers["x-bundle-id"] == jito_bundle_id([tipped])
    assert (await settled(node, headers["x-bundle-id"]))["status"] == "Landed"
