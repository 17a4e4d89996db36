"""A ``getBlock`` of a block the node has cleaned up is the node's failure: charged, then refunded, through the whole
stack (gateway/credits/refunds.py). On this package's stack, which keeps 50 slots of blocks (5 s; service_env's
default), where the integration stack keeps every block for solana-py's suite."""

from __future__ import annotations

import time

import pytest

from tests.integration.service import (
    RunningService,
    funded_customer,
    post_json,
)

pytestmark = pytest.mark.integration


def test_purged_block_is_refunded(service: RunningService) -> None:
    customer = funded_customer(service, 100_000)
    assert service.env["GATEWAY_DEVNODE_RETENTION_SLOTS"] == "50"
    url, headers = f"{service.url}/rpc", customer.headers
    time.sleep(1)  # the service keeps 50 slots (5 s); slot 1 is long gone
    _, _, before = post_json(url, {"jsonrpc": "2.0", "id": 1, "method": "getSlot"}, headers)
    block = {"jsonrpc": "2.0", "id": 2, "method": "getBlock", "params": [1, {"maxSupportedTransactionVersion": 0}]}
    status, doc, after = post_json(url, block, headers)
    assert status == 200 and doc["error"]["code"] == -32004 and "cleaned up" in doc["error"]["message"], doc
    # the getBlock charged 25 and refunded 25
    assert int(before["x-credits-remaining"]) == int(after["x-credits-remaining"])
