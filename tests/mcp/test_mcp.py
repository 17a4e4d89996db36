"""``/mcp`` through the official ``mcp`` SDK's streamable-HTTP client, and raw POSTs where the HTTP
response itself is the point (its headers, the ``initialize`` version rule, the refusals)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from multidict import CIMultiDict

from gateway.mcp.tools import TOOLS
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.sending.conftest import sending_settings
from tests.sending.helpers import Caller
from tests.support import RunningGateway, serve_gateway

pytestmark = pytest.mark.integration

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
DEVNODE_FAUCET = "11111111111111111111111111111111"  # the System program: always has a balance


@asynccontextmanager
async def mcp_session(url: str, key: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"X-Api-Key": key}) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def post(
    http: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str]
) -> tuple[int, CIMultiDict[str], Any]:
    """(HTTP status, response headers, JSON body or None) of one raw POST to /mcp."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with http.post(url + "/mcp", data=data, headers={**MCP_HEADERS, **headers}) as resp:
        text = await resp.text()
        return resp.status, resp.headers.copy(), json.loads(text) if text else None


def tools_call(name: str, arguments: dict[str, Any], request_id: int = 7) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def initialize(version: str) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_initialize_and_list_tools(gateway: RunningGateway, caller: Caller) -> None:
    async with mcp_session(gateway.url, caller.headers["X-Api-Key"]) as session:
        listed = await session.list_tools()
        assert session.initialize_result is not None
        assert session.initialize_result.protocol_version == "2025-06-18"  # the SDK offers 2025-11-25
    by_name = {tool.name: tool for tool in listed.tools}
    assert set(by_name) == {tool.name for tool in TOOLS}
    for name in ("rpc", "getBalance", "getAccountInfo", "getSlot", "getTransaction", "getSignaturesForAddress"):
        assert name in by_name
    for name in ("sendTransaction", "sendAndConfirm", "getSendStatus", "suggestPriorityFee", "getTransactionHistory"):
        assert name in by_name
    for tool in listed.tools:
        assert tool.description and "\n" not in tool.description
        assert tool.input_schema["type"] == "object"
    assert by_name["rpc"].input_schema["required"] == ["method"]
    assert by_name["getBalance"].input_schema["required"] == ["address"]


async def test_tool_calls_answer_as_json_rpc(gateway: RunningGateway, caller: Caller) -> None:
    slot_now = await caller.result("getSlot", [])
    async with mcp_session(gateway.url, caller.headers["X-Api-Key"]) as session:
        slot = await session.call_tool("getSlot", {})
        balance = await session.call_tool("getBalance", {"address": caller.signer.pubkey})
        generic = await session.call_tool("rpc", {"method": "getBalance", "params": [caller.signer.pubkey]})
        no_params = await session.call_tool("rpc", {"method": "getBlockHeight"})
    assert not slot.is_error and json.loads(text_of(slot)) >= slot_now
    assert slot.structured_content == {"result": json.loads(text_of(slot))}
    assert not balance.is_error and json.loads(text_of(balance))["value"] == 0
    # The generic tool maps onto the same method: same value (the context slot may have moved on).
    assert not generic.is_error and json.loads(text_of(generic))["value"] == json.loads(text_of(balance))["value"]
    assert not no_params.is_error and isinstance(json.loads(text_of(no_params)), int)


async def test_tool_call_is_billed_and_carries_the_headers(gateway: RunningGateway, caller: Caller) -> None:
    async with aiohttp.ClientSession() as http:
        status, headers, doc = await post(http, gateway.url, initialize("2025-06-18"), caller.headers)
        assert status == 200, doc
        assert "X-Request-Id" in headers
        session = {"Mcp-Session-Id": headers["Mcp-Session-Id"]} if "Mcp-Session-Id" in headers else {}
        common = {**caller.headers, **session, "MCP-Protocol-Version": "2025-06-18"}
        _, _, before = await caller.rpc("getSlot", [])  # getSlot costs 1 (READ_CHEAP)
        status, headers, doc = await post(
            http, gateway.url, tools_call("getBalance", {"address": DEVNODE_FAUCET}), common
        )
        assert status == 200, doc
        assert doc["id"] == 7 and doc["result"]["isError"] is False
        assert int(headers["X-Credits-Remaining"]) == before - 1  # getBalance: READ_CHEAP, 1 credit
        assert len(headers["X-Request-Id"]) == 32
        for name in ("X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"):
            assert name in headers
        status, headers, doc = await post(http, gateway.url, tools_call("getSlot", {}), common)
        assert status == 200 and int(headers["X-Credits-Remaining"]) == before - 2


async def test_sse_when_the_client_accepts_only_sse(gateway: RunningGateway, caller: Caller) -> None:
    headers = {**caller.headers, "Accept": "text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    body = json.dumps(tools_call("getSlot", {})).encode()
    async with (
        aiohttp.ClientSession() as http,
        http.post(gateway.url + "/mcp", data=body, headers={**MCP_HEADERS, **headers}) as resp,
    ):
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert "X-Credits-Remaining" in resp.headers
        text = await resp.text()
    data = [line[len("data:") :].strip() for line in text.splitlines() if line.startswith("data:")]
    message = json.loads(next(d for d in data if d))
    assert message["id"] == 7 and message["result"]["isError"] is False


async def test_refused_at_zero_credits(gateway: RunningGateway, db: asyncpg.Connection) -> None:
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gateway.url)
        await create_account(db, signer.pubkey, 0)
    async with mcp_session(gateway.url, key) as session:
        result = await session.call_tool("getSlot", {})
    assert result.is_error
    text = text_of(result)
    assert "HTTP 402" in text
    detail = json.loads(result.content[-1].text)  # type: ignore[union-attr]
    assert detail["httpStatus"] == 402
    assert detail["error"]["code"] == -32010  # insufficient credits
    assert detail["error"]["data"], detail  # the deposit terms: what to do about it


async def test_bad_params_are_a_tool_error(gateway: RunningGateway, caller: Caller) -> None:
    async with mcp_session(gateway.url, caller.headers["X-Api-Key"]) as session:
        # the node's -32602, answered and billed exactly as over JSON-RPC
        bad_address = await session.call_tool("getBalance", {"address": "not-base58-0OIl"})
        _, _, before = await caller.rpc("getSlot", [])
        # refused free by the gateway: a missing argument, params planning refuses, an unknown method
        missing = await session.call_tool("getBalance", {})
        bad_limit = await session.call_tool("getTransactionHistory", {"address": caller.signer.pubkey, "limit": 500})
        unknown_method = await session.call_tool("rpc", {"method": "noSuchMethod", "params": []})
    _, _, after = await caller.rpc("getSlot", [])
    for result in (bad_address, missing, bad_limit):
        assert result.is_error
        assert "-32602" in text_of(result), text_of(result)
    assert unknown_method.is_error and "-32601" in text_of(unknown_method)
    assert before - after == 1  # the refusals were free: only the second getSlot was charged


async def test_unknown_tool_is_a_protocol_error(gateway: RunningGateway, caller: Caller) -> None:
    async with aiohttp.ClientSession() as http:
        headers = {**caller.headers, "MCP-Protocol-Version": "2025-06-18"}
        status, _, doc = await post(http, gateway.url, tools_call("noSuchTool", {}), headers)
    assert status == 200
    assert doc["error"]["code"] == -32602 and "noSuchTool" in doc["error"]["message"]


@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-06-18"),
        ("1999-01-01", "2025-06-18"),
    ],
)
async def test_initialize_version_rule(gateway: RunningGateway, caller: Caller, requested: str, answered: str) -> None:
    async with aiohttp.ClientSession() as http:
        status, _, doc = await post(http, gateway.url, initialize(requested), caller.headers)
    assert status == 200, doc
    assert doc["result"]["protocolVersion"] == answered
    assert "tools" in doc["result"]["capabilities"]


async def test_ping_and_initialized_notification(gateway: RunningGateway, caller: Caller) -> None:
    async with aiohttp.ClientSession() as http:
        status, _, doc = await post(
            http, gateway.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, caller.headers
        )
        assert status == 202 and doc is None
        status, _, doc = await post(http, gateway.url, {"jsonrpc": "2.0", "id": 3, "method": "ping"}, caller.headers)
        assert status == 200 and doc == {"jsonrpc": "2.0", "id": 3, "result": {}}


async def test_unsupported_protocol_version_header(gateway: RunningGateway, caller: Caller) -> None:
    async with aiohttp.ClientSession() as http:
        headers = {**caller.headers, "MCP-Protocol-Version": "2026-07-28"}
        status, _, doc = await post(http, gateway.url, tools_call("getSlot", {}), headers)
    assert status == 400 and doc["error"]["code"] == -32600


async def test_no_credentials_get_what_json_rpc_gets(gateway: RunningGateway) -> None:
    async with aiohttp.ClientSession() as http:
        status, headers, doc = await post(http, gateway.url, initialize("2025-06-18"), {})
        async with http.post(gateway.url + "/", json=initialize("2025-06-18")) as resp:
            rpc_status, rpc_headers, rpc_doc = resp.status, resp.headers, await resp.json()
        bad_status, _, bad_doc = await post(
            http, gateway.url, initialize("2025-06-18"), {"X-Api-Key": "srpc_live_nope"}
        )
    assert status == rpc_status == 402
    assert doc["error"]["code"] == rpc_doc["error"]["code"] == -32002
    # the same terms, naming the resource asked for
    assert doc["resource"]["url"].endswith("/mcp") and rpc_doc["resource"]["url"].endswith("/")
    assert {**doc, "resource": None} == {**rpc_doc, "resource": None}
    assert "PAYMENT-REQUIRED" in headers and "PAYMENT-REQUIRED" in rpc_headers
    assert bad_status == 401, bad_doc


async def test_get_and_delete_are_405(gateway: RunningGateway, caller: Caller) -> None:
    async with aiohttp.ClientSession() as http:
        for verb in ("GET", "DELETE"):
            async with http.request(verb, gateway.url + "/mcp", headers={**MCP_HEADERS, **caller.headers}) as resp:
                assert resp.status == 405
                assert (await resp.json())["error"]["code"] == -32000


async def test_a_body_that_is_not_json_is_a_json_rpc_error(gateway: RunningGateway, caller: Caller) -> None:
    async with aiohttp.ClientSession() as http:
        headers = {**caller.headers, "Content-Type": "text/plain"}
        status, _, doc = await post(http, gateway.url, b"hello", headers)
        assert status == 415 and doc["error"]["code"] == -32600
        status, _, doc = await post(http, gateway.url, b"{not json", caller.headers)
        assert status == 400 and doc["error"]["code"] == -32700


async def test_structured_content_from_2025_06_18(gateway: RunningGateway, caller: Caller) -> None:
    async with aiohttp.ClientSession() as http:
        headers = {**caller.headers, "MCP-Protocol-Version": "2025-06-18"}
        _, _, new = await post(http, gateway.url, tools_call("getSlot", {}), headers)
        _, _, old = await post(http, gateway.url, tools_call("getSlot", {}), caller.headers)  # 2025-03-26 assumed
    assert isinstance(new["result"]["structuredContent"]["result"], int)
    assert "structuredContent" not in old["result"]
    assert isinstance(json.loads(old["result"]["content"][0]["text"]), int)


async def test_a_browser_origin_not_allowed_is_403(
    gateway: RunningGateway, caller: Caller, tmp_path: Path, database_url: str, redis_url: str, devnode_url: str
) -> None:
    """The transport spec's DNS-rebinding rule: an Origin not configured is refused before anything runs;
    agents send none; a configured one is served."""
    app = {"Origin": "https://app.example"}
    async with aiohttp.ClientSession() as http:
        status, _, doc = await post(http, gateway.url, tools_call("getSlot", {}), {**caller.headers, **app})
        assert status == 403 and "https://app.example" in doc["error"]["message"], doc
        status, _, _ = await post(http, gateway.url, tools_call("getSlot", {}), caller.headers)
        assert status == 200
        settings = sending_settings(tmp_path, database_url, redis_url, devnode_url, mcp_allowed_origins=[app["Origin"]])
        async with serve_gateway(settings) as allowing:
            status, _, doc = await post(http, allowing.url, tools_call("getSlot", {}), {**caller.headers, **app})
            assert status == 200 and not doc["result"]["isError"], doc
            evil = {"Origin": "http://localhost:5173"}
            status, _, _ = await post(http, allowing.url, tools_call("getSlot", {}), {**caller.headers, **evil})
            assert status == 403
