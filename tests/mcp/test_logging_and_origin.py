"""Issue 39: ``/mcp`` declares and honours MCP logging (``logging/setLevel``, ``notifications/message``),
and its DNS-rebinding rule accepts the gateway's own origin while refusing foreign ones; through the
mcp SDK's own client where it can speak, raw HTTP where the request must be malformed or forged."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.mcp.test_mcp import initialize, post, tools_call
from tests.sending.helpers import Caller
from tests.support import RunningGateway

pytestmark = pytest.mark.integration


@asynccontextmanager
async def logging_session(
    url: str, key: str, received: list[types.LoggingMessageNotificationParams]
) -> AsyncIterator[ClientSession]:
    async def collect(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)

    async with (
        httpx2.AsyncClient(headers={"X-Api-Key": key}) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write, logging_callback=collect) as session,
    ):
        await session.initialize()
        yield session


async def test_logging_is_declared_and_set_level_answers_empty(gateway: RunningGateway, caller: Caller) -> None:
    received: list[types.LoggingMessageNotificationParams] = []
    async with logging_session(gateway.url, caller.headers["X-Api-Key"], received) as session:
        assert session.initialize_result is not None
        assert session.initialize_result.capabilities.logging is not None
        assert await session.set_logging_level("info") == types.EmptyResult()


async def test_a_caller_that_set_info_gets_each_calls_billing_note(gateway: RunningGateway, caller: Caller) -> None:
    received: list[types.LoggingMessageNotificationParams] = []
    async with logging_session(gateway.url, caller.headers["X-Api-Key"], received) as session:
        before = await session.call_tool("getSlot", {})  # no level set yet: no notification
        assert not before.is_error and received == []
        await session.set_logging_level("info")
        result = await session.call_tool("getBalance", {"address": caller.signer.pubkey})
    assert not result.is_error
    (note,) = received
    assert note.level == "info" and note.logger == "gateway"
    assert note.data["method"] == "getBalance" and note.data["httpStatus"] == 200, note
    assert isinstance(note.data["creditsRemaining"], int) and len(note.data["requestId"]) == 32


async def test_the_level_filters_notes_and_refusals_log_errors(gateway: RunningGateway, caller: Caller) -> None:
    received: list[types.LoggingMessageNotificationParams] = []
    async with logging_session(gateway.url, caller.headers["X-Api-Key"], received) as session:
        await session.set_logging_level("error")
        served = await session.call_tool("getSlot", {})
        refused = await session.call_tool("getBalance", {"address": "not a public key"})
    assert not served.is_error and refused.is_error
    (note,) = received  # the served call's info note is below "error"
    assert note.level == "error" and note.data["method"] == "getBalance" and note.data["error"], note


async def test_an_unknown_level_is_invalid_params(gateway: RunningGateway, caller: Caller) -> None:
    body = {"jsonrpc": "2.0", "id": 5, "method": "logging/setLevel", "params": {"level": "banana"}}
    async with aiohttp.ClientSession() as http:
        status, _, doc = await post(http, gateway.url, body, {**caller.headers, "MCP-Protocol-Version": "2025-06-18"})
    assert status == 200 and doc["error"]["code"] == -32602, doc


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_the_gateways_own_origin_is_served(gateway: RunningGateway, caller: Caller, host: str) -> None:
    """What the MCP conformance suite's dns-rebinding-protection sends: Host and Origin both the server's."""
    port = urlsplit(gateway.url).port
    own = {"Host": f"{host}:{port}", "Origin": f"http://{host}:{port}"}
    async with aiohttp.ClientSession() as http:
        status, _, doc = await post(http, gateway.url, initialize("2025-06-18"), {**caller.headers, **own})
    assert status == 200 and doc["result"]["capabilities"]["logging"] == {}, doc


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example.com", "Origin": "http://evil.example.com"},  # a rebound name
        {"Origin": "http://127.0.0.1:1"},  # another port on this machine: another program's page
        {"Origin": "https://localhost.evil.example"},
    ],
)
async def test_a_foreign_origin_is_refused(gateway: RunningGateway, caller: Caller, headers: dict[str, Any]) -> None:
    async with aiohttp.ClientSession() as http:
        status, _, doc = await post(http, gateway.url, initialize("2025-06-18"), {**caller.headers, **headers})
    assert status == 403 and headers["Origin"] in json.dumps(doc), doc


async def test_tool_calls_stay_json_for_a_caller_without_a_level(gateway: RunningGateway, caller: Caller) -> None:
    async with aiohttp.ClientSession() as http:
        status, headers, doc = await post(http, gateway.url, tools_call("getSlot", {}), caller.headers)
    assert status == 200 and headers["Content-Type"].startswith("application/json"), doc
