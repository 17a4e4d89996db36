"""Property: whatever a client sends to any route (broken or odd JSON, batches, wrong params, good,
bad or half-good credentials, odd query strings), the answer is JSON in a documented error shape,
and never a 500. 502/503/504 are allowed: they are the documented answers of a failing node.

One gateway on the real parts (PostgreSQL, Redis, the devnode) serves every example.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import httpx2
import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from gateway.client import WalletSigner
from gateway.settings import Settings
from tests.auth.helpers import create_account, create_api_key
from tests.support import TEST_IP_LIMITS, serve_gateway, service_key_settings

ROUTES = [
    ("POST", "/"),
    ("POST", "/rpc"),
    ("POST", "/mcp"),
    ("POST", "/auth/challenge"),
    ("POST", "/auth/verify"),
    ("POST", "/auth/logout"),
    ("POST", "/account/api-key"),
    ("POST", "/account/confirm-deposit"),
    ("GET", "/account/info"),
    ("GET", "/account/ledger"),
    ("GET", "/account/history"),
    ("GET", "/health"),
    ("GET", "/pricing"),
    ("GET", "/capabilities"),
    ("POST", "/relay/sendBundle"),
    ("POST", "/relay/getBundleStatuses"),
    ("GET", "/relay/getTipAccounts"),
    ("GET", "/relay/tipFloor"),
    ("POST", "/bulk/getBalances"),
    ("POST", "/bulk/getTokenBalances"),
    ("POST", "/bulk/getTransactions"),
    ("POST", "/x402/settle"),
]
JSON_RPC_PATHS = {
    "/",
    "/rpc",
    "/mcp",  # MCP's errors are JSON-RPC's
    "/relay/sendBundle",
    "/relay/getBundleStatuses",
    "/relay/getTipAccounts",
    "/relay/tipFloor",
}
NODE_FAILURES = {502, 503, 504}
#: A real transaction (a SOL transfer, fee payer's slot unsigned) in base64, as /x402/settle reads one.
UNSIGNED_TX = base64.b64encode(
    bytes(
        Transaction.new_unsigned(
            Message([transfer(TransferParams(from_pubkey=Pubkey.default(), to_pubkey=Pubkey.default(), lamports=1))])
        )
    )
).decode()
METHODS = ["getSlot", "getBalance", "getBlock", "getTransaction", "getTokenAccountsByOwner", "getAssetsByOwner"]
METHODS += ["simulateBundle", "getMultipleAccounts", "getSignaturesForAddress", "sendTransaction", "noSuchMethod"]
METHODS += ["sendSmartTransaction", "sendAndConfirm", "sendBundle", "getBundleStatuses", "getInflightBundleStatuses"]
METHODS += ["getTipAccounts", "getTipFloor", "getSendStatus", "suggestPriorityFee", "getPriorityFeeEstimate"]
METHODS += ["getTransactionHistory"]
METHODS += ["initialize", "ping", "tools/list", "tools/call", "notifications/initialized"]  # MCP's (/mcp)
WORDS = ["", "2.0", "5VapWMVuzVSSNDsbA9XXTnAahcvUEUtL7szH7pT7a8GE", "z" * 88, "not base58 0OIl", "\x00", "é", *METHODS]
WORDS += ["AQID", base64.b64encode(bytes(300)).decode(), UNSIGNED_TX]  # /x402/settle's transaction: base64
KEYS = ["jsonrpc", "id", "method", "params", "signature", "pubkey", "challenge", "encoding", "ownerAddress"]
KEYS += ["maxSupportedTransactionVersion", "transactions", "limit", "before"]
KEYS += ["urgency", "accounts", "accountKeys", "transaction", "options", "priorityLevel"]
KEYS += ["addresses", "owners", "signatures"]
KEYS += ["name", "arguments", "protocolVersion", "address"]  # MCP's tools/call and initialize

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(WORDS)
    | st.text(max_size=20)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
    max_leaves=12,
)
rpc_calls = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "id": st.integers(0, 10) | st.none(), "method": st.sampled_from(METHODS)},
    optional={"params": values},
)
documents = rpc_calls | st.lists(rpc_calls | values, min_size=1, max_size=5) | values
bodies = documents.map(lambda d: json.dumps(d).encode()) | st.binary(max_size=64)  # json: integers past 64 bits
queries = st.lists(
    st.tuples(
        st.sampled_from(["limit", "offset", "cursor", "before", "type"]), st.sampled_from([*WORDS[:5], "-1", "1e99"])
    ),
    max_size=3,
)
CREDENTIALS = ["none", "api-key", "bad-api-key", "signed", "bad-signature", "bearer"]
# Half the examples go to JSON-RPC with working credentials: past auth is where most of the parsing is.
routes = st.sampled_from(ROUTES) | st.sampled_from([route for route in ROUTES if route[1] in JSON_RPC_PATHS])
kinds = st.sampled_from(CREDENTIALS) | st.sampled_from(["api-key", "signed"])


@dataclass
class Target:
    url: str
    api_key: str
    signer: WalletSigner
    http: aiohttp.ClientSession


@pytest.fixture(scope="module")
async def target(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode_url: str
) -> AsyncIterator[Target]:
    home: Path = tmp_path_factory.mktemp("bad-input")
    config = Settings.model_validate(
        {
            "home": home,
            **service_key_settings(home),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode_url,
            "block_engine_url": f"{devnode_url}/api/v1",
            "ip_limits": TEST_IP_LIMITS,
        }
    )
    signer = WalletSigner(os.urandom(32))
    async with serve_gateway(config) as gw, aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gw.url)
        db = await asyncpg.connect(database_url)
        try:
            await create_account(db, signer.pubkey)
        finally:
            await db.close()
        gw.app.meter.invalidate(signer.pubkey)
        yield Target(gw.url, key, signer, http)


def credentials(target: Target, kind: str, method: str, path: str, body: bytes) -> dict[str, str]:
    if kind == "api-key":
        return {"X-Api-Key": target.api_key}
    if kind == "bad-api-key":
        return {"X-Api-Key": target.api_key[:-1] + ("A" if target.api_key[-1] != "A" else "B")}
    if kind == "bearer":
        return {"Authorization": "Bearer not-a-session-token"}
    if kind in ("signed", "bad-signature"):
        headers = target.signer.headers(method, path, body)
        if kind == "bad-signature":
            headers["X-Signature"] = headers["X-Signature"][:-2]
        return headers
    return {}


def assert_documented_shape(path: str, status: int, document: Any) -> None:
    assert isinstance(document, dict | list), document
    if status < 400:
        return
    assert isinstance(document, dict)
    error = document.get("error")
    assert isinstance(error, dict) and isinstance(error.get("message"), str), document
    if status == 400 and path != "/mcp":  # INVALID_REQUEST in the HTTP error body on every route but MCP's
        assert "jsonrpc" not in document and error.get("code") == "INVALID_REQUEST", document
    if "jsonrpc" in document:  # JSON-RPC paths, and a 402 anywhere (the spec gives it a JSON-RPC code)
        assert isinstance(error.get("code"), int), document
        assert path in JSON_RPC_PATHS or status == 402, document
    else:
        assert isinstance(error.get("code"), str) and isinstance(error.get("requestId"), str), document


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=routes, body=bodies, query=queries, kind=kinds)
async def test_no_input_gets_a_500_or_an_undocumented_answer(
    target: Target, route: tuple[str, str], body: bytes, query: list[tuple[str, str]], kind: str
) -> None:
    method, path = route
    data = body if method == "POST" else b""
    headers = credentials(target, kind, method, path, data)
    if path == "/mcp":  # what the streamable-HTTP transport requires of every client, so bodies get parsed
        headers = {**headers, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with target.http.request(
        method, target.url + path, params=query if method == "GET" else None, data=data or None, headers=headers
    ) as resp:
        raw = await resp.read()
    event(f"{resp.status}")  # --hypothesis-show-statistics: how often each answer came
    assert resp.status < 500 or resp.status in NODE_FAILURES, (resp.status, raw[:300])
    if path == "/mcp" and resp.status == 202:  # MCP: a notification or a response is accepted with no body
        assert raw == b""
        return
    assert_documented_shape(path, resp.status, orjson.loads(raw))


@pytest.mark.parametrize(
    ("path", "body", "rpc_code", "words"),
    [
        ("/", orjson.dumps([{"jsonrpc": "2.0", "id": i, "method": "getSlot"} for i in range(101)]), -32600, "101"),
        ("/rpc", b"[]", -32600, "empty batch"),
        ("/rpc", b'{"jsonrpc": "2.0", "id": 1, "method": "getSlot"', -32700, "not valid JSON"),
        ("/", b'{"jsonrpc": "2.0", "method": "getSlot"}', -32600, "id is required"),
        ("/relay/sendBundle", b'{"jsonrpc": "2.0", "id": 1, "method": "getSlot"}', -32600, "sendBundle"),
    ],
)
async def test_a_malformed_json_rpc_body_is_400_invalid_request_in_the_http_error_shape(
    target: Target, path: str, body: bytes, rpc_code: int, words: str
) -> None:
    """Issue 39: the interface's table answers 400 with ``{error: {code: "INVALID_REQUEST", message,
    requestId}}`` on the JSON-RPC routes too; the JSON-RPC code rides along as ``rpcCode``."""
    async with httpx2.AsyncClient() as http:
        answer = await http.post(target.url + path, content=body, headers={"X-Api-Key": target.api_key})
    assert answer.status_code == 400, answer.text
    document = answer.json()
    assert set(document) == {"error"}, document
    error = document["error"]
    assert error["code"] == "INVALID_REQUEST" and words in error["message"], document
    assert error["rpcCode"] == rpc_code and error["requestId"] == answer.headers["X-Request-Id"], document
