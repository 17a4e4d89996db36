"""The bundle relay through the gateway, against the devnode's block engine: real signed bundles,
atomic on chain, refused free when they do not tip, and the /relay/* routes."""

from __future__ import annotations

import asyncio
from typing import Any

from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.signature import Signature

from gateway.sending.bundles import TIP_ACCOUNTS
from tests.sending.helpers import Caller, b64, latest_blockhash, pay

TIP = 10_000


async def relay(caller: Caller, verb: str, path: str, body: Any = None) -> tuple[int, dict[str, Any], int]:
    async with caller.http.request(verb, caller.url + path, json=body, headers=caller.headers) as resp:
        return resp.status, await resp.json(), int(resp.headers.get("X-Credits-Remaining", "-1"))


async def bundle_status(caller: Caller, bundle_id: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """Poll POST /relay/getBundleStatuses until the bundle has a status."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "getBundleStatuses", "params": [[bundle_id]]}
    for _ in range(int(timeout_s / 0.1)):
        status, doc, _ = await relay(caller, "POST", "/relay/getBundleStatuses", body)
        assert status == 200 and "result" in doc, doc
        value = doc["result"]["value"][0]
        if value is not None:
            return dict(value)
        await asyncio.sleep(0.1)
    raise AssertionError(f"bundle {bundle_id} has no status after {timeout_s} s")


async def inflight(caller: Caller, bundle_id: str, until: str, timeout_s: float = 10.0) -> dict[str, Any]:
    for _ in range(int(timeout_s / 0.1)):
        value = (await caller.result("getInflightBundleStatuses", [[bundle_id]]))["value"][0]
        if value["status"] == until:
            return dict(value)
        await asyncio.sleep(0.1)
    raise AssertionError(f"bundle {bundle_id} never {until}")


async def statuses(node_url: str, *txs: Any) -> list[Any]:
    async with AsyncClient(node_url) as node:
        return list((await node.get_signature_statuses([tx.signatures[0] for tx in txs])).value)


async def test_a_tipped_bundle_lands_whole_in_one_slot(caller: Caller, payer: Keypair, devnode_url: str) -> None:
    blockhash = await latest_blockhash(devnode_url)
    first, second = pay(payer, 1_000_000, blockhash), pay(payer, 2_000_000, blockhash, tip=TIP)
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "sendBundle",
        "params": [[b64(first), b64(second)], {"encoding": "base64"}],
    }
    status, doc, _before = await relay(caller, "POST", "/relay/sendBundle", body)

    assert status == 200 and doc["id"] == 7, doc
    bundle_id = doc["result"]
    assert isinstance(bundle_id, str) and len(bundle_id) == 64
    landed = await bundle_status(caller, bundle_id)
    assert landed["transactions"] == [str(first.signatures[0]), str(second.signatures[0])]
    assert landed["err"] == {"Ok": None}, landed
    one, two = await statuses(devnode_url, first, second)
    assert one is not None and two is not None and one.slot == two.slot == landed["slot"]
    assert (await inflight(caller, bundle_id, "Landed"))["landed_slot"] == landed["slot"]


async def test_a_bundle_whose_second_transaction_fails_changes_nothing(
    caller: Caller, payer: Keypair, devnode_url: str
) -> None:
    async with AsyncClient(devnode_url) as node:
        lamports_before = (await node.get_balance(payer.pubkey())).value
    blockhash = await latest_blockhash(devnode_url)
    first = pay(payer, 1_000_000, blockhash, tip=TIP)
    failing = pay(payer, 10**15, blockhash)  # more than the payer has
    bundle_id = await caller.result("sendBundle", [[b64(first), b64(failing)], {"encoding": "base64"}])

    failed = await inflight(caller, bundle_id, "Failed")
    assert failed["landed_slot"] is None
    assert await statuses(devnode_url, first, failing) == [None, None]
    async with AsyncClient(devnode_url) as node:
        assert (await node.get_balance(payer.pubkey())).value == lamports_before  # not even a fee


async def test_a_bundle_without_a_tip_is_refused_free(caller: Caller, payer: Keypair, devnode_url: str) -> None:
    blockhash = await latest_blockhash(devnode_url)
    await caller.result("getSlot", [])  # the account's lease is taken: the credit header is exact from here
    untipped = [b64(pay(payer, 1_000_000, blockhash)), b64(pay(payer, 1_000_000, blockhash, tip=999))]
    _, _, before = await caller.rpc("getSlot", [])
    status, doc, after = await caller.rpc("sendBundle", [untipped, {"encoding": "base64"}])

    assert status == 200 and doc["error"]["code"] == -32602, doc
    assert "tip" in doc["error"]["message"]
    assert after == before


async def test_tip_accounts_and_the_tip_floor_over_get(caller: Caller) -> None:
    status, doc, _ = await relay(caller, "GET", "/relay/getTipAccounts")
    assert status == 200 and set(doc["result"]) == TIP_ACCOUNTS, doc

    status, doc, _ = await relay(caller, "GET", "/relay/tipFloor")
    assert status == 200, doc
    floor = doc["result"][0]
    assert {"landed_tips_25th_percentile", "landed_tips_50th_percentile", "landed_tips_75th_percentile"} <= set(floor)


async def test_a_relay_route_takes_only_its_own_method(caller: Caller) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "getSlot", "params": []}
    status, doc, _ = await relay(caller, "POST", "/relay/sendBundle", body)
    assert status == 400 and doc["error"]["code"] == "INVALID_REQUEST", doc  # as any malformed JSON-RPC body
    assert doc["error"]["rpcCode"] == -32600, doc  # (docs/api.md, Errors)


async def test_simulate_bundle_takes_an_object_of_transactions(
    caller: Caller, payer: Keypair, devnode_url: str
) -> None:
    blockhash = await latest_blockhash(devnode_url)
    txs = [b64(pay(payer, 1_000_000, blockhash)), b64(pay(payer, 10**15, blockhash))]
    result = await caller.result("simulateBundle", [{"transactions": txs}])
    assert result["value"]["summary"] != "succeeded", result  # the second one fails
    assert await statuses(devnode_url) == []

    _status, doc, _ = await caller.rpc("simulateBundle", [txs])  # a bare array: refused
    assert doc["error"]["code"] == -32602, doc


async def test_bundle_ids_and_signatures_are_checked_before_billing(caller: Caller) -> None:
    _, doc, _ = await caller.rpc("getBundleStatuses", [["not-a-bundle-id"]])
    assert doc["error"]["code"] == -32602, doc
    _, doc, _ = await caller.rpc("getSendStatus", ["zzz"])
    assert doc["error"]["code"] == -32602, doc
    assert await caller.result("getSendStatus", [str(Signature.default())]) is None
