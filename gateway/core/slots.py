"""What a caller was shown of the chain's position, so that a call moved to another node never shows
it going backwards. Pure.

A caller's :class:`Floors` are the highest slot and block height its answers carried, per commitment
(``getSlot``'s and ``getBlockHeight``'s results, every ``context.slot``). A call is sent only to a node
known to be at or past them, and past its own ``minContextSlot`` (:func:`needs`); a node is known to be
where its last probe or its last answer put it, whichever is newer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from gateway.core.node_health import COMMITMENTS, commitment_index

#: Per commitment a slot, then per commitment a block height: the layout of every floor and position.
SIZE = 2 * len(COMMITMENTS)
#: Callers whose floors a process keeps (least recently seen forgotten first).
MAX_CALLERS = 50_000


def request_terms(params: Any) -> tuple[int, int | None]:
    """A request's commitment (index in :data:`COMMITMENTS`) and its ``minContextSlot``, from the first
    object among its params that names either."""
    if isinstance(params, list):
        for p in params:
            if isinstance(p, dict) and ("commitment" in p or "minContextSlot" in p):
                wanted = p.get("minContextSlot")
                ok = isinstance(wanted, int) and not isinstance(wanted, bool)
                return commitment_index(p.get("commitment")), wanted if ok else None
    return commitment_index(None), None


def shown(method: str, commitment: int, answer: Any) -> tuple[int, int] | None:
    """``(index, value)`` of the position an answer shows (its index in a floor), or None."""
    if not isinstance(answer, dict):
        return None
    result = answer.get("result")
    if method == "getSlot" and type(result) is int:
        return commitment, result
    if method == "getBlockHeight" and type(result) is int:
        return len(COMMITMENTS) + commitment, result
    if type(result) is dict:
        context = result.get("context")
        if type(context) is dict:
            slot = context.get("slot")
            if type(slot) is int:
                return commitment, slot
    return None


def raise_to(position: list[int], index: int, value: int) -> None:
    if value > position[index]:
        position[index] = value


def needs(floor: list[int], terms: Iterable[tuple[int, int | None]], best: list[int]) -> list[int]:
    """What a node must be at for a request: the caller's floor, raised to each call's ``minContextSlot``
    (``terms``: each call's :func:`request_terms`) as far as ``best``, the furthest any node serving it is
    known to be: a slot no node has reached is not waited for (the node answers -32016 itself)."""
    need = list(floor)
    for commitment, min_slot in terms:
        if min_slot is not None:
            raise_to(need, commitment, min(min_slot, best[commitment]))
    return need


def admits(position: list[int], need: list[int]) -> bool:
    return all(p >= n for p, n in zip(position, need, strict=True))


class Floors:
    """The floors of the callers one process served lately, by caller key (an account)."""

    def __init__(self, max_callers: int = MAX_CALLERS) -> None:
        self.max_callers = max_callers
        self._floors: OrderedDict[str, list[int]] = OrderedDict()

    def of(self, caller: str) -> list[int]:
        floor = self._floors.get(caller)
        if floor is None:
            floor = self._floors[caller] = [0] * SIZE
            if len(self._floors) > self.max_callers:
                self._floors.popitem(last=False)
        else:
            self._floors.move_to_end(caller)
        return floor

    def __len__(self) -> int:
        return len(self._floors)
