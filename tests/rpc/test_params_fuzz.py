"""Fuzzing the JSON-RPC params decoder: every method's parameter rules, then whole bodies through the
in-process JSON-RPC path (parse, plan, the response cache, the forwarder) to the session's devnode.

Any params either plan (a price, pending) or are refused free with a JSON-RPC error whose message is
short (the params are never echoed whole), holding memory in proportion to the params (``tracemalloc``:
allocations, not time; the suite has no timed assertions). Any body, deep, huge or ill-typed, gets an
answer that is never a 500 and is bounded by sizes: what the node may send (its read bound, kept low
here) and a little per call, plus what the caller sent (a JSON-RPC answer echoes ids and method names).
The example: params nested 300 deep, which JSON parsing allows (1,024) and re-serializing them for
the node did not (orjson stops at 255): a 500 before planning bounded the depth.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from gateway.app.features import method_registry
from gateway.core.errors import RpcCode
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import MethodClass, PriceTable
from gateway.node.http import HttpUpstream
from gateway.pipeline.stages import Call, Handler, ReplyStyle, compose, error_boundary
from gateway.rpc.forward import Forwarder, ParseStage
from gateway.rpc.planning import plan_item
from gateway.rpc.response_cache import ResponseCache
from tests.methods import registry

PRICES = PriceTable.default()
ALL = [spec.name for spec in method_registry()]
LOCAL = [spec.name for spec in method_registry() if spec.local]
NODE = [spec.name for spec in method_registry() if not spec.local and spec.cls is not MethodClass.DENIED]
REGISTRY = registry(*LOCAL)  # every local method's handler registered: their parsers run too
#: A refusal's message may name a field or a limit, never repeat the params.
MAX_MESSAGE = 1024
# Planning may hold a few copies of the params (the parsed document, a normalised config) and a fixed
# overhead; past this it grows faster than its input.
MEMORY_PER_PARAMS_BYTE = 16
MEMORY_OVERHEAD = 256 * 1024
NODE_ANSWER_BYTES = 256 * 1024  # the node's read bound in the pipeline below
PER_CALL = 4096  # an error object, the id and method echoed aside

WORDS = ["", "finalized", "confirmed", "processed", "json", "jsonParsed", "base64", "base58", "full", "none"]
WORDS += ["11111111111111111111111111111111", "5VapWMVuzVSSNDsbA9XXTnAahcvUEUtL7szH7pT7a8GE", "z" * 88, "0OIl"]
WORDS += ["So11111111111111111111111111111111111111112", "AQID", "low", "high", "all", "1.5", "-1", "\x00", "é"]
FIELDS = ["encoding", "commitment", "maxSupportedTransactionVersion", "transactionDetails", "rewards"]
FIELDS += ["searchTransactionHistory", "minContextSlot", "dataSlice", "filters", "limit", "before", "until"]
FIELDS += ["mint", "programId", "ownerAddress", "owner", "transactions", "accountKeys", "priorityLevel"]
FIELDS += ["options", "urgency", "simulate", "token_amount", "slippage_bps", "sol_amount", "signature"]

huge_strings = st.sampled_from([1_000, 50_000, 300_000]).map(lambda n: "x" * n)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(WORDS)
    | st.text(max_size=30)
    | huge_strings
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=12) | huge_strings, inner, max_size=5)
    ),
    max_leaves=20,
)


def nested(depth: int, leaf: Any) -> Any:
    for n in range(depth):
        leaf = [leaf] if n % 2 else {"filters": leaf}
    return leaf


deep = st.tuples(st.integers(10, 300), scalars).map(lambda t: nested(*t))
params_of = st.lists(values | deep, max_size=5) | values


def params_size(params: Any) -> int:
    return len(json.dumps(params))


@settings(max_examples=300, deadline=None)
@given(method=st.sampled_from(ALL), params=params_of)
def test_any_params_plan_or_are_refused_free_and_briefly(method: str, params: Any) -> None:
    size = params_size(params)
    item = RpcItem(index=0, id=1, method=method, params=params)
    tracemalloc.start()
    try:
        plan_item(item, REGISTRY, PRICES)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= MEMORY_OVERHEAD + MEMORY_PER_PARAMS_BYTE * size, (method, peak, size)
    if item.error is None:
        event("planned")
        assert item.pending and item.price > 0 and isinstance(item.params, list)
        return
    event(f"refused {item.error.code}")
    assert item.price == 0 and item.method_class is None  # refused before admission: free
    assert item.error.code in (RpcCode.INVALID_PARAMS, RpcCode.METHOD_NOT_FOUND, -32004), item.error
    assert len(item.error.message) <= MAX_MESSAGE, (method, item.error.message[:200])


# -- whole bodies, in process -----------------------------------------------------------------------------

calls = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | st.sampled_from(["1.0", 2]), "method": st.sampled_from(NODE) | st.text(max_size=20)},
    optional={"id": st.integers(-5, 5) | st.text(max_size=10) | st.none() | st.booleans(), "params": params_of},
)
documents = calls | st.lists(calls | values, min_size=1, max_size=8) | values
deep_bodies = st.tuples(st.sampled_from(NODE), st.integers(100, 5000)).map(
    lambda t: b'{"jsonrpc":"2.0","id":1,"method":"%s","params":%s%s}' % (t[0].encode(), b"[" * t[1], b"]" * t[1])
)
bodies = documents.map(lambda d: json.dumps(d).encode()) | deep_bodies | st.binary(max_size=64)


@pytest.fixture
async def json_rpc(devnode_url: str) -> AsyncIterator[Handler]:
    """``POST /``'s JSON-RPC stages after auth and metering (which need an account: every call here is
    admitted as is), in front of the real devnode with a low read bound."""
    upstream = HttpUpstream(devnode_url, max_answer_bytes=NODE_ANSWER_BYTES)
    cache = ResponseCache(1000, 0.0, lambda: upstream.finalized_slot)
    yield compose([error_boundary, ParseStage(method_registry(), PRICES)], Forwarder(upstream, cache=cache))
    await upstream.close()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
@example(body=b'{"jsonrpc":"2.0","id":1,"method":"getBalance","params":%s%s}' % (b"[" * 300, b"]" * 300))
async def test_any_body_is_answered_never_a_500_and_within_bounded_sizes(json_rpc: Handler, body: bytes) -> None:
    call = Call("POST", "/", {}, {}, body, style=ReplyStyle.JSONRPC)
    reply = await json_rpc(call)
    event(str(reply.status))
    assert reply.status in (200, 400, 502, 503, 504), (reply.status, reply.body[:300])
    answer = orjson.loads(reply.body)
    items = len(answer) if isinstance(answer, list) else 1
    assert len(reply.body) <= NODE_ANSWER_BYTES + PER_CALL * items + 2 * len(body), (len(reply.body), len(body))
