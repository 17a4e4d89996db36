"""Issue 49: numbers and ids of thousands of digits, where Python's ``int()`` refuses more than 4,300
(a ``ValueError`` that was a 500 ``INTERNAL_ERROR`` and a logged traceback). Each is refused in the
documented shape, a batch's bad item with its own -32602 beside its neighbours' answers, and nothing
is logged as a crash."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from devnode.node import Devnode
from gateway.core.errors import RpcCode
from tests.transports.target import Target, serve_target

MINT = "So11111111111111111111111111111111111111112"
DIGITS = "7" * 5_000


@pytest.fixture(scope="module")
async def target(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode: Devnode
) -> AsyncIterator[Target]:
    home: Path = tmp_path_factory.mktemp("huge-numbers")
    async with serve_target(home, database_url, redis_url, devnode) as target:
        yield target


@pytest.fixture(autouse=True)
def no_crash_before(target: Target) -> None:
    target.crashes.take()  # each test reads only what its own requests logged


async def post(target: Target, path: str, document: Any) -> tuple[int, Any]:
    headers = {"X-Api-Key": target.api_key, "Content-Type": "application/json"}
    async with target.http.post(target.url + path, data=orjson.dumps(document), headers=headers) as resp:
        return resp.status, orjson.loads(await resp.read())


def sell(item_id: int, token_amount: Any) -> dict[str, Any]:
    params = [{"mint": MINT, "token_amount": token_amount}]
    return {"jsonrpc": "2.0", "id": item_id, "method": "executeSell", "params": params}


@pytest.mark.parametrize("amount", [DIGITS, "-" + DIGITS, DIGITS + ".5", " " + DIGITS])
async def test_a_sell_of_5000_digits_is_a_32602(target: Target, amount: str) -> None:
    status, answer = await post(target, "/", sell(1, amount))
    assert status == 200, answer
    assert answer["error"]["code"] == RpcCode.INVALID_PARAMS and "token_amount" in answer["error"]["message"], answer
    assert len(answer["error"]["message"]) < 300, answer  # the amount is not echoed whole
    assert target.crashes.take() == []


@pytest.mark.parametrize("amount", ["1" * 5_000, "0." + "1" * 5_000, "1" * 40 + ".5"])
async def test_a_snipe_of_thousands_of_digits_is_a_32602(target: Target, amount: str) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "executeSnipe", "params": [{"mint": MINT, "amount_sol": amount}]}
    status, answer = await post(target, "/", call)
    assert status == 200, answer
    assert answer["error"]["code"] == RpcCode.INVALID_PARAMS and "amount_sol" in answer["error"]["message"], answer
    assert target.crashes.take() == []


async def test_a_batch_with_a_sell_of_5000_digits_answers_every_item(target: Target) -> None:
    batch = [{"jsonrpc": "2.0", "id": 0, "method": "getSlot"}, sell(1, DIGITS), sell(2, "0")]
    status, answer = await post(target, "/", batch)
    assert status == 200, answer
    by_id = {item["id"]: item for item in answer}
    assert isinstance(by_id[0]["result"], int), answer
    assert by_id[1]["error"]["code"] == RpcCode.INVALID_PARAMS, answer
    assert by_id[2]["error"]["code"] == RpcCode.INVALID_PARAMS, answer
    assert target.crashes.take() == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", f"/webhooks/{DIGITS}"),
        ("POST", f"/webhooks/{DIGITS}/rotate-secret"),
        ("POST", f"/webhooks/{DIGITS}/replay"),
        ("POST", f"/webhooks/{DIGITS}/resume"),
        ("DELETE", f"/webhooks/{'0' * 5_000}1"),
    ],
)
async def test_a_webhook_id_of_5000_digits_is_404(target: Target, method: str, path: str) -> None:
    headers = {"X-Api-Key": target.api_key, "Content-Type": "application/json"}
    body = b"{}" if method == "POST" else None
    async with target.http.request(method, target.url + path, data=body, headers=headers) as resp:
        status, answer = resp.status, orjson.loads(await resp.read())
    assert status == 404 and answer["error"]["code"] == "NOT_FOUND", answer
    assert target.crashes.take() == []


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("literal", [str(2**64 + 1), str(-(2**63) - 1), "1" + "0" * 4_999])
async def test_an_mcp_argument_past_64_bits_is_refused_as_its_rpc_twin_is(target: Target, literal: str) -> None:
    """The MCP SDK parses numbers into Python integers of any size; the tool's JSON-RPC body (orjson) holds
    64 bits: an integer past them was a TypeError, the tool call's -32603 and a logged traceback."""
    arguments = {"mint": MINT, "token_amount": "<amount>"}
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "executeSell", "arguments": arguments},
    }
    body = orjson.dumps(call).replace(b'"<amount>"', literal.encode())
    headers = {"X-Api-Key": target.api_key, **MCP_HEADERS}
    async with target.http.post(target.url + "/mcp", data=body, headers=headers) as resp:
        status, answer = resp.status, orjson.loads(await resp.read())
    if "error" in answer:  # a number pydantic cannot hold: the SDK's parse error (docs/api.md, MCP)
        assert status == 400 and answer["error"]["code"] == -32700, answer
    else:
        assert status == 200 and answer["result"]["isError"] is True, answer
        detail = orjson.loads(answer["result"]["content"][1]["text"])
        assert detail["error"]["code"] == -32602 and "integer" in detail["error"]["message"], answer
    assert target.crashes.take() == []


async def test_a_sell_of_5000_digits_over_ws_is_a_32602_beside_its_neighbours(target: Target) -> None:
    url = target.url.replace("http://", "ws://") + "/ws"
    batch = [{"jsonrpc": "2.0", "id": 0, "method": "getSlot"}, sell(1, DIGITS)]
    async with connect(url, subprotocols=[Subprotocol(f"auth.{target.api_key}"), Subprotocol("solana-rpc")]) as ws:
        await ws.send(orjson.dumps(sell(5, DIGITS)).decode())
        alone = orjson.loads(await asyncio.wait_for(ws.recv(), 30))
        await ws.send(orjson.dumps(batch).decode())
        by_id: dict[int, Any] = {}
        while len(by_id) < 2:  # a batch's answers, in one message or several
            received = orjson.loads(await asyncio.wait_for(ws.recv(), 30))
            by_id.update((item["id"], item) for item in (received if isinstance(received, list) else [received]))
    assert alone["id"] == 5 and alone["error"]["code"] == RpcCode.INVALID_PARAMS, alone
    answers = list(by_id.values())
    assert isinstance(by_id[0]["result"], int) and by_id[1]["error"]["code"] == RpcCode.INVALID_PARAMS, answers
    assert target.crashes.take() == []


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("getAccountInfo", [MINT, {"encoding": "base64", "dataSlice": "x"}]),
        ("getAccountInfo", [MINT, {"encoding": "base64", "dataSlice": {"offset": DIGITS, "length": 1}}]),
        ("getMultipleAccounts", [[MINT], {"encoding": "base64", "dataSlice": [1]}]),
        ("getBlockProduction", [{"range": "x"}]),
    ],
)
async def test_a_config_object_of_the_wrong_shape_is_the_nodes_32602(target: Target, method: str, params: Any) -> None:
    """Found by the method fuzz: the devnode (the node here) answered -32603 for these, which the gateway
    passes on as the node's answer; a Solana node answers -32602."""
    status, answer = await post(target, "/", {"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert status == 200 and answer["error"]["code"] == RpcCode.INVALID_PARAMS, answer


async def test_the_402_of_a_path_of_5000_digits_has_a_header_clients_can_read(target: Target) -> None:
    """Found by the route fuzz: the PAYMENT-REQUIRED header echoed the whole URL (base64 of the terms past
    8 KiB), and aiohttp (like many proxies) could not read the answer at all."""
    async with target.http.delete(f"{target.url}/webhooks/{DIGITS}") as resp:  # no credentials: the 402
        status, header = resp.status, resp.headers["PAYMENT-REQUIRED"]
    terms = orjson.loads(base64.b64decode(header))
    assert status == 402 and len(header) < 8_000, (status, len(header))
    assert terms["resource"]["url"] == f"{target.url}/webhooks", terms["resource"]
