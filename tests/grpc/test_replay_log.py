"""The replay log (gateway.grpc.replay.ReplayLog), pure: segments begin at each slot's first update, a
from_slot replays a suffix of the feed, the oldest slot served depends on the commitment, and the bounds
(slots, bytes, updates) drop whole slots from the front."""

from __future__ import annotations

import pytest

from gateway.grpc.replay import Gap, NothingYet, OutOfRange, ReplayLog
from gateway.node.geyser import whole_feed
from geyser_proto import geyser_pb2 as pb
from geyser_proto.filters import CONFIRMED, FINALIZED, PROCESSED, compile_request

CREATED_BANK = 5


def slot_status(slot: int, status: int) -> pb.SubscribeUpdate:
    return pb.SubscribeUpdate(slot=pb.SubscribeUpdateSlot(slot=slot, status=status))  # type: ignore[arg-type]


def tx(slot: int, n: int) -> pb.SubscribeUpdate:
    info = pb.SubscribeUpdateTransactionInfo(signature=bytes([n]) * 64)
    return pb.SubscribeUpdate(transaction=pb.SubscribeUpdateTransaction(slot=slot, transaction=info))


def devnode_slots(first: int, last: int) -> list[pb.SubscribeUpdate]:
    """The devnode's order: at each tick the closed slot's confirmation, the root two behind, then the new slot
    (created, processed) and one transaction in it."""
    feed = []
    for slot in range(first, last + 1):
        feed += [slot_status(slot - 1, CONFIRMED), slot_status(slot - 3, FINALIZED)]
        feed += [slot_status(slot, CREATED_BANK), slot_status(slot, PROCESSED), tx(slot, slot % 256)]
    return feed


def fill(log: ReplayLog, feed: list[pb.SubscribeUpdate]) -> list[bytes]:
    raws = [update.SerializeToString() for update in feed]
    for raw, update in zip(raws, feed, strict=True):
        log.append(raw, update)
    return raws


def everything(log: ReplayLog, seq: int) -> list[bytes]:
    out: list[bytes] = []
    while batch := log.read(seq + len(out), 7):
        out += batch
    return out


def test_a_log_holds_from_the_first_slot_a_status_announces_and_replays_a_suffix_of_the_feed() -> None:
    log = ReplayLog(slots=100, max_bytes=2**20, max_updates=1_000)
    with pytest.raises(NothingYet):
        log.plan(5, PROCESSED)
    raws = fill(log, [tx(9, 1), *devnode_slots(10, 20)])  # it joins the feed in slot 9's middle
    assert (log.oldest(), log.newest) == (10, 20)  # slot 9 is not held: its beginning was missed
    plan = log.plan(15, PROCESSED)
    assert plan is not None and plan.start == plan.warm
    boundary = raws.index(slot_status(15, CREATED_BANK).SerializeToString())
    assert everything(log, plan.start) == raws[boundary:]  # the confirmations of slot 14 and 12 after it
    assert log.plan(21, PROCESSED) is None  # newer than anything held: live at once
    with pytest.raises(OutOfRange) as refused:
        log.plan(9, PROCESSED)
    assert (refused.value.oldest, refused.value.newest) == (10, 20)


def test_a_commitment_moves_the_oldest_slot_and_reads_from_where_its_holds_began() -> None:
    log = ReplayLog(slots=100, max_bytes=2**20, max_updates=1_000)
    raws = fill(log, devnode_slots(10, 20))
    # Slot s's segment finalizes s - 2 (and a finalization releases what waits for confirmation too): from
    # slots 10 and 11 the replay would release updates of slots 8 and 9, which the log never held.
    assert (log.oldest(PROCESSED), log.oldest(CONFIRMED), log.oldest(FINALIZED)) == (10, 12, 12)
    with pytest.raises(OutOfRange) as refused:
        log.plan(11, FINALIZED)
    assert refused.value.oldest == 12
    plan = log.plan(15, FINALIZED)  # the finalizations from slot 15's beginning on release slots from 13 on
    assert plan is not None
    assert raws[plan.warm] == slot_status(13, CREATED_BANK).SerializeToString()
    assert raws[plan.start] == slot_status(15, CREATED_BANK).SerializeToString()


def test_the_bounds_drop_whole_slots_from_the_front() -> None:
    by_slots = ReplayLog(slots=5, max_bytes=2**20, max_updates=1_000)
    fill(by_slots, devnode_slots(10, 30))
    assert (by_slots.oldest(), by_slots.newest, len(by_slots.segments)) == (26, 30, 5)
    size = by_slots.segments[0].nbytes  # a whole slot: five updates
    by_bytes = ReplayLog(slots=100, max_bytes=2 * size + 1, max_updates=1_000)
    fill(by_bytes, devnode_slots(10, 30))
    assert by_bytes.nbytes <= 2 * size + 1 and (by_bytes.oldest(), by_bytes.newest) == (29, 30)
    by_count = ReplayLog(slots=100, max_bytes=2**20, max_updates=11)
    fill(by_count, devnode_slots(10, 30))
    assert by_count.count == 8 and (by_count.oldest(), by_count.newest) == (29, 30)
    flood = ReplayLog(slots=100, max_bytes=2**20, max_updates=11)
    fill(flood, [*devnode_slots(10, 11), *(tx(11, n) for n in range(20))])  # one slot outgrows the bounds
    assert (flood.count, flood.oldest()) == (0, None)  # emptied: it holds again from the next slot
    fill(flood, devnode_slots(12, 12))
    assert flood.oldest() == 12


def test_a_replay_that_loses_its_place_is_told_why() -> None:
    log = ReplayLog(slots=3, max_bytes=2**20, max_updates=1_000)
    fill(log, devnode_slots(10, 12))
    plan = log.plan(10, PROCESSED)
    assert plan is not None
    fill(log, devnode_slots(13, 20))
    with pytest.raises(Gap) as lost:
        log.read(plan.start, 10)
    assert not lost.value.emptied  # it aged out
    position = log.plan(19, PROCESSED)
    assert position is not None
    log.reset()  # the upstream subscription reopens
    fill(log, devnode_slots(21, 22))
    with pytest.raises(Gap) as lost:
        log.read(position.start, 10)
    assert lost.value.emptied
    assert log.oldest() == 21  # the first slot the resumed feed announced


def test_the_whole_feed_request_asks_for_every_kind_once() -> None:
    request = whole_feed()
    filters = compile_request(request)
    assert len(filters.accounts) == len(filters.transactions) == len(filters.blocks_meta) == 1
    assert filters.accounts[0][1].accounts == frozenset() and filters.transactions[0][1].include == frozenset()
    assert request.slots["slots"].interslot_updates and filters.commitment == PROCESSED
