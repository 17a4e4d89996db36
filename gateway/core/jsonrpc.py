"""JSON-RPC 2.0 envelope parsing: raw bytes in, a list of items out. Pure, no I/O.

Whole-request faults (not JSON, not an object or array, empty or over-long batch, an invalid single
request) stop the request with HTTP 400 ``INVALID_REQUEST`` in the HTTP error body, as the interface's
table says, its message and ``rpcCode`` naming the JSON-RPC code (-32700 or -32600); on a WebSocket,
a JSON-RPC error. Inside a batch an invalid item does not sink its neighbours: it gets its own -32600
error object, as JSON-RPC 2.0 prescribes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import orjson

from gateway.core.errors import RpcError, invalid_request_item, invalid_rpc_request, parse_error
from gateway.core.methods import MethodClass

MAX_BATCH = 100
T = TypeVar("T")


class Failure(StrEnum):
    """Why a call that was admitted got no answer from the node (what its charge depends on)."""

    UNREACHABLE = "unreachable"  # the node could not be reached: nothing was sent
    TIMED_OUT = "timed_out"  # sent; no answer within the method's timeout
    LOST = "lost"  # sent; the answer was cut off or unreadable
    CANCELLED = "cancelled"  # sent; then the caller went away or cancelled
    INTERNAL = "internal"  # sent; then the gateway itself failed


@dataclass(slots=True)
class RpcItem:
    """One call of a request, from parsing to its answer."""

    index: int
    id: Any
    method: str
    params: Any = None
    error: RpcError | None = None  # set when the item is answered without the node
    method_class: MethodClass | None = None
    price: int = 0
    response: dict[str, Any] | None = None  # the node's answer, id already restored
    sent: bool = False  # handed to the node's connection: from here on it may have reached the node
    failure: Failure | None = None  # why a sent call got no answer
    parsed_value: object = None  # what planning parsed from the params (the method's parser), for its handler
    refund: str | None = None  # set by a gateway handler: why this call is refunded whatever it answers
    refund_part: int = 0  # set by a gateway handler: credits of a charged call given back (its failed parts)

    @property
    def pending(self) -> bool:
        return self.error is None and self.response is None

    def parsed(self, kind: type[T]) -> T:
        """What planning parsed from the params, checked to be a ``kind`` (the method's parser's type)."""
        value = self.parsed_value
        if not isinstance(value, kind):
            raise TypeError(f"{self.method}: planning parsed {type(value).__name__}, expected {kind.__name__}")
        return value

    def answer(self) -> dict[str, Any]:
        if self.error is not None:
            return {"jsonrpc": "2.0", "id": self.id, "error": self.error.to_json()}
        assert self.response is not None
        return self.response


@dataclass(slots=True)
class RpcPayload:
    items: list[RpcItem]
    is_batch: bool

    def answer_bytes(self) -> bytes:
        if self.is_batch:
            return orjson.dumps([item.answer() for item in self.items])
        return orjson.dumps(self.items[0].answer())


def envelope_fault(obj: Any) -> str | None:
    """What is wrong with one request's envelope (JSON-RPC 2.0), or None; every transport checks with it."""
    if not isinstance(obj, dict):
        return "request must be a JSON object"
    if obj.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if not isinstance(obj.get("method"), str) or not obj["method"]:
        return "method must be a non-empty string"
    if "id" not in obj:
        return "id is required"
    if not _valid_id(obj["id"]):
        return "id must be a string, an integer or null"
    return None


def _valid_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _item(index: int, obj: dict[str, Any]) -> RpcItem:
    return RpcItem(index=index, id=obj["id"], method=obj["method"], params=obj.get("params"))


def parse_payload(raw: bytes) -> RpcPayload:
    """Parse a request body; raise :class:`ProxyError` (400, -32700 or -32600) for whole-request faults."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise parse_error(f"body is not valid JSON: {exc}") from exc
    if isinstance(body, list):
        return _parse_batch(body)
    fault = envelope_fault(body)
    if fault is not None:
        raise invalid_rpc_request(fault)
    return RpcPayload([_item(0, body)], is_batch=False)


_NO_ID = object()


def _parse_batch(body: list[Any]) -> RpcPayload:
    if not body:
        raise invalid_rpc_request("empty batch")
    if len(body) > MAX_BATCH:
        raise invalid_rpc_request(f"batch of {len(body)} exceeds the maximum of {MAX_BATCH}")
    items: list[RpcItem] = []
    for index, obj in enumerate(body):
        if type(obj) is dict:  # the common case, checked inline (what orjson gives: exact types)
            method, item_id = obj.get("method"), obj.get("id", _NO_ID)
            if (
                type(method) is str
                and method
                and obj.get("jsonrpc") == "2.0"
                and (item_id is None or type(item_id) is str or type(item_id) is int)
            ):
                items.append(RpcItem(index, item_id, method, obj.get("params")))
                continue
        fault = envelope_fault(obj)
        if fault is None:
            items.append(_item(index, obj))
            continue
        item_id = obj.get("id") if isinstance(obj, dict) and _valid_id(obj.get("id")) else None
        raw_method = obj.get("method") if isinstance(obj, dict) else None
        method = raw_method if isinstance(raw_method, str) else ""
        items.append(RpcItem(index=index, id=item_id, method=method, error=invalid_request_item(fault)))
    return RpcPayload(items, is_batch=True)


def request_id_of(raw: bytes) -> Any:
    """The id of a single JSON-RPC request in ``raw``, or None (not JSON, a batch, no usable id): the id
    to answer a request refused before it was parsed (a 402, a 401) with."""
    try:
        parsed = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return None
    item_id = parsed.get("id") if isinstance(parsed, dict) else None
    return item_id if _valid_id(item_id) else None
