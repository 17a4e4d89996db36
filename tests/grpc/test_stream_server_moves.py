"""A client's gRPC stream through the gateway's stream server while the nodes behind it fail: the server over
two devnode followers (real processes, tests/node/followers.py), a real ``grpcio`` client of the public
``geyser.Geyser`` service with an API key.

Asserted: outcomes, never times. The node the stream is on killed (kill -9): the client's stream goes on,
its PROCESSED slots contiguous (none missing, none twice), one stream open the whole time and billed as
one. Every node killed: the stream ends UNAVAILABLE naming why, and a stream opened meanwhile is refused
UNAVAILABLE before anything is charged.
"""

from __future__ import annotations

import asyncpg
import grpc
import pytest

from tests.grpc.client import Subscription, eventually, kind
from tests.grpc.conftest import GeyserClient, StreamFactory
from tests.grpc.test_billing import usage
from tests.node import conftest as node_fixtures
from tests.node.followers import Followers

trio = node_fixtures.trio  # the three followers a, b and c (a session fixture)
all_running = node_fixtures.all_running
pytestmark = pytest.mark.usefixtures("all_running")


def pool_settings(trio: Followers) -> dict[str, object]:
    return {
        "upstreams": [trio.entry("a"), trio.entry("b")],
        "upstream_rpc_url": None,
        "upstream_grpc_url": None,
        "health_poll_s": 0.1,
        "upstream_probe_timeout_s": 0.5,
        "upstream_out_at_least_s": 1.0,
        "upstream_stream_silence_s": 1.5,
    }


async def test_a_client_stream_goes_on_across_a_kill_with_no_slot_missing_and_ends_only_with_no_node(
    geyser: GeyserClient, serve_stream: StreamFactory, trio: Followers, db: asyncpg.Connection
) -> None:
    processed = geyser.pb2.SlotStatus.Value("SLOT_PROCESSED")
    async with serve_stream(**pool_settings(trio)) as stream:
        upstream = stream.server.upstream
        pubkey, key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            sub = Subscription(geyser, channel, key)
            await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            await sub.ping()
            slots: list[int] = []

            async def read_slots(count: int) -> None:
                target = len(slots) + count
                while len(slots) < target:
                    update = await sub.read()
                    if kind(update) == "slot" and update.slot.status == processed:
                        slots.append(update.slot.slot)

            await read_slots(5)
            first = upstream.node_name
            assert first == "a"
            trio.kill(first)
            await read_slots(5)
            await eventually(lambda: upstream.node_name == "b", "the subscription moved to b")
            await read_slots(10)
            assert slots == list(range(slots[0], slots[0] + len(slots))), slots  # contiguous, none twice
            assert upstream.moves >= 1 and upstream.gaps == 0

            trio.kill("b")
            ended = await sub.error()
            assert ended.code() == grpc.StatusCode.UNAVAILABLE
            assert "no upstream node is in service for geyser" in (ended.details() or "")

            charged = await usage(db, stream, pubkey)
            late = Subscription(geyser, channel, key)
            await late.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            refused = await late.error()
            assert refused.code() == grpc.StatusCode.UNAVAILABLE
            assert await usage(db, stream, pubkey) == charged  # the refused stream cost nothing
    assert [method for method, _ in charged].count("grpc:Subscribe") == 1  # one stream, opened once
