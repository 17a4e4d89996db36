"""One frame per subscription id for the node's latest notification, shared by the sessions that use it."""

from __future__ import annotations

import orjson

from gateway.pubsub.session import Frames

HEAD = b'{"jsonrpc":"2.0","method":"slotNotification","params":{"result":'


def tail(sub_id: int) -> bytes:
    return b',"subscription":' + str(sub_id).encode() + b"}}"


def test_sessions_with_the_same_subscription_id_share_the_frame_of_a_notification() -> None:
    frames = Frames()
    result = orjson.dumps({"slot": 7})
    first = frames.notification(result, HEAD, tail(1), "slotNotification")
    again = frames.notification(result, HEAD, tail(1), "slotNotification")  # another session's tail, equal
    other = frames.notification(result, HEAD, tail(2), "slotNotification")
    assert again is first and other is not first
    assert orjson.loads(first.body) == {
        "jsonrpc": "2.0",
        "method": "slotNotification",
        "params": {"result": {"slot": 7}, "subscription": 1},
    }
    assert orjson.loads(other.body)["params"]["subscription"] == 2
    assert (first.price, first.method) == (1, "slotNotification")


def test_the_next_notification_gets_frames_of_its_own() -> None:
    frames = Frames()
    old = frames.notification(orjson.dumps({"slot": 7}), HEAD, tail(1), "slotNotification")
    new = frames.notification(orjson.dumps({"slot": 8}), HEAD, tail(1), "slotNotification")
    assert orjson.loads(new.body)["params"]["result"] == {"slot": 8}
    assert orjson.loads(old.body)["params"]["result"] == {"slot": 7}
