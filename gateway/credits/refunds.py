"""Which admitted calls are refunded: one rule for every way a call can end. Pure.

A caller pays for what the node did for them, and a call that may have reached the node is charged
whatever happens to the caller afterwards. So:

- never sent, or the node could not be reached: refunded;
- sent, then the caller went away (a disconnect, a cancelled request): charged;
- sent, no usable answer (timeout, answer lost, our own failure): reads are refunded; sends stay
  charged, since a send that reached the node may have been broadcast;
- answered: charged, except the node's own failures: ``getBlock`` outside retention (-32004
  'cleaned up'), an unhealthy node (-32005 'unhealthy', or Agave's 'Node is behind by N slots'), a read
  that timed out at the node (-32007), a proxy in front of the node that failed (-32003 without
  'signature'), and a batch item the node left unanswered. A preflight rejection of
  ``sendTransaction`` (-32002) is charged: the node ran the simulation the caller asked for
  (``simulateTransaction`` is priced for that).
"""

from __future__ import annotations

from gateway.core.jsonrpc import Failure, RpcItem
from gateway.core.methods import MethodClass

SEND_CLASSES = frozenset({MethodClass.SEND, MethodClass.SEND_AND_CONFIRM, MethodClass.SEND_BUNDLE})

_NO_ANSWER = {
    Failure.TIMED_OUT: "read timed out",
    Failure.LOST: "the node's answer was lost",
    Failure.INTERNAL: "internal error",
}


def refund_reason(item: RpcItem) -> str | None:
    """Why ``item`` (admitted) is refunded, or None when it is charged."""
    if item.refund is not None:  # the gateway answered it itself and knows (a simulation that failed...)
        return item.refund
    if item.response is not None:
        return _answer_refund(item)
    if not item.sent or item.failure is Failure.UNREACHABLE:
        return "did not reach the node"
    if item.failure is None:
        return "the node sent no answer for this call"  # a batch answer that left this item out
    if item.failure is Failure.CANCELLED or item.method_class in SEND_CLASSES:
        return None
    return _NO_ANSWER[item.failure]


def _answer_refund(item: RpcItem) -> str | None:
    assert item.response is not None
    error = item.response.get("error")
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    message = str(error.get("message", "")).lower()
    if code == -32004 and "cleaned up" in message:
        return "block outside retention"
    if code == -32005 and ("unhealthy" in message or "behind" in message):
        return "node unhealthy"
    if code == -32007 and item.method_class not in SEND_CLASSES:
        return "read timed out"
    if code == -32003 and "signature" not in message:
        return "backend unavailable"
    return None
