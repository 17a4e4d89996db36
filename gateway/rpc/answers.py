"""JSON-RPC methods the gateway answers itself, instead of forwarding them to the node.

Each is a :data:`gateway.pipeline.declaration.LocalMethod`: the forwarder hands it a pending item (already
authenticated,
planned, rate-limited and billed like any call) and it answers the item (``response`` or
``error``), saying what billing needs to know: ``item.sent`` once the transaction left,
``item.refund`` when the caller must not pay (refused before sending, a failed simulation).
:func:`gateway.app.replica.GatewayApp` registers them; a method not registered is refused free.
"""

from __future__ import annotations

from typing import Any

from gateway.core.errors import ProxyError, RpcCode, RpcError
from gateway.core.jsonrpc import Failure, RpcItem
from gateway.node.http import ChainError, UpstreamTimeout, UpstreamUnavailable
from gateway.pipeline.stages import Call


def answer(item: RpcItem, result: Any) -> None:
    item.response = {"jsonrpc": "2.0", "id": item.id, "result": result}


def unpaid(item: RpcItem, call: Call, error: ProxyError) -> None:
    """A product that bills its own price found the account short: a single call answers 402 like any
    call short of credits (``error`` is raised); a batch item gets it as its answer."""
    if call.payload is None or not call.payload.is_batch:
        raise error
    item.error = error.rpc_error()


def refuse(item: RpcItem, error: RpcError, why: str) -> None:
    """Answer with ``error`` and refund the call: it was refused before anything was done for it."""
    item.error = error
    item.refund = why


def node_error(item: RpcItem, exc: ChainError) -> None:
    """The node's (or block engine's) JSON-RPC error, as its answer: billed by the refund rule."""
    error: dict[str, Any] = {
        "code": exc.code if exc.code is not None else RpcCode.INTERNAL_ERROR,
        "message": exc.message,
    }
    if exc.data is not None:
        error["data"] = exc.data
    item.response = {"jsonrpc": "2.0", "id": item.id, "error": error}


def transport_failure(item: RpcItem, exc: UpstreamUnavailable | UpstreamTimeout, what: str = "node") -> None:
    """No answer from the peer: the item's failure (how it is billed) and a JSON-RPC error."""
    if isinstance(exc, UpstreamTimeout):
        item.failure = Failure.TIMED_OUT
        item.error = RpcError(RpcCode.TIMED_OUT, f"{item.method}: the {what} did not answer in time")
        return
    item.failure = Failure.LOST if exc.sent else Failure.UNREACHABLE
    item.error = RpcError(RpcCode.BACKEND_UNAVAILABLE, f"{item.method}: the {what} is unavailable ({exc})")


def config(item: RpcItem, at: int = 1) -> dict[str, Any]:
    value = item.params[at] if isinstance(item.params, list) and len(item.params) > at else None
    return value if isinstance(value, dict) else {}
