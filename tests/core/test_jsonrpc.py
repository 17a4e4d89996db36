"""JSON-RPC envelope parsing: whole-request faults are 400, batch items fail alone."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from solders.rpc.errors import InvalidRequestMessage, ParseErrorMessage
from solders.rpc.responses import GetSlotResp

from gateway.core.errors import ProxyError
from gateway.core.jsonrpc import MAX_BATCH, envelope_fault, parse_payload
from gateway.pipeline.stages import Call, ReplyStyle, Wire, render_proxy_error


def call(method: str = "getSlot", id_: object = 1, **extra: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, **extra}


def test_single_request() -> None:
    payload = parse_payload(orjson.dumps(call(params=[1])))
    assert not payload.is_batch
    assert [(i.id, i.method, i.params) for i in payload.items] == [(1, "getSlot", [1])]


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"{not json", "-32700"),
        (b"", "-32700"),
        (b"[]", "empty batch"),
        (b"42", "-32600"),
        (orjson.dumps({"id": 1, "method": "getSlot"}), "jsonrpc"),
        (orjson.dumps({"jsonrpc": "2.0", "id": 1}), "method"),
        (orjson.dumps({"jsonrpc": "2.0", "method": "getSlot"}), "id is required"),
        (orjson.dumps(call(id_=1.5)), "id must be"),
        (orjson.dumps(call(id_=True)), "id must be"),
    ],
)
def test_whole_request_faults_are_400_invalid_request(raw: bytes, needle: str) -> None:
    with pytest.raises(ProxyError) as info:
        parse_payload(raw)
    assert info.value.status == 400
    assert info.value.constant == "INVALID_REQUEST"
    assert needle in info.value.message


def test_batch_limit_is_100() -> None:
    assert len(parse_payload(orjson.dumps([call(id_=i) for i in range(MAX_BATCH)])).items) == MAX_BATCH
    with pytest.raises(ProxyError, match="exceeds the maximum of 100"):
        parse_payload(orjson.dumps([call(id_=i) for i in range(MAX_BATCH + 1)]))


def test_invalid_batch_item_gets_its_own_error() -> None:
    payload = parse_payload(orjson.dumps([call(id_="a"), {"id": 7, "method": "getSlot"}, 5]))
    good, bad, worse = payload.items
    assert good.pending and good.method == "getSlot"
    assert bad.error is not None and bad.error.code == -32600 and bad.id == 7
    assert worse.error is not None and worse.id is None
    assert [item.answer()["id"] for item in (bad, worse)] == [7, None]


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(), lambda c: st.lists(c, max_size=4)
    )
)
def test_arbitrary_json_never_escapes_as_another_error(value: object) -> None:
    try:
        payload = parse_payload(orjson.dumps(value))
    except ProxyError as exc:
        assert exc.status == 400
    else:
        assert payload.items


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", -32700),
        (b"[]", -32600),
        (orjson.dumps({"jsonrpc": "2.0", "method": "getSlot"}), -32600),
        (orjson.dumps([call(id_=i) for i in range(MAX_BATCH + 1)]), -32600),
    ],
)
def test_whole_request_faults_answer_400_invalid_request_on_every_http_route(raw: bytes, code: int) -> None:
    """HTTP 400 ``{error: {code: "INVALID_REQUEST", message, requestId, rpcCode}}`` on the JSON-RPC routes
    too (the interface's table, issue 39); on a WebSocket a JSON-RPC error a Solana client parses."""
    with pytest.raises(ProxyError) as info:
        parse_payload(raw)
    for call in (
        Call("POST", "/rpc", {}, {}, raw, style=ReplyStyle.JSONRPC),
        Call("POST", "/bulk/getBalances", {}, {}, raw),
    ):
        rest = render_proxy_error(call, info.value)
        body = orjson.loads(rest.body)
        assert rest.status == 400 and set(body) == {"error"}, body
        assert (body["error"]["code"], body["error"]["rpcCode"]) == ("INVALID_REQUEST", code), body
        assert str(code) in body["error"]["message"] and body["error"]["requestId"] == call.request_id
    ws = Call("POST", "/ws", {}, {}, raw, wire=Wire.WEBSOCKET, style=ReplyStyle.JSONRPC)
    rpc = render_proxy_error(ws, info.value)
    body = orjson.loads(rpc.body)
    assert (body["jsonrpc"], body["id"], body["error"]["code"]) == ("2.0", None, code), body
    parsed = GetSlotResp.from_json(rpc.body.decode())
    assert isinstance(parsed, ParseErrorMessage if code == -32700 else InvalidRequestMessage), parsed


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.just("2.0"),
)
_item_dicts = st.dictionaries(st.sampled_from(["jsonrpc", "method", "id", "params"]), _values)


@given(st.lists(st.one_of(_item_dicts, _values), min_size=1, max_size=20))
def test_a_batch_item_is_valid_exactly_when_envelope_fault_says_so(body: list[object]) -> None:
    """The batch parser checks the common case inline: it must agree with ``envelope_fault`` on every item."""
    items = parse_payload(orjson.dumps(body)).items
    for obj, item in zip(body, items, strict=True):
        fault = envelope_fault(obj)
        assert (item.error is None) == (fault is None), (obj, item)
        if fault is None:
            assert isinstance(obj, dict)
            assert (item.id, item.method, item.params) == (obj["id"], obj["method"], obj.get("params"))
