"""gRPC calls are counted in ``gateway_requests_total{wire="grpc"}`` (docs/operations.md): a charged stream,
a refused one and a unary call, each under the HTTP status of its gRPC status. The gateway's metric objects
are routed to a recording backend here (the export through Ray is tests/integration/test_prometheus_scrape.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import grpc
import pytest

from tests.grpc.client import Subscription, kind
from tests.grpc.conftest import GeyserClient, RunningStream
from tests.recorded_metrics import Recorded, recording


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    with recording() as backend:
        yield backend


async def test_grpc_calls_count_as_requests_of_wire_grpc(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection, recorded: Recorded
) -> None:
    _, key = await stream.customer(db, 10_000)
    async with grpc.aio.insecure_channel(stream.address) as channel:
        sub = Subscription(geyser, channel, key)
        await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
        await sub.until(lambda u: kind(u) == "slot")
        sub.call.cancel()  # the client leaves, as a Yellowstone client ends its endless stream
        refused = await Subscription(geyser, channel, None).error()
        assert refused.code() == grpc.StatusCode.UNAUTHENTICATED
        await geyser.grpc.GeyserStub(channel).GetSlot(geyser.pb2.GetSlotRequest(), metadata=(("x-token", key),))
    requests = {labels: n for (name, labels), n in recorded.counts.items() if name == "gateway_requests_total"}
    for _ in range(50):  # the stream's end is seen by the server just after the client's cancel
        if ("grpc", "stream", "499") in requests:
            break
        await asyncio.sleep(0.1)
        requests = {labels: n for (name, labels), n in recorded.counts.items() if name == "gateway_requests_total"}
    assert requests == {("grpc", "stream", "499"): 1, ("grpc", "stream", "401"): 1, ("grpc", "unary", "200"): 1}
