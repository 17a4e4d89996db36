"""What keeps a shared PubSub subscription whole when it moves to another node (:mod:`gateway.node.pubsub`).

- :class:`Seen`: each share's notifications, de-duplicated, so the new node's copy of one the old node
  already sent is dropped. ``slotSubscribe`` and ``rootSubscribe`` only go forward (a slot not newer than
  the last one delivered is dropped: a new node a few slots behind repeats none). The rest are keyed by
  what is the same on every node of the chain: ``slotsUpdatesSubscribe`` by slot and update type (its
  timestamp is the node's own), every other notification by its slot and its bytes, kept for the last
  ``WINDOW_SLOTS`` slots.
- :func:`catch_up`: what a client missed while no node was subscribed for it, read from the new node once
  its subscription is open: a signature's status when its transaction landed meanwhile (the node
  notifies only changes after the subscription), an account's value when it differs from the last one
  delivered (or from the value read when the share opened, :func:`baseline`).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import orjson

from gateway.node.http import HttpUpstream, rpc_call

#: Slots of notification keys a share keeps to recognize a repeat (notifications of older slots are dropped).
WINDOW_SLOTS = 150
#: The node's answer to a catch-up read is waited for at most this long.
CATCH_UP_TIMEOUT_S = 5.0
_RANKS = {"processed": 0, "confirmed": 1, "finalized": 2}
_FORWARD_ONLY = frozenset({"slotSubscribe", "rootSubscribe"})


def notification_slot(result: Any) -> int | None:
    """The slot a notification speaks of (None: it names none)."""
    if isinstance(result, int) and not isinstance(result, bool):
        return result  # rootSubscribe
    if not isinstance(result, dict):
        return None
    context = result.get("context")
    slot = context.get("slot") if isinstance(context, dict) else result.get("slot")
    return slot if isinstance(slot, int) and not isinstance(slot, bool) else None


class Seen:
    """One share's recent notifications: :meth:`fresh` says whether one was not delivered yet."""

    __slots__ = ("forward_only", "keys", "last_slot", "order", "updates", "value")

    def __init__(self, method: str) -> None:
        self.forward_only = method in _FORWARD_ONLY
        self.updates = method == "slotsUpdatesSubscribe"
        self.last_slot = -1
        self.keys: set[tuple[int, Any]] = set()
        self.order: deque[tuple[int, Any]] = deque()
        #: an account share's last value: (slot, its bytes), from a notification or :func:`baseline`
        self.value: tuple[int, bytes] | None = None

    def fresh(self, result: Any, body: bytes) -> bool:
        slot = notification_slot(result)
        if slot is None:
            return True
        if self.forward_only:
            if slot <= self.last_slot:
                return False
            self.last_slot = slot
            return True
        if slot < self.last_slot - WINDOW_SLOTS:
            return False
        key: tuple[int, Any] = (slot, result.get("type") if self.updates else hash(body))
        if key in self.keys:
            return False
        self.keys.add(key)
        self.order.append(key)
        if slot > self.last_slot:
            self.last_slot = slot
            while self.order and self.order[0][0] < slot - WINDOW_SLOTS:
                self.keys.discard(self.order.popleft())
        return True

    def note_value(self, result: Any) -> None:
        """An account notification (or read): remember its value, unless an older one than what is known."""
        slot = notification_slot(result)
        if slot is None or not isinstance(result, dict):
            return
        if self.value is None or slot >= self.value[0]:
            self.value = (slot, orjson.dumps(result.get("value")))


def _config(params: list[Any]) -> dict[str, Any]:
    return params[1] if len(params) > 1 and isinstance(params[1], dict) else {}


async def baseline(client: HttpUpstream, params: list[Any]) -> Any:
    """An account share's value as it opened (``getAccountInfo`` with the subscription's own options)."""
    return await rpc_call(client, "getAccountInfo", _account_params(params), CATCH_UP_TIMEOUT_S)


def _account_params(params: list[Any]) -> list[Any]:
    config = {k: v for k, v in _config(params).items() if k in ("commitment", "encoding", "dataSlice")}
    return [params[0], config] if config else [params[0]]


async def catch_up(method: str, params: list[Any], seen: Seen, client: HttpUpstream) -> Any | None:
    """The notification's ``result`` a client missed during a move, read from the new node, or None."""
    if method == "signatureSubscribe":
        return await _signature(params, client)
    if method == "accountSubscribe" and seen.value is not None:
        result = await rpc_call(client, "getAccountInfo", _account_params(params), CATCH_UP_TIMEOUT_S)
        slot = notification_slot(result)
        if slot is None or not isinstance(result, dict) or result.get("value") is None:
            return None
        if slot < seen.value[0] or orjson.dumps(result["value"]) == seen.value[1]:
            return None
        return {"context": {"slot": slot}, "value": result["value"]}
    return None


async def _signature(params: list[Any], client: HttpUpstream) -> Any | None:
    """A signature's final notification when the new node already has its status at the commitment asked."""
    if not params or not isinstance(params[0], str):
        return None
    result = await rpc_call(
        client, "getSignatureStatuses", [[params[0]], {"searchTransactionHistory": False}], CATCH_UP_TIMEOUT_S
    )
    if not isinstance(result, dict):
        return None
    statuses = result.get("value")
    status = statuses[0] if isinstance(statuses, list) and statuses else None
    if not isinstance(status, dict):
        return None
    wanted = _RANKS.get(str(_config(params).get("commitment", "finalized")), 2)
    if _RANKS.get(str(status.get("confirmationStatus")), -1) < wanted:
        return None
    slot = notification_slot(result)
    if slot is None:
        slot = status.get("slot", 0)
    return {"context": {"slot": slot}, "value": {"err": status.get("err")}}
