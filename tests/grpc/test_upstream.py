"""The gateway's upstream subscription (gateway.node.geyser) against the devnode's geyser server, which
refuses a request with more than 64 filters of a kind: a refused union is never sent again; when several
streams' changes could have caused it, they are sent one at a time until the one at fault is found, and
only that stream ends."""

from __future__ import annotations

import grpc
from solders.keypair import Keypair

from devnode.node import Devnode
from gateway.core.upstreams import UpstreamNode
from gateway.node.geyser import UpstreamGeyser
from gateway.node.streams import OneStreamNode
from geyser_proto import geyser_pb2 as pb
from geyser_proto.fanout import Fanout
from geyser_proto.filters import Filters, compile_request
from geyser_proto.streaming import Outbound
from tests.grpc.client import WAIT_S, eventually


def watching(count: int) -> Filters:
    named = {f"a{n}": pb.SubscribeRequestFilterAccounts(account=[str(Keypair().pubkey())]) for n in range(count)}
    return compile_request(pb.SubscribeRequest(accounts=named))


async def test_a_refused_union_of_several_changes_is_tried_one_change_at_a_time(devnode: Devnode) -> None:
    assert devnode.grpc_url is not None
    fanout = Fanout()
    node = UpstreamNode(name="devnode", rpc_url=devnode.rpc_url, grpc_url=devnode.grpc_url)
    upstream = UpstreamGeyser(OneStreamNode(node), fanout, retry_s=0.05)
    sinks = [Outbound(100_000, 2**28) for _ in range(3)]
    slots = fanout.attach(sinks[0], compile_request(pb.SubscribeRequest(slots={"s": pb.SubscribeRequestFilterSlots()})))
    first = fanout.attach(sinks[1], watching(40))
    second = fanout.attach(sinks[2], watching(40))
    upstream.start()  # it opens with all three: 80 account filters, which the node refuses
    try:
        await eventually(lambda: sinks[2].ended is not None, "the stream whose change was refused ended")
        code, details = sinks[2].ended or (None, "")
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert details.startswith("the node's geyser endpoint refused this stream's filters: ")
        assert "too many `accounts` filters: 80 (max 64)" in details
        assert (slots.alive, first.alive, second.alive) == (True, True, False)
        assert (sinks[0].ended, sinks[1].ended, upstream.refused) == (None, None, 1)
        assert await upstream.sync(first, WAIT_S) and await upstream.sync(slots, WAIT_S)
        seen = sinks[0].queued
        await eventually(lambda: sinks[0].queued >= seen + 5, "slot updates keep coming")

        # Then changes go together again: two streams' in one request, both taken.
        await eventually(lambda: not upstream.careful, "every change was tried")
        third, fourth = fanout.attach(Outbound(100, 2**20)), fanout.attach(Outbound(100, 2**20))
        requests = upstream.requests
        fanout.replace(third, watching(10))
        fanout.replace(fourth, slots.filters)
        upstream.refresh()
        assert await upstream.sync(third, WAIT_S) and await upstream.sync(fourth, WAIT_S)
        assert upstream.requests == requests + 1
    finally:
        await upstream.stop()
