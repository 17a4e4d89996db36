"""Issue 4 end to end: deposits on the devnode buy credits; calls are billed by class, per item,
refunded when the node cannot answer, limited per account, with the documented headers.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import orjson
import pytest
from solders.keypair import Keypair

from tests.integration.service import (
    Customer,
    RunningService,
    confirm_deposit,
    create_api_key,
    deposit_usdc,
    post_json,
)

pytestmark = pytest.mark.integration


def rpc(method: str, params: list[Any] | None = None, id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or []}


def remaining(headers: dict[str, str]) -> int:
    return int(headers["x-credits-remaining"])


def test_the_watcher_credits_a_deposit_once(service: RunningService) -> None:
    wallet = Keypair()
    key = create_api_key(service.url, wallet)
    signature = deposit_usdc(service, wallet, 250_000)  # 0.25 USDC → 25,000 credits
    deadline = time.monotonic() + 30
    while True:  # no confirm call: the watcher actor finds it
        status, info, _ = post_json(f"{service.url}/rpc", rpc("getSlot"), {"X-Api-Key": key})
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert status == 200, info
    again = confirm_deposit(service, signature, {"X-Api-Key": key})
    assert again["already_processed"] is True and again["credits_added"] == 0, again
    assert again["new_balance"] <= 25_000


def test_each_class_is_billed_and_headers_say_so(service: RunningService, customer: Customer) -> None:
    url, headers = f"{service.url}/rpc", customer.headers
    _, _, h0 = post_json(url, rpc("getSlot"), headers)
    status, doc, h1 = post_json(url, rpc("getSlot"), headers)
    assert status == 200 and remaining(h0) - remaining(h1) == 1
    for name in ("x-request-id", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
        assert name in h1, h1
    _, _, h2 = post_json(url, rpc("getSignaturesForAddress", [str(customer.wallet.pubkey())]), headers)
    assert remaining(h1) - remaining(h2) == 5
    _, doc, h3 = post_json(url, rpc("getBlocks", [0, 5]), headers)
    assert "result" in doc and remaining(h2) - remaining(h3) == 25
    batch = [rpc("getSlot", id_=1), rpc("getBalance", [str(customer.wallet.pubkey())], id_=2), rpc("nope", id_=3)]
    status, answers, h4 = post_json(url, batch, headers)
    assert status == 200 and answers[2]["error"]["code"] == -32601
    assert remaining(h3) - remaining(h4) == 2  # two admitted items; the unknown method is free


def test_payment_required_and_insufficient_credits(service: RunningService) -> None:
    url = f"{service.url}/rpc"
    status, doc, headers = post_json(url, rpc("getSlot"), {})
    assert status == 402 and doc["error"]["code"] == -32002, doc
    assert doc["error"]["data"]["minimum_deposit_usdc"] == "0.01"
    terms = orjson.loads(base64.b64decode(headers["payment-required"]))
    assert terms["x402Version"] == 2 and terms["accepts"][0]["extra"]["feePayer"]
    key = create_api_key(service.url, Keypair())
    status, doc, headers = post_json(url, rpc("getSlot"), {"X-Api-Key": key})
    assert (status, doc["error"]["code"], doc["error"]["message"]) == (402, -32010, "insufficient credits")
    assert headers["x-credits-remaining"] == "0"


def test_rate_limit_counts_batch_items(service: RunningService, customer: Customer) -> None:
    batch = [rpc("getSlot", id_=i) for i in range(100)]
    status, answers, headers = post_json(f"{service.url}/rpc", batch, customer.headers)
    assert status == 200
    limited = [a for a in answers if "error" in a]
    assert limited and all(a["error"]["code"] == -32005 for a in limited)
    assert all(a["error"]["message"] == "rate limit exceeded" for a in limited)
    assert len(answers) - len(limited) <= int(headers["x-ratelimit-limit"])
    status, doc, headers = post_json(f"{service.url}/rpc", rpc("getSlot"), customer.headers)
    if status == 429:  # the same second: a single call is refused with Retry-After
        assert doc["error"]["code"] == -32005 and int(headers["retry-after"]) >= 1


def test_confirm_deposit_rejects_garbage(service: RunningService, customer: Customer) -> None:
    url = f"{service.url}/account/confirm-deposit"
    for body in ({"sig": "x"}, [], "text"):
        status, doc, _ = post_json(url, body, customer.headers)
        assert (status, doc["error"]["code"]) == (400, "INVALID_REQUEST"), doc
        assert doc["error"]["requestId"]
    status, doc, _ = post_json(url, {"signature": "5" * 88}, {})
    assert (status, doc["error"]["code"]) == (402, -32002), doc
    status, doc, _ = post_json(
        f"{service.url}/account/confirm-deposit", {"signature": "not-a-signature"}, customer.headers
    )
    assert status == 400 and doc["error"]["code"] == "INVALID_REQUEST", doc
