"""The last JSON-RPC stages: parse and plan the body, then send what is left to the node.

Items already answered (invalid, denied, refused by a later stage) are not sent. The rest go to the
node in one request, with ids replaced by their positions so duplicate client ids cannot mix answers
up; the client's ids are put back on the way out.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.core.errors import RpcError, backend_unavailable, timed_out
from gateway.core.jsonrpc import Failure, RpcItem, RpcPayload, parse_payload
from gateway.core.methods import CLASS_TIMEOUT_S, MethodClass, PriceTable
from gateway.core.planning import plan_item
from gateway.pipeline import Call, Handler, Reply
from gateway.upstream import Upstream, UpstreamTimeout, UpstreamUnavailable


class ParseStage:
    """Parse the body and apply per-method rules; free rejections happen here."""

    def __init__(self, prices: PriceTable, implemented: frozenset[str] = frozenset()) -> None:
        self.prices = prices
        self.implemented = implemented

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        payload = parse_payload(call.body)
        call.payload = payload
        for item in payload.items:
            if item.error is None:
                plan_item(item, self.prices, self.implemented)
        return await next_handler(call)


class Forwarder:
    """Endpoint: forward pending items to the node and assemble the answer."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    async def __call__(self, call: Call) -> Reply:
        payload = call.payload
        assert payload is not None
        pending = [item for item in payload.items if item.pending]
        if pending:
            await self._forward(pending, payload)
        return Reply(200, payload.answer_bytes())

    async def _forward(self, items: list[RpcItem], payload: RpcPayload) -> None:
        timeout = max(CLASS_TIMEOUT_S.get(i.method_class or MethodClass.READ_CHEAP, 5.0) for i in items)
        calls = [{"jsonrpc": "2.0", "id": i.index, "method": i.method, "params": i.params} for i in items]
        body = orjson.dumps(calls if payload.is_batch else calls[0])
        for item in items:
            item.sent = True  # from here on the node may see it, whatever happens next
        try:
            raw = await self.upstream.post(body, timeout)
        except UpstreamTimeout as exc:
            _failed(items, Failure.TIMED_OUT)
            raise timed_out(items[0].method if len(items) == 1 else "batch", timeout) from exc
        except UpstreamUnavailable as exc:
            _failed(items, Failure.LOST if exc.sent else Failure.UNREACHABLE)
            raise backend_unavailable(f"upstream node unavailable: {exc}") from exc
        try:
            answers = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            _failed(items, Failure.LOST)
            raise backend_unavailable("upstream node sent a body that is not JSON") from exc
        _attach(items, answers)


def _failed(items: list[RpcItem], failure: Failure) -> None:
    for item in items:
        item.failure = failure


def _attach(items: list[RpcItem], answers: Any) -> None:
    by_index: dict[int, dict[str, Any]] = {}
    if isinstance(answers, list):
        by_index = {a["id"]: a for a in answers if isinstance(a, dict) and isinstance(a.get("id"), int)}
    elif isinstance(answers, dict) and isinstance(answers.get("id"), int):
        by_index = {answers["id"]: answers}
    whole_error = answers.get("error") if isinstance(answers, dict) and answers.get("id") is None else None
    for item in items:
        answer = by_index.get(item.index)
        if answer is not None:
            answer["id"] = item.id
            item.response = answer
        elif isinstance(whole_error, dict):
            item.error = RpcError(whole_error.get("code", -32603), str(whole_error.get("message", "")))
        else:
            item.error = RpcError(-32603, "Internal error: the node sent no answer for this call")
