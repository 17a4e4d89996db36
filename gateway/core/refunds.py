"""Which admitted calls are refunded, judged from the answer. Pure.

The spec refunds what failed on our side or the node's, never what the caller asked wrongly:
``getBlock`` outside retention (-32004 'cleaned up'), preflight rejections (-32002), an unhealthy
node (-32005 'unhealthy'), read timeouts (-32007; a send that timed out may have been broadcast, so
it stays charged), a proxy in front of the node that failed (-32003 without 'signature'), and any
call the node never answered. Whole-call failures (502/503/504) are refunded by the stage.
"""

from __future__ import annotations

from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import MethodClass

SEND_CLASSES = frozenset({MethodClass.SEND, MethodClass.SEND_AND_CONFIRM, MethodClass.SEND_BUNDLE})


def refund_reason(item: RpcItem) -> str | None:
    """Why ``item`` (admitted and forwarded) is refunded, or None when it is charged."""
    if item.response is None:
        return "the node sent no answer" if item.error is not None else "not forwarded"
    error = item.response.get("error")
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    message = str(error.get("message", "")).lower()
    if code == -32004 and "cleaned up" in message:
        return "block outside retention"
    if code == -32002:
        return "preflight rejected"
    if code == -32005 and "unhealthy" in message:
        return "node unhealthy"
    if code == -32007 and item.method_class not in SEND_CLASSES:
        return "read timed out"
    if code == -32003 and "signature" not in message:
        return "backend unavailable"
    return None
