"""Property: whatever a client sends to any route (broken or odd JSON, batches, wrong params, good,
bad or half-good credentials, odd query strings, path ids and numbers of thousands of digits), the
answer is JSON in a documented error shape, never a 500, and nothing is logged as a crash. 502/503/504
are allowed: they are the documented answers of a failing node.

One gateway on the real parts (PostgreSQL, Redis, the devnode) serves every example. The fuzz has an
account of its own: its wallet-signed ``POST /account/api-key`` rotates that account's key (issue 49:
it rotated the module's, and the tests after it got 401), and it follows the rotation. Derandomized, so
a red run replays.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from devnode.node import Devnode
from gateway.transports.openapi import openapi_document
from tests.transports.method_params import HUGE_NUMBER, encode
from tests.transports.target import Target, funded_key, serve_target

#: Every route of the OpenAPI document (``{id}``: a drawn path segment), and the raw JSON-RPC path.
ROUTES = sorted(
    [(method.upper(), path) for path, operations in openapi_document()["paths"].items() for method in operations]
    + [("POST", "/rpc"), ("GET", "/account/info")]
)
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
PUBLIC_PATHS = {"/health", "/pricing", "/capabilities", "/signals/recent", "/openapi.json"}
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
KEYS += ["url", "filter_type", "filter_value", "lifecycle_events", "signal_events", "ref_code"]  # the REST bodies'
KEYS += ["origins", "methods", "rate", "daily_credits", "mint", "token_amount", "amount_sol", "dataSlice"]
#: Numbers and ids as text of thousands of digits (Python's int() stops at 4,300), each length its own value.
LONG_DIGITS = st.builds(
    lambda sign, n: sign + "9" * n, st.sampled_from(["", "-", "0" * 5_000]), st.integers(4_200, 6_000)
)
#: A path segment where a route has ``{id}``.
IDS = LONG_DIGITS | st.sampled_from(["1", "0", "-1", str(2**63), str(2**64), "1e3", "１２", "abc", "%00"])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(WORDS)
    | st.text(max_size=20)
    | LONG_DIGITS
    | st.sampled_from([HUGE_NUMBER, 2**64, -(2**63) - 1])
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
bodies = documents.map(encode) | st.binary(max_size=64)  # json: integers past 64 bits, and HUGE_NUMBER raw
queries = st.lists(
    st.tuples(
        st.sampled_from(["limit", "offset", "cursor", "before", "type", "kind", "since_slot", "api-key"]),
        st.sampled_from([*WORDS[:5], "-1", "1e99", str(2**64)]) | LONG_DIGITS,
    ),
    max_size=3,
)
CREDENTIALS = ["none", "api-key", "bad-api-key", "signed", "bad-signature", "bearer"]
# Half the examples go to JSON-RPC with working credentials: past auth is where most of the parsing is.
routes = st.sampled_from(ROUTES) | st.sampled_from([route for route in ROUTES if route[1] in JSON_RPC_PATHS])
kinds = st.sampled_from(CREDENTIALS) | st.sampled_from(["api-key", "signed"])


@pytest.fixture(scope="module")
async def target(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode: Devnode
) -> AsyncIterator[Target]:
    home: Path = tmp_path_factory.mktemp("bad-input")
    async with serve_target(home, database_url, redis_url, devnode) as target:
        yield target


@pytest.fixture(scope="module")
async def fuzzer(target: Target, database_url: str) -> Target:
    """The fuzz's own account on the same gateway: what its examples change is its own."""
    signer, key = await funded_key(target.gateway, target.http, database_url)
    return dataclasses.replace(target, api_key=key, signer=signer)


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
        assert isinstance(error.get("code"), str), document
        # requestId? (docs/api.md, Errors): none on the public routes, nor on a body refused as it is read
        unnumbered = path in PUBLIC_PATHS or (status == 413 and error.get("code") == "PAYLOAD_TOO_LARGE")
        assert isinstance(error.get("requestId"), str) or unnumbered, document


@settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(route=routes, segment=IDS, body=bodies, query=queries, kind=kinds)
async def test_no_input_gets_a_500_or_an_undocumented_answer(
    fuzzer: Target, route: tuple[str, str], segment: str, body: bytes, query: list[tuple[str, str]], kind: str
) -> None:
    fuzzer.crashes.take()
    method, path = route[0], route[1].replace("{id}", segment)
    data = body if method == "POST" else b""
    headers = credentials(fuzzer, kind, method, path, data)
    if path == "/mcp":  # what the streamable-HTTP transport requires of every client, so bodies get parsed
        headers = {**headers, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with fuzzer.http.request(
        method, fuzzer.url + path, params=query if method == "GET" else None, data=data or None, headers=headers
    ) as resp:
        raw, content_type = await resp.read(), resp.content_type
    event(f"{resp.status}")  # --hypothesis-show-statistics: how often each answer came
    logged = fuzzer.crashes.take()
    assert logged == [], "\n".join(logged)[-6_000:]
    assert resp.status < 500 or resp.status in NODE_FAILURES, (resp.status, raw[:300])
    if path == "/mcp" and resp.status == 202:  # MCP: a notification or a response is accepted with no body
        assert raw == b""
        return
    if resp.status < 400 and route[1].endswith(".csv"):  # the exports answer CSV (docs/api.md)
        assert content_type == "text/csv", (resp.status, content_type)
        return
    document = orjson.loads(raw)
    assert_documented_shape(route[1], resp.status, document)
    if (method, path) == ("POST", "/account/api-key") and resp.status == 200:
        fuzzer.api_key = document["api_key"]  # rotated: the examples after this one use the new key


async def test_the_fuzz_left_the_modules_account_as_it_was(target: Target) -> None:
    """The key the module's other tests use still answers after the fuzz (issue 49: it did not)."""
    headers = {"X-Api-Key": target.api_key, "Content-Type": "application/json"}
    async with target.http.post(
        target.url + "/", data=b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}', headers=headers
    ) as resp:
        assert resp.status == 200, await resp.read()


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
