"""The de-duplication that keeps a moved PubSub share whole (gateway/node/pubsub_moves.py): pure rules, on
the shapes the node sends (a repeat from the new node is dropped; a new notification never is)."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.node.pubsub_moves import WINDOW_SLOTS, Seen


def fresh(seen: Seen, result: Any) -> bool:
    return seen.fresh(result, orjson.dumps(result))


def test_slots_only_go_forward() -> None:
    seen = Seen("slotSubscribe")
    assert [fresh(seen, {"parent": s - 1, "root": s - 2, "slot": s}) for s in (5, 6, 7)] == [True, True, True]
    # the new node, two slots behind, repeats 6 and 7 (its root may differ): dropped; 8 is new
    assert [fresh(seen, {"parent": s - 1, "root": s - 3, "slot": s}) for s in (6, 7, 8)] == [False, False, True]


def test_notifications_of_one_slot_are_kept_apart_by_their_bytes() -> None:
    seen = Seen("logsSubscribe")
    one = {"context": {"slot": 9}, "value": {"signature": "x", "err": None, "logs": []}}
    two = {"context": {"slot": 9}, "value": {"signature": "y", "err": None, "logs": []}}
    assert fresh(seen, one) and fresh(seen, two)
    assert not fresh(seen, one)  # the same transaction's logs from the node moved to
    assert fresh(seen, {"context": {"slot": 8}, "value": {"signature": "z", "err": None, "logs": []}})


def test_slot_updates_are_keyed_by_slot_and_type_not_by_the_nodes_timestamp() -> None:
    seen = Seen("slotsUpdatesSubscribe")
    assert fresh(seen, {"slot": 4, "type": "createdBank", "timestamp": 1})
    assert fresh(seen, {"slot": 3, "type": "frozen", "timestamp": 2})  # an older slot's later update: kept
    assert not fresh(seen, {"slot": 4, "type": "createdBank", "timestamp": 7})


def test_keys_are_kept_for_a_window_of_slots_and_older_ones_dropped() -> None:
    seen = Seen("accountSubscribe")
    first = {"context": {"slot": 1}, "value": {"lamports": 1}}
    assert fresh(seen, first)
    assert fresh(seen, {"context": {"slot": 2 + WINDOW_SLOTS}, "value": {"lamports": 2}})
    assert not fresh(seen, first)  # past the window: too old to be anything but a repeat
    assert seen.keys == {(2 + WINDOW_SLOTS, seen.order[0][1])}


def test_an_account_value_is_replaced_only_by_a_newer_one() -> None:
    seen = Seen("accountSubscribe")
    seen.note_value({"context": {"slot": 5}, "value": {"lamports": 5}})
    seen.note_value({"context": {"slot": 4}, "value": {"lamports": 4}})
    assert seen.value == (5, orjson.dumps({"lamports": 5}))
