"""The forwarder matching the node's answers to the items sent: the in-order shortcut against the match
by id (pure: no node, the answers as orjson gives them)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.core.jsonrpc import RpcItem
from gateway.rpc.forward import _attach, _attach_by_id

FAILED = {"code": -32000, "message": "x"}
WHOLE_ERROR = {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "down"}}


def answer(ids: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "id": ids}, optional={"result": st.integers(), "error": st.just(FAILED)}
    )


@st.composite
def answers(draw: st.DrawFn) -> tuple[list[int], Any]:
    """Positions sent, and what came back: usually every item once in order, else shuffled, missing,
    repeated, extra or malformed answers, or one object (a whole-request error or a single answer)."""
    sent = draw(st.lists(st.integers(0, 7), min_size=1, max_size=8, unique=True))
    near = st.sampled_from([*sent, *(float(i) for i in sent), True, False, None, "0", 9])  # ids that almost match
    in_order: list[Any] = [{"jsonrpc": "2.0", "id": i, "result": i * 10} for i in sent]
    shape = draw(st.sampled_from(["in_order", "shuffled", "edited", "retyped", "extra", "drawn", "object"]))
    if shape == "in_order":
        return sent, in_order
    if shape == "shuffled":
        return sent, draw(st.permutations(in_order))
    if shape == "edited":  # in order but for one position
        at = draw(st.integers(0, len(in_order) - 1))
        in_order[at] = draw(answer(near) | st.integers() | st.none())
        return sent, in_order
    if shape == "retyped":  # in order, one id equal to its position but not an integer (1.0, True)
        at = draw(st.integers(0, len(in_order) - 1))
        in_order[at]["id"] = draw(st.sampled_from([float(sent[at]), bool(sent[at]), str(sent[at])]))
        return sent, in_order
    if shape == "extra":  # in order, then more answers (a repeated id: the last one wins)
        return sent, in_order + draw(st.lists(answer(near), min_size=1, max_size=3))
    if shape == "drawn":
        return sent, draw(st.lists(answer(near) | st.integers(), max_size=9))
    return sent, draw(answer(near) | st.just(WHOLE_ERROR))


@given(case=answers())
def test_answers_in_order_are_attached_as_the_match_by_id_attaches_them(case: tuple[list[int], Any]) -> None:
    """Whatever the node sends, each item ends with the same answer (its client id restored) or error."""
    sent, raw = case

    def attached(attach: Any) -> list[tuple[Any, Any]]:
        items = [RpcItem(index=i, id=f"client-{i}", method="getSlot") for i in sent]
        attach(items, copy.deepcopy(raw))
        return [(item.response, item.error) for item in items]

    assert attached(_attach) == attached(_attach_by_id)
